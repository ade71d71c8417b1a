"""repeat_interleave(repeats): [0]*r0 + [1]*r1 + ..., the indices that `repeat_interleave(x, repeats, dim)`'s
decomposition gathers with (index_select follows in the graph). Count, scan, then one binary search per output.

1. `_count`: each block's sum of repeats; 2. `_scan` (compaction.py's): their exclusive offsets and the total;
3. `_ends`: each i's inclusive end, offset + block cumsum; 4. `_write`: output k is the number of ends <= k (a
binary search over the ends, `n.bit_length()` steps). The host reads the total (one int) unless the graph
gives `output_size`.
"""
from __future__ import annotations

import torch.fx as fx

from workbench.lowering.compaction import _SCAN
from workbench.lowering.epilogue import Unsupported
from workbench.lowering.graph import dtype, op_name, val
from workbench.lowering.primitives import Primitive, register

TUNABLES = ("BLOCK", "NUM_WARPS", "SCAN_CHUNK")

SRC = '''@triton.jit
def __KNAME___count(r_ptr, cnt_ptr, n, BLOCK: tl.constexpr):
    """The block's sum of repeats."""
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    r = tl.load(r_ptr + offs, mask=offs < n, other=0).to(tl.int64)
    tl.store(cnt_ptr + tl.program_id(0) + tl.arange(0, 1), tl.sum(r, 0) + tl.zeros([1], tl.int64))


@triton.jit
def __KNAME___ends(r_ptr, off_ptr, end_ptr, n, BLOCK: tl.constexpr):
    """Inclusive end of each index's run: the block's offset plus the block cumsum."""
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    r = tl.load(r_ptr + offs, mask=m, other=0).to(tl.int64)
    tl.store(end_ptr + offs, tl.load(off_ptr + tl.program_id(0)) + tl.cumsum(r, 0), mask=m)


@triton.jit
def __KNAME___write(end_ptr, out_ptr, n, total, steps, BLOCK: tl.constexpr):
    """out[k] = how many runs end at or before k (upper-bound binary search)."""
    k = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    m = k < total
    lo = tl.zeros([BLOCK], tl.int64)
    hi = tl.zeros([BLOCK], tl.int64) + n
    for _ in range(steps):
        go = m & (lo < hi)
        mid = lo + ((hi - lo) >> 1)
        e = tl.load(end_ptr + mid, mask=go, other=0)
        lo = tl.where(go & (e <= k), mid + 1, lo)
        hi = tl.where(go & (e > k), mid, hi)
    tl.store(out_ptr + k, lo, mask=m)
'''


def repeat_kernel(name: str, node: fx.Node, names: dict[fx.Node, str], expr) -> tuple[str, list[str], set[str]]:  # noqa: ANN001
    rep = node.args[0]
    if dtype(rep).is_floating_point or dtype(rep).is_complex or val(rep).dim() > 1:
        raise Unsupported(f"unsupported: {op_name(node)} of {dtype(rep)} repeats of rank {val(rep).dim()}")
    size = node.kwargs.get("output_size")
    rv, v = names[rep], names[node]
    launch = [f"_r = {rv}.reshape([-1]).contiguous()", "_n = _r.numel()", "_nb = triton.cdiv(_n, BLOCK)",
              "_cnt = torch.empty([max(_nb, 1)], dtype=torch.int64, device=dev)",
              "_off = torch.zeros([_nb + 1], dtype=torch.int64, device=dev)",
              "_end = torch.empty([max(_n, 1)], dtype=torch.int64, device=dev)",
              "if _n: __KNAME___count[(_nb,)](_r, _cnt, _n, BLOCK=BLOCK, num_warps=NUM_WARPS)",
              "if _n: __KNAME___scan[(1,)](_cnt, _off, _nb, SCAN_CHUNK=SCAN_CHUNK)",
              "if _n: __KNAME___ends[(_nb,)](_r, _off, _end, _n, BLOCK=BLOCK, num_warps=NUM_WARPS)",
              # the one value the host reads, unless the caller gave the size
              f"_total = {expr(size)}" if size is not None else "_total = int(_off[_nb].item()) if _n else 0",
              f"{v} = torch.empty([_total], dtype=torch.int64, device=dev)",
              f"if _total: __KNAME___write[(triton.cdiv(_total, BLOCK),)](_end, {v}, _n, _total, "
              "_n.bit_length() + 1, BLOCK=BLOCK, num_warps=NUM_WARPS)"]
    return SRC + "\n\n" + _SCAN, launch, set()


register("repeat_interleave", Primitive("repint", TUNABLES, repeat_kernel))
