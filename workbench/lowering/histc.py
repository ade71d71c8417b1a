"""histc: counts of x in `bins` equal bins over [min, max], as PyTorch's CPU histogram kernel bins them.

Edges: min and max converted to x's dtype (PyTorch takes them from `linspace(min, max, bins + 1)` in that dtype);
when min == max the data's own min and max are used (`_range`, one program walking x), and when those are equal
too, min - 1 and max + 1. An element in [lo, hi] (nan never) goes to bin `int((x - lo) * bins / (hi - lo))`,
the last bin taking hi itself; fp16/bf16 round after every step, as c10::Half and BFloat16 arithmetic does, so
an element near an edge lands where PyTorch puts it. `_count` adds ones with int32 atomics (exact past fp16's
2048), `_cast` writes the counts in x's dtype.
"""
from __future__ import annotations

import torch
import torch.fx as fx

from workbench.lowering import pointwise as pw
from workbench.lowering.epilogue import Unsupported, torch_dtype
from workbench.lowering.graph import dtype, op_name
from workbench.lowering.primitives import Primitive, register

TUNABLES = ("BLOCK", "NUM_WARPS")
_FLOATS = (torch.float32, torch.float16, torch.bfloat16)


def histc_kernel(name: str, node: fx.Node, names: dict[fx.Node, str], expr) -> tuple[str, list[str], set[str]]:  # noqa: ANN001
    x = node.args[0]
    dt = dtype(x)
    bins = node.args[1] if len(node.args) > 1 else node.kwargs.get("bins", 100)
    lo = node.args[2] if len(node.args) > 2 else node.kwargs.get("min", 0)
    hi = node.args[3] if len(node.args) > 3 else node.kwargs.get("max", 0)
    if dt not in _FLOATS or not all(isinstance(a, (int, float)) for a in (bins, lo, hi)):
        raise Unsupported(f"unsupported: {op_name(node)} on {dt} or with a symbolic bin count or range")
    used: set[str] = set()

    def rnd(e: str) -> str:  # one rounding to x's dtype, kept in fp32 registers
        return f"({e})" if dt == torch.float32 else f"{pw.narrow(f'({e})', dt, used)}.to(tl.float32)"

    from_data = float(lo) == float(hi)
    src = f'''@triton.jit
def __KNAME___range(x_ptr, edge_ptr, n, BLOCK: tl.constexpr):
    """min and max of x (the edges when histc's min == max), -1/+1 apart when they are equal."""
    mn = tl.full([BLOCK], float("inf"), tl.float32)
    mx = tl.full([BLOCK], -float("inf"), tl.float32)
    for i0 in range(0, n, BLOCK):
        offs = i0 + tl.arange(0, BLOCK)
        m = offs < n
        v = tl.load(x_ptr + offs, mask=m, other=0).to(tl.float32)
        mn = tl.where(m, tl.minimum(mn, v), mn)
        mx = tl.where(m, tl.maximum(mx, v), mx)
    lo = tl.min(mn, 0)
    hi = tl.max(mx, 0)
    same = lo == hi
    lo = tl.where(same, {rnd("lo - 1.0")}, lo)
    hi = tl.where(same, {rnd("hi + 1.0")}, hi)
    two = tl.arange(0, 2)
    tl.store(edge_ptr + two, tl.where(two == 0, lo, hi))


@triton.jit
def __KNAME___count(x_ptr, edge_ptr, cnt_ptr, n, lo_c, hi_c, bins, FROM_DATA: tl.constexpr, BLOCK: tl.constexpr):
    """Each element's bin, counted with atomics (the edges: lo_c, hi_c, or _range's)."""
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    v = tl.load(x_ptr + offs, mask=m, other=0).to(tl.float32)
    if FROM_DATA:
        lo = tl.load(edge_ptr)
        hi = tl.load(edge_ptr + 1)
    else:
        lo = lo_c
        hi = hi_c
    inside = m & (v >= lo) & (v <= hi)
    pos = {rnd(f"{rnd(rnd('v - lo') + ' * bins')} / {rnd('hi - lo')}")}.to(tl.int32)
    pos = tl.where(pos >= bins, bins - 1, pos)
    tl.atomic_add(cnt_ptr + pos, tl.full([BLOCK], 1, tl.int32), mask=inside)


@triton.jit
def __KNAME___cast(cnt_ptr, out_ptr, bins, BLOCK: tl.constexpr):
    """The int32 counts in x's dtype."""
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < bins
    c = tl.load(cnt_ptr + offs, mask=m, other=0).to(tl.float32)
    tl.store(out_ptr + offs, {pw.narrow("c", dt, used)}, mask=m)
'''
    # the edges in x's dtype, as linspace(min, max, bins + 1, dtype=x.dtype) has them
    elo, ehi = (float(torch.tensor(float(e), dtype=dt)) for e in (lo, hi))
    if elo == ehi and not from_data:
        elo, ehi = float(torch.tensor(elo - 1, dtype=dt)), float(torch.tensor(ehi + 1, dtype=dt))
    xv, v = names[x], names[node]
    launch = [f"_x = {xv}.reshape([-1]).contiguous()", "_n = _x.numel()",
              f"_cnt = torch.zeros([{bins}], dtype=torch.int32, device=dev)",
              "_edge = torch.empty([2], dtype=torch.float32, device=dev)",
              f"{v} = torch.empty([{bins}], dtype={torch_dtype(dt)}, device=dev)"]
    if from_data:
        launch.append("if _n: __KNAME___range[(1,)](_x, _edge, _n, BLOCK=BLOCK, num_warps=NUM_WARPS)")
    launch += [f"if _n: __KNAME___count[(triton.cdiv(_n, BLOCK),)](_x, _edge, _cnt, _n, {elo!r}, {ehi!r}, {bins}, "
               f"FROM_DATA={from_data}, BLOCK=BLOCK, num_warps=NUM_WARPS)",
               f"__KNAME___cast[(triton.cdiv({bins}, BLOCK),)](_cnt, {v}, {bins}, BLOCK=BLOCK, num_warps=NUM_WARPS)"]
    return src, launch, used


register("histc", Primitive("histc", TUNABLES, histc_kernel))
