"""mode along one dim (values and indices): each element's count in its row, then the one element no other beats.

The dim is moved last and x viewed as [M, N]; both kernels run a program per (row, MODE_BLOCK elements) and walk
the row in MODE_BLOCK tiles, so a row is never held whole (OpInfo's reach 3000).
1. `_freq`: how many elements of the row equal each element;
2. `_pick`: element i is the mode when no j beats it, j beating i when it is more frequent, or as frequent and
   smaller, or the same value at a later index (rows of at most 2048 elements) or an earlier one (longer rows).
   The value is PyTorch's on every device: its loop over the sorted row keeps the first (smallest) value of the
   highest count. Which of the mode's equal elements the index names is the implementation's: CUDA's is the
   largest index for rows of up to 2048 elements (its fused kernel, a bitonic sort in shared memory) and the
   smallest above (measured on an H100, torch 2.11, fp32/fp16/bf16 rows of 1025 to 4097 elements), the rule
   here; the CPU's is the last of the equal run its std::sort leaves, stable (so the largest index) only below
   16 elements, an order no kernel reproduces (OpInfo's 3000-element fp16 and bf16 rows differ there).
O(N^2) compares per row, as the pull forms here do: no sort, no atomics, one writer per row.
"""
from __future__ import annotations

import torch
import torch.fx as fx

from workbench.lowering.epilogue import Unsupported, torch_dtype
from workbench.lowering.graph import dtype, op_name, val
from workbench.lowering.primitives import Primitive, register, register_tunables

TUNABLES = ("MODE_BLOCK", "NUM_WARPS")
register_tunables({"MODE_BLOCK": ([16, 32, 64, 128], 64)})
CUDA_FUSED_MAX = 2048  # rows up to this long: the largest index of equal mode values, as CUDA; longer: the smallest

SRC = '''@triton.jit
def __KNAME___freq(x_ptr, f_ptr, N, MODE_BLOCK: tl.constexpr):
    """f[row, i] = how many elements of the row equal x[row, i]."""
    row = tl.program_id(0).to(tl.int64)
    i = tl.program_id(1) * MODE_BLOCK + tl.arange(0, MODE_BLOCK)
    im = i < N
    a = tl.load(x_ptr + row * N + i, mask=im, other=0)__WIDEN__
    f = tl.zeros([MODE_BLOCK], tl.int32)
    for j0 in range(0, N, MODE_BLOCK):
        j = j0 + tl.arange(0, MODE_BLOCK)
        b = tl.load(x_ptr + row * N + j, mask=j < N, other=0)__WIDEN__
        f += tl.sum(((a[:, None] == b[None, :]) & (j[None, :] < N)).to(tl.int32), axis=1)
    tl.store(f_ptr + row * N + i, f, mask=im)


@triton.jit
def __KNAME___pick(x_ptr, f_ptr, vals_ptr, idx_ptr, N, MODE_BLOCK: tl.constexpr, FIRST: tl.constexpr):
    """The element of the row that no other beats: its value and index."""
    row = tl.program_id(0).to(tl.int64)
    i = tl.program_id(1) * MODE_BLOCK + tl.arange(0, MODE_BLOCK)
    im = i < N
    a = tl.load(x_ptr + row * N + i, mask=im, other=0)
    aw = a__WIDEN__
    fa = tl.load(f_ptr + row * N + i, mask=im, other=0)
    beaten = tl.zeros([MODE_BLOCK], tl.int32)
    for j0 in range(0, N, MODE_BLOCK):
        j = j0 + tl.arange(0, MODE_BLOCK)
        jm = j < N
        b = tl.load(x_ptr + row * N + j, mask=jm, other=0)__WIDEN__
        fb = tl.load(f_ptr + row * N + j, mask=jm, other=0)
        if FIRST:  # of equal values, the first index wins
            later = j[None, :] < i[:, None]
        else:
            later = j[None, :] > i[:, None]
        beats = (fb[None, :] > fa[:, None]) | ((fb[None, :] == fa[:, None]) & (
            (b[None, :] < aw[:, None]) | ((b[None, :] == aw[:, None]) & later)))
        beaten = beaten | tl.max((beats & jm[None, :]).to(tl.int32), axis=1)
    win = im & (beaten == 0)
    tl.store(vals_ptr + row + i * 0, a, mask=win)
    tl.store(idx_ptr + row + i * 0, i.to(tl.int64), mask=win)
'''


def mode_kernel(name: str, node: fx.Node, names: dict[fx.Node, str], expr) -> tuple[str, list[str], set[str]]:  # noqa: ANN001
    x = node.args[0]
    dt = dtype(x)
    if dt.is_complex:
        raise Unsupported(f"unsupported: {op_name(node)} on {dt}")
    r = val(x).dim()
    dim = (node.args[1] if len(node.args) > 1 else node.kwargs.get("dim", -1)) % max(r, 1)
    keepdim = bool(node.args[2] if len(node.args) > 2 else node.kwargs.get("keepdim", False))
    widen = ".to(tl.float32)" if dt in (torch.float16, torch.bfloat16) else ".to(tl.int32)" if dt == torch.bool else ""
    xv, v = names[x], names[node]
    perm = [d for d in range(max(r, 1)) if d != dim] + [dim]
    launch = [f"_xs = {xv}.reshape([1]) if {xv}.dim() == 0 else {xv}", f"_xp = _xs.permute({perm})",
              "_x = _xp.reshape([_numel(_xp.shape[:-1]), _xp.shape[-1]]).contiguous()", "_M, _N = _x.shape",
              "_f = torch.empty([_M, _N], dtype=torch.int32, device=dev)",
              f"_v = torch.empty([_M], dtype={torch_dtype(dt)}, device=dev)",
              "_i = torch.empty([_M], dtype=torch.int64, device=dev)",
              "_grid = (_M, triton.cdiv(_N, MODE_BLOCK))",
              "if _M and _N: __KNAME___freq[_grid](_x, _f, _N, MODE_BLOCK=MODE_BLOCK, num_warps=NUM_WARPS)",
              "if _M and _N: __KNAME___pick[_grid](_x, _f, _v, _i, _N, MODE_BLOCK=MODE_BLOCK, "
              f"FIRST=_N > {CUDA_FUSED_MAX}, num_warps=NUM_WARPS)"]
    back = f".unsqueeze({dim})" if keepdim and r else ""
    launch += [f"{v}_0 = _v.reshape(_xp.shape[:-1]){back}", f"{v}_1 = _i.reshape(_xp.shape[:-1]){back}"]
    return SRC.replace("__WIDEN__", widen), launch, set()


register("mode", Primitive("mode", TUNABLES, mode_kernel, tuple_out=True))
