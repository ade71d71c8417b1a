"""F.one_hot(x, num_classes=-1): the class count is max(x) + 1, a value, so ATen's one_hot reads it with
`.item()` and export cannot trace it. Capture (`capture._one_hot`) calls the custom op `workbench::one_hot_infer`
here instead (its fake result has an unbacked last size); with a given num_classes it is traced as
`x.unsqueeze(-1) == arange(num_classes)`, already pointwise.

Two kernels and one number read by the host, as bincount.py: `_max` (an int64 atomic max of x into one cell),
then the host sizes the [*x.shape, max + 1] int64 output and `_write` stores each row's 0s and its 1.
"""
from __future__ import annotations

import torch
import torch.fx as fx

from workbench.lowering.bincount import MAX_SRC
from workbench.lowering.epilogue import Unsupported
from workbench.lowering.graph import dtype, op_name
from workbench.lowering.primitives import Primitive, register

TUNABLES = ("BLOCK", "NUM_WARPS")


@torch.library.custom_op("workbench::one_hot_infer", mutates_args=())
def one_hot_infer(x: torch.Tensor) -> torch.Tensor:
    """Eager form (the trace uses only the fake one): F.one_hot with the class count read from x."""
    return torch.nn.functional.one_hot(x, -1)


@one_hot_infer.register_fake
def _(x: torch.Tensor) -> torch.Tensor:
    n = torch.library.get_ctx().new_dynamic_size()
    return x.new_empty([*x.shape, n], dtype=torch.int64)


_SRC = MAX_SRC + '''

@triton.jit
def __KNAME___write(x_ptr, out_ptr, total, nc, BLOCK: tl.constexpr):
    """out[i, c] = (x[i] == c) over the flat [rows * nc] output."""
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    m = offs < total
    row = offs // nc
    v = tl.load(x_ptr + row, mask=m, other=-1).to(tl.int64)
    tl.store(out_ptr + offs, (v == offs % nc).to(tl.int64), mask=m)
'''


def one_hot_kernel(name: str, node: fx.Node, names: dict[fx.Node, str], expr) -> tuple[str, list[str], set[str]]:  # noqa: ANN001
    x = node.args[0]
    if dtype(x) != torch.int64:  # what F.one_hot accepts
        raise Unsupported(f"unsupported: {op_name(node)} of {dtype(x)}")
    v, xv = names[node], names[x]
    launch = [f"_x = {xv}.reshape([-1]).contiguous()", "_n = _x.numel()",
              "_mx = torch.full([1], -1, dtype=torch.int64, device=dev)",
              "if _n: __KNAME___max[(triton.cdiv(_n, BLOCK),)](_x, _mx, _n, BLOCK=BLOCK, num_warps=NUM_WARPS)",
              "_nc = int(_mx.item()) + 1",  # the one value the host reads: the class count
              f"{v} = torch.empty([*{xv}.shape, _nc], dtype=torch.int64, device=dev)",
              "if _n * _nc: __KNAME___write[(triton.cdiv(_n * _nc, BLOCK),)](_x, " + v + ", _n * _nc, _nc, "
              "BLOCK=BLOCK, num_warps=NUM_WARPS)"]
    return _SRC, launch, set()


register("one_hot_infer", Primitive("one_hot", TUNABLES, one_hot_kernel))
