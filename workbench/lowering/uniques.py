"""unique (`_unique2`, `unique_dim`) and unique_consecutive: values, inverse and counts, as Triton rank, count,
scan and scatter kernels; the host reads one number, the count of unique rows, to allocate the output.

The input is viewed as R rows of K elements: the flattened elements (dim=None: K = 1) or the slices along `dim`
(moved first). Kernels:
1. `_rank` (unique only; PyTorch sorts on both CPU and CUDA): each row's position in the stable lexicographic
   order, counted by comparing it with every other row over [UB_I, UB_J, UB_K] tiles (the first differing
   column of a chunk decides), then
   `perm[rank] = row`. O(R^2 K) compares: it is every row against every row, which is right for OpInfo's and
   for short rows; a long 1-d unique wants a radix sort (not written). Order: `a < b`, nan after every number
   (equal to each other in the order; ties go to the lower index, so the sort is stable).
2. `_flag`: sorted row s starts a group when it differs from row s - 1 in any element (`!=`, so every nan is
   its own group, as PyTorch's `equal_nan=False`); per-block counts of the flags.
3. `_scan` (compaction.py's): exclusive offsets of the blocks and the total U.
4. `_write`: the group of s is its offset plus the inclusive count of flags before it; each group's first row
   is copied to the output, each row's group stored as its inverse, and each group's first position kept;
5. `_counts`: the next group's first position minus this one's.
"""
from __future__ import annotations

import torch
import torch.fx as fx

from workbench.lowering.compaction import _SCAN
from workbench.lowering.epilogue import Unsupported, torch_dtype
from workbench.lowering.graph import dtype, op_name, packet, val
from workbench.lowering.primitives import Primitive, register, register_tunables

TUNABLES = ("NUM_WARPS", "SCAN_CHUNK", "UNIQ_TILE")
# elements of one compare tile: [UB_I, UB_J, UB_K] in _rank, [UB_R, UB_K] elsewhere, shaped on the host from K
# (short rows get more rows per tile: the interpreter pays per op, not per element; 4096 keeps an sm_90 block's
# registers, as sort.py's ROW_ELEMS)
register_tunables({"UNIQ_TILE": ([1024, 2048, 4096, 8192], 4096)})


def _load(ptr: str, mask: str, dt: torch.dtype) -> str:
    """An element widened for comparison (fp16/bf16 to fp32 is exact; bool to int32)."""
    to = ".to(tl.float32)" if dt in (torch.float16, torch.bfloat16) else ".to(tl.int32)" if dt == torch.bool else ""
    return f"tl.load({ptr}, mask={mask}, other=0){to}"


def _kernels(dt: torch.dtype) -> str:
    a = _load("x_ptr + i[:, None, None] * K + c[None, None, :]", "im[:, None, None] & cm[None, None, :]", dt)
    b = _load("x_ptr + j[None, :, None] * K + c[None, None, :]", "jm[None, :, None] & cm[None, None, :]", dt)
    p = _load("x_ptr + p[:, None] * K + c[None, :]", "both", dt)
    q = _load("x_ptr + q[:, None] * K + c[None, :]", "both", dt)
    return f'''@triton.jit
def __KNAME___rank(x_ptr, perm_ptr, R, K, UB_I: tl.constexpr, UB_J: tl.constexpr, UB_K: tl.constexpr):
    """Rank of each row of x [R, K] in the stable lexicographic order (nan last); perm[rank] = row."""
    i = tl.program_id(0).to(tl.int64) * UB_I + tl.arange(0, UB_I)
    im = i < R
    rank = tl.zeros([UB_I], tl.int64)
    for j0 in range(0, R, UB_J):
        j = j0 + tl.arange(0, UB_J)
        jm = j < R
        und = (im[:, None] & jm[None, :]).to(tl.int32)  # 1 while rows i and j are equal so far
        lt = tl.zeros([UB_I, UB_J], tl.int32)  # 1 where row j sorts before row i
        for c0 in range(0, K, UB_K):
            c = c0 + tl.arange(0, UB_K)
            cm = c < K
            a = {a}
            b = {b}
            b_lt = (b < a) | ((b == b) & (a != a))
            d = (b_lt | (a < b) | ((a == a) & (b != b))) & cm[None, None, :]
            # the first column of the chunk where the rows differ decides (K: none)
            first = tl.min(tl.where(d, c[None, None, :], K), axis=2)
            at = d & (c[None, None, :] == first[:, :, None])
            lt = lt | (und & tl.max((at & b_lt).to(tl.int32), axis=2))
            und = und & (first == K).to(tl.int32)
        lt = lt | (und & (j[None, :] < i[:, None]).to(tl.int32))
        rank += tl.sum(lt.to(tl.int64), axis=1)
    tl.store(perm_ptr + rank, i, mask=im)


@triton.jit
def __KNAME___flag(x_ptr, perm_ptr, flag_ptr, cnt_ptr, R, K, SORTED: tl.constexpr, UB_R: tl.constexpr,
                   UB_K: tl.constexpr):
    """1 where (sorted) row s differs from row s - 1 (row 0 always); the block's count of them."""
    s = tl.program_id(0).to(tl.int64) * UB_R + tl.arange(0, UB_R)
    m = s < R
    if SORTED:
        p = tl.load(perm_ptr + s, mask=m, other=0)
        q = tl.load(perm_ptr + s - 1, mask=m & (s > 0), other=0)
    else:
        p = s
        q = s - 1
    new = (s == 0).to(tl.int32)
    for c0 in range(0, K, UB_K):
        c = c0 + tl.arange(0, UB_K)
        both = (m & (s > 0))[:, None] & (c < K)[None, :]
        new = new | tl.max((({p} != {q}) & both).to(tl.int32), axis=1)
    new = tl.where(m, new, 0)
    tl.store(flag_ptr + s, new, mask=m)
    tl.store(cnt_ptr + tl.program_id(0) + tl.arange(0, 1), tl.sum(new, 0) + tl.zeros([1], tl.int32))


@triton.jit
def __KNAME___write(x_ptr, perm_ptr, flag_ptr, off_ptr, out_ptr, inv_ptr, start_ptr, R, K, SORTED: tl.constexpr,
                    UB_R: tl.constexpr, UB_K: tl.constexpr):
    """Each row's group (offset + inclusive flag count - 1) as its inverse; each group's first row and position."""
    s = tl.program_id(0).to(tl.int64) * UB_R + tl.arange(0, UB_R)
    m = s < R
    f = tl.load(flag_ptr + s, mask=m, other=0).to(tl.int64)
    g = tl.load(off_ptr + tl.program_id(0)) + tl.cumsum(f, 0) - 1
    if SORTED:
        p = tl.load(perm_ptr + s, mask=m, other=0)
    else:
        p = s
    tl.store(inv_ptr + p, g, mask=m)
    first = m & (f != 0)
    tl.store(start_ptr + g, s, mask=first)
    for c0 in range(0, K, UB_K):
        c = c0 + tl.arange(0, UB_K)
        cm = first[:, None] & (c < K)[None, :]
        tl.store(out_ptr + g[:, None] * K + c[None, :], tl.load(x_ptr + p[:, None] * K + c[None, :], mask=cm),
                 mask=cm)


@triton.jit
def __KNAME___counts(start_ptr, counts_ptr, U, R, UB_R: tl.constexpr):
    """Each group's size: the next group's first position (R after the last) minus its own."""
    g = tl.program_id(0).to(tl.int64) * UB_R + tl.arange(0, UB_R)
    m = g < U
    nxt = tl.load(start_ptr + g + 1, mask=m & (g + 1 < U), other=0)
    nxt = tl.where(g + 1 < U, nxt, R)
    tl.store(counts_ptr + g, nxt - tl.load(start_ptr + g, mask=m, other=0), mask=m)
'''


def unique_kernel(name: str, node: fx.Node, names: dict[fx.Node, str], expr) -> tuple[str, list[str], set[str]]:  # noqa: ANN001
    p = packet(node)
    x = node.args[0]
    dt = dtype(x)
    if dt.is_complex:
        raise Unsupported(f"unsupported: {op_name(node)} on {dt}")
    if p == "_unique2":
        dim, srt = None, True
    elif p == "unique_dim":
        dim, srt = node.args[1], True
    else:  # unique_consecutive(x, return_inverse, return_counts, dim)
        dim = node.args[3] if len(node.args) > 3 else node.kwargs.get("dim")
        srt = False
    r = val(x).dim()
    if dim is not None:
        dim = dim % max(r, 1)
    xv, v = names[x], names[node]
    # one host function per dtype, shared by every unique node: OpInfo's 528 unique samples inlined ~20 launch
    # lines each, a candidate over the harness's 1 MB source limit
    launch = [f"{v}_0, {v}_1, {v}_2 = __KNAME___host({xv}, {dim!r}, {srt}, dev)"]
    host = f'''def __KNAME___host(x, dim, srt, dev):
    """unique / unique_consecutive of x (flat when dim is None, else of the slices along dim): the launches."""
    if dim is None:
        xm = x.reshape([x.numel(), 1])
    else:
        xm = x.movedim(dim, 0) if x.dim() else x.reshape([1])
    R, K = xm.shape[0], _numel(xm.shape[1:])
    xc = xm.reshape([R, K]).contiguous()
    perm = torch.empty([R], dtype=torch.int64, device=dev)
    # the tile's shape from K: UB_K columns (at most 32), the rest rows (_rank: split between i and j)
    UK = min(triton.next_power_of_2(max(K, 1)), 32)
    UR = max(1, UNIQ_TILE // UK)
    UI = 1 << ((UR.bit_length() - 1 + 1) // 2)
    UJ = max(1, UR // UI)
    nb = triton.cdiv(R, UR)
    cnt = torch.empty([max(nb, 1)], dtype=torch.int32, device=dev)
    flag = torch.empty([R], dtype=torch.int32, device=dev)
    off = torch.zeros([nb + 1], dtype=torch.int64, device=dev)
    if R and srt:
        __KNAME___rank[(triton.cdiv(R, UI),)](xc, perm, R, K, UB_I=UI, UB_J=UJ, UB_K=UK, num_warps=NUM_WARPS)
    if R:
        __KNAME___flag[(nb,)](xc, perm, flag, cnt, R, K, SORTED=srt, UB_R=UR, UB_K=UK, num_warps=NUM_WARPS)
        __KNAME___scan[(1,)](cnt, off, nb, SCAN_CHUNK=SCAN_CHUNK)
    U = int(off[nb].item()) if R else 0  # the one value the host reads
    out = torch.empty([U, K], dtype={torch_dtype(dt)}, device=dev)
    inv = torch.empty([R], dtype=torch.int64, device=dev)
    start = torch.empty([max(U, 1)], dtype=torch.int64, device=dev)
    counts = torch.empty([U], dtype=torch.int64, device=dev)
    if R:
        __KNAME___write[(nb,)](xc, perm, flag, off, out, inv, start, R, K, SORTED=srt, UB_R=UR, UB_K=UK,
                               num_warps=NUM_WARPS)
    if U:
        __KNAME___counts[(triton.cdiv(U, UNIQ_TILE),)](start, counts, U, R, UB_R=UNIQ_TILE, num_warps=NUM_WARPS)
    if dim is None:
        return out.reshape([U]), inv.reshape(x.shape), counts
    vals = out.reshape([U, *xm.shape[1:]])
    return (vals.movedim(0, dim) if x.dim() else vals.reshape([U])), inv, counts
'''
    return _kernels(dt) + "\n\n" + _SCAN + "\n\n" + host, launch, set()


for _op in ("_unique2", "unique_dim", "unique_consecutive"):
    register(_op, Primitive("unique", TUNABLES, unique_kernel, tuple_out=3))
