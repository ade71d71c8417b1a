"""bincount(x, weights=None, minlength=0): counts (or weight sums) of the non-negative integers in a 1-d x.

The output's length is data-dependent, max(x) + 1 (at least minlength), so two kernels and one number read by
the host, as compaction.py does for nonzero:
1. `_max`: each program's block maximum, combined by an int64 atomic max into one cell (-1 for an empty x);
2. the host reads that cell to size the output (zeros), then `_count`: each element adds 1 (int64 atomics) or
   its weight, converted to the output's dtype (float32 weights stay float32; float64, float16, bfloat16 and
   integer weights are summed in float64, as ATen's CPU kernel does), at its value's position.
The weighted sums' order follows the atomics, not ATen's sequential loop (float rounding may differ by an ulp).
"""
from __future__ import annotations

import torch
import torch.fx as fx

from workbench.lowering.epilogue import Unsupported, torch_dtype
from workbench.lowering.graph import dtype, op_name, val
from workbench.lowering.pointwise import TL_DTYPE
from workbench.lowering.primitives import Primitive, register

TUNABLES = ("BLOCK", "NUM_WARPS")
_INTS = (torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64)

# the host reads max(x) to size the output: bincount's length, one_hot's inferred class count (one_hot.py)
MAX_SRC = '''@triton.jit
def __KNAME___max(x_ptr, mx_ptr, n, BLOCK: tl.constexpr):
    """max(x) into mx[0] (an int64 cell holding -1 before the launch)."""
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    # -1 past the end only after the cast: `other=-1` would be uint8's 255
    v = tl.where(m, tl.load(x_ptr + offs, mask=m, other=0).to(tl.int64), -1)
    tl.atomic_max(mx_ptr, tl.max(v, 0))
'''

_SRC = MAX_SRC + '''

@triton.jit
def __KNAME___count(x_ptr, w_ptr, out_ptr, n, WEIGHTED: tl.constexpr, BLOCK: tl.constexpr):
    """out[x[i]] += weights[i] (or 1)."""
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    idx = tl.load(x_ptr + offs, mask=m, other=0).to(tl.int64)
    if WEIGHTED:
        w = tl.load(w_ptr + offs, mask=m, other=0).to(__OUT__)
    else:
        w = tl.full([BLOCK], 1, __OUT__)
    tl.atomic_add(out_ptr + idx, w, mask=m)
'''


def bincount_kernel(name: str, node: fx.Node, names: dict[fx.Node, str], expr) -> tuple[str, list[str], set[str]]:  # noqa: ANN001
    x = node.args[0]
    weights = node.args[1] if len(node.args) > 1 else node.kwargs.get("weights")
    minlength = node.args[2] if len(node.args) > 2 else node.kwargs.get("minlength", 0)
    out_dt = dtype(node)
    if dtype(x) not in _INTS or val(x).dim() != 1 or not isinstance(minlength, int) or \
            out_dt not in (torch.int64, torch.float32, torch.float64):
        raise Unsupported(f"unsupported: {op_name(node)} of a {val(x).dim()}-d {dtype(x)} tensor into {out_dt}")
    v, xv = names[node], names[x]
    wv = f"{names[weights]}.contiguous()" if weights is not None else "_x"
    launch = [f"_x = {xv}.contiguous()", "_n = _x.numel()",
              "_mx = torch.full([1], -1, dtype=torch.int64, device=dev)",
              "if _n: __KNAME___max[(triton.cdiv(_n, BLOCK),)](_x, _mx, _n, BLOCK=BLOCK, num_warps=NUM_WARPS)",
              f"_nb = max(int(_mx.item()) + 1, {minlength})",  # the one value the host reads: the output's size
              f"{v} = torch.zeros([_nb], dtype={torch_dtype(out_dt)}, device=dev)",
              f"if _n: __KNAME___count[(triton.cdiv(_n, BLOCK),)](_x, {wv}, {v}, _n, "
              f"WEIGHTED={weights is not None}, BLOCK=BLOCK, num_warps=NUM_WARPS)"]
    return _SRC.replace("__OUT__", TL_DTYPE[out_dt]), launch, set()


register("bincount", Primitive("bincount", TUNABLES, bincount_kernel))
