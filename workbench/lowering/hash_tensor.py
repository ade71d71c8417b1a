"""hash_tensor(x, dim, keepdim, mode=0): the xor of the elements' 64-bit patterns over `dim` (all dims when empty).

As PyTorch documents it: each element is widened to its 64-bit kind (floats to float64, integers and bool to
int64) and its bits are xor-reduced; the result is uint64. One program per RED_BLOCK_M outputs, looping over the
reduced elements in tiles of RED_BLOCK_N, each tile read through x's strides (no copy) and folded with xor_sum;
masked lanes give 0, xor's identity. The kernel stores int64 and the host views it as uint64 (same bits).
"""
from __future__ import annotations

import torch
import torch.fx as fx

from workbench.lowering.epilogue import Unsupported
from workbench.lowering.graph import op_name, val
from workbench.lowering.primitives import Primitive, register

TUNABLES = ("RED_BLOCK_M", "RED_BLOCK_N", "NUM_WARPS")  # registered by templates.py


def _decompose(var: str, flat: str, dims: list[int], tag: str) -> list[str]:
    """Lines turning flat C-order index `flat` over `dims` into offset `var` through the strides `st{tag}{d}`."""
    out = [f"{var} = tl.zeros_like({flat})", f"rest{tag} = {flat}"]
    for d in reversed(dims):
        out += [f"{var} += (rest{tag} % sz{d}) * st{d}", f"rest{tag} = rest{tag} // sz{d}"]
    return out


def hash_tensor_kernel(name: str, node: fx.Node, names: dict[fx.Node, str], expr) -> tuple[str, list[str], set[str]]:  # noqa: ANN001
    x = node.args[0]
    dim = node.args[1] if len(node.args) > 1 else node.kwargs.get("dim", [])
    keepdim = bool(node.kwargs.get("keepdim", False))
    if node.kwargs.get("mode", 0) != 0 or not isinstance(val(x), torch.Tensor) or val(x).is_complex():
        raise Unsupported(f"unsupported: {op_name(node)} with mode {node.kwargs.get('mode')}")
    r = val(x).dim()
    red = sorted({d % r for d in dim}) if dim and r else list(range(r))
    kept = [d for d in range(r) if d not in red]
    widen = ".to(tl.float64).to(tl.int64, bitcast=True)" if val(x).dtype.is_floating_point else ".to(tl.int64)"
    L = ["pid = tl.program_id(0)", "om = pid * RED_BLOCK_M + tl.arange(0, RED_BLOCK_M)", "mm = om < M",
         *_decompose("base", "om.to(tl.int64)", kept, "m"),
         "acc = tl.zeros([RED_BLOCK_M], tl.int64)",
         "for r0 in range(0, R, RED_BLOCK_N):",
         "    orr = r0 + tl.arange(0, RED_BLOCK_N)", "    mr = orr < R",
         *["    " + ln for ln in _decompose("roff", "orr.to(tl.int64)", red, "r")],
         "    ok = mm[:, None] & mr[None, :]",
         "    v = tl.load(x_ptr + base[:, None] + roff[None, :], mask=ok)",
         f"    bits = tl.where(ok, v{widen}, 0)",
         "    acc = acc ^ tl.xor_sum(bits, axis=1)",
         "tl.store(out_ptr + om, acc, mask=mm)"]
    params = ["x_ptr", "out_ptr", "M", "R"] + [f"sz{d}" for d in range(r)] + [f"st{d}" for d in range(r)] + \
        ["RED_BLOCK_M: tl.constexpr", "RED_BLOCK_N: tl.constexpr"]
    doc = f'    """xor of the 64-bit patterns of x over dims {red} (kept: {kept}), one row per output."""'
    src = "\n".join([f"@triton.jit\ndef {name}({', '.join(params)}):", doc] + ["    " + ln for ln in L]) + "\n"
    xv, v = names[x], names[node]
    kept_shape = "".join(f"{xv}.shape[{d}], " for d in kept)
    out_shape = "".join(f"{'1' if d in red else f'{xv}.shape[{d}]'}, " for d in range(r)) if keepdim else kept_shape
    launch = [f"_M = _numel([{kept_shape}])", f"_R = _numel([{''.join(f'{xv}.shape[{d}], ' for d in red)}])",
              f"{v} = torch.empty([{out_shape}], dtype=torch.int64, device=dev)",
              f"if _M: {name}[(triton.cdiv(_M, RED_BLOCK_M),)]({xv}, {v}, _M, _R, "
              f"{''.join(f'{xv}.shape[{d}], ' for d in range(r))}{''.join(f'{xv}.stride({d}), ' for d in range(r))}"
              "RED_BLOCK_M=RED_BLOCK_M, RED_BLOCK_N=RED_BLOCK_N, num_warps=NUM_WARPS)",
              f"{v} = {v}.view(torch.uint64)"]
    return src, launch, set()


register("hash_tensor", Primitive("hash", TUNABLES, hash_tensor_kernel))
