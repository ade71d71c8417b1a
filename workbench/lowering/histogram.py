"""histogram and histogramdd (`histogram.bin_ct`, `histogram.bins_tensor`, `_histogramdd_bin_edges`,
`_histogramdd_from_bin_cts`, `_histogramdd_from_bin_tensors`) as Triton edge, count and finish kernels, with
ATen's CPU semantics (aten/src/ATen/native/Histogram.cpp, cpu/HistogramKernel.cpp).

The input is viewed as M points of N coordinates (`histogram`: N = 1, every element a point); dimension d has
`nbe_d` edges, held in one fp32 buffer E at offset `off_d`; the histogram is [nbe_0 - 1, ..., nbe_{N-1} - 1].
1. Edges. Bin counts: the outer edges are `range` or the data's min and max per dimension (`_minmax`; (0, 1)
   when there is no point), widened by 0.5 on each side when equal, then `linspace` as ATen's CPU kernel has it
   (`lo + step * i` for the first half, `hi - step * (steps - 1 - i)` for the rest, `step = (hi - lo) / bins`
   in the data's dtype) (`_linspace`). Bin tensors: copied (`_copy`).
2. `_count`: a point is counted when every coordinate lies in [E[off_d], E[off_d + nbe_d - 1]]; its bin along d
   is `upper_bound(edges, v) - 1` (the rightmost bin takes its right edge). With bin counts ATen first guesses
   `int((v - lo) * bins / (hi - lo))` and searches the window [guess - 1, guess + 2) only; with bin tensors it
   searches them all. Both are std::upper_bound's exact halving loop, so unsorted bin tensors (OpInfo gives
   some) land where ATen puts them. Weights (or ones) are added with fp32 atomics.
3. `_finish`: with `density`, each bin over the total and then over its length along d = 0, 1, ..., as ATen's
   in-place divisions; the result written in the data's dtype.
The host allocates from the node's static shapes and reads no value.
"""
from __future__ import annotations

import torch
import torch.fx as fx

from workbench.lowering.epilogue import Unsupported
from workbench.lowering.graph import dtype, op_name, packet, val
from workbench.lowering.primitives import Primitive, register

TUNABLES = ("BLOCK", "NUM_WARPS")
_MAX_DIMS = 32  # _histogramdd_bin_edges returns one tensor per dimension; the names reserved for them

_KERNELS = '''@triton.jit
def __KNAME___minmax(x_ptr, ext_ptr, M, N, BLOCK: tl.constexpr):
    """min and max of column d = program_id(0) of x [M, N]: ext[2d], ext[2d + 1]."""
    d = tl.program_id(0)
    mn = tl.full([BLOCK], float("inf"), tl.float32)
    mx = tl.full([BLOCK], -float("inf"), tl.float32)
    for i0 in range(0, M, BLOCK):
        r = i0 + tl.arange(0, BLOCK)
        m = r < M
        v = tl.load(x_ptr + r.to(tl.int64) * N + d, mask=m, other=0).to(tl.float32)
        mn = tl.where(m, tl.minimum(mn, v), mn)
        mx = tl.where(m, tl.maximum(mx, v), mx)
    two = tl.arange(0, 2)
    tl.store(ext_ptr + 2 * d + two, tl.where(two == 0, tl.min(mn, 0), tl.max(mx, 0)))


@triton.jit
def __KNAME___linspace(ext_ptr, e_ptr, d, steps, lo_c, hi_c, FROM_DATA: tl.constexpr, BLOCK: tl.constexpr):
    """steps edges from lo to hi as ATen's CPU linspace writes them; lo, hi 0.5 apart from equal ones."""
    if FROM_DATA:
        lo = tl.load(ext_ptr + 2 * d)
        hi = tl.load(ext_ptr + 2 * d + 1)
        same = lo == hi
        lo = tl.where(same, lo - 0.5, lo)
        hi = tl.where(same, hi + 0.5, hi)
    else:
        lo = lo_c
        hi = hi_c
    step = (hi - lo) / (steps - 1)
    half = steps // 2
    for i0 in range(0, steps, BLOCK):
        i = i0 + tl.arange(0, BLOCK)
        first = lo + step * i.to(tl.float32)
        last = hi - step * (steps - 1 - i).to(tl.float32)
        tl.store(e_ptr + i, tl.where(i < half, first, last), mask=i < steps)


@triton.jit
def __KNAME___copy(b_ptr, e_ptr, n, BLOCK: tl.constexpr):
    """A given bin tensor's edges into E (fp32)."""
    for i0 in range(0, n, BLOCK):
        i = i0 + tl.arange(0, BLOCK)
        tl.store(e_ptr + i, tl.load(b_ptr + i, mask=i < n).to(tl.float32), mask=i < n)


@triton.jit
def __KNAME___upper_bound(e_ptr, first, length, v, ITERS):
    """std::upper_bound(e + first, e + first + length, v) - e, libstdc++'s halving loop, per lane."""
    for _ in range(ITERS):
        go = length > 0
        half = length // 2
        mid = first + half
        a = tl.load(e_ptr + mid, mask=go, other=0.0)
        right = go & ~(v < a)
        first = tl.where(right, mid + 1, first)
        length = tl.where(go, tl.where(right, length - half - 1, half), 0)
    return first


@triton.jit
def __KNAME___count(x_ptr, w_ptr, e_ptr, meta_ptr, h_ptr, M, N, ITERS, LINEAR: tl.constexpr, HAS_W: tl.constexpr,
                    BLOCK: tl.constexpr):
    """Each point's bin (row-major over the dimensions), its weight (or 1) added with atomics."""
    r = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    inside = r < M
    flat = tl.zeros([BLOCK], tl.int64)
    for d in range(N):
        off = tl.load(meta_ptr + 2 * d)
        nbe = tl.load(meta_ptr + 2 * d + 1)
        v = tl.load(x_ptr + r * N + d, mask=inside, other=0).to(tl.float32)
        lo = tl.load(e_ptr + off)
        hi = tl.load(e_ptr + off + nbe - 1)
        inside = inside & (v >= lo) & (v <= hi)
        if LINEAR:
            guess = ((v - lo) * (nbe - 1).to(tl.float32) / (hi - lo)).to(tl.int64)
            guess = tl.where(inside, guess, 0)
            start = tl.maximum(guess - 1, 0)
            stop = tl.minimum(guess + 2, nbe)
        else:
            start = tl.zeros([BLOCK], tl.int64)
            stop = tl.zeros([BLOCK], tl.int64) + nbe
        pos = __KNAME___upper_bound(e_ptr + off, start, stop - start, v, ITERS) - 1
        pos = tl.where(pos == nbe - 1, pos - 1, pos)
        inside = inside & (pos >= 0)
        flat = flat * (nbe - 1) + pos
    if HAS_W:
        w = tl.load(w_ptr + r, mask=inside, other=0).to(tl.float32)
    else:
        w = tl.full([BLOCK], 1.0, tl.float32)
    tl.atomic_add(h_ptr + flat, w, mask=inside)


@triton.jit
def __KNAME___finish(h_ptr, e_ptr, meta_ptr, out_ptr, B, N, DENSITY: tl.constexpr, BLOCK: tl.constexpr):
    """The counts in the output's dtype; with DENSITY over their total, then over each bin length along d."""
    if DENSITY:
        acc = tl.zeros([BLOCK], tl.float32)
        for b0 in range(0, B, BLOCK):
            b = b0 + tl.arange(0, BLOCK)
            acc += tl.load(h_ptr + b, mask=b < B, other=0)
        total = tl.sum(acc, 0)
    for b0 in range(0, B, BLOCK):
        b = b0 + tl.arange(0, BLOCK)
        m = b < B
        h = tl.load(h_ptr + b, mask=m, other=0)
        if DENSITY:
            h = h / total
            stride = B
            for d in range(N):
                off = tl.load(meta_ptr + 2 * d)
                nb = tl.load(meta_ptr + 2 * d + 1) - 1
                stride = stride // nb
                i = (b // stride) % nb
                h = h / (tl.load(e_ptr + off + i + 1, mask=m, other=1) - tl.load(e_ptr + off + i, mask=m, other=0))
        tl.store(out_ptr + b, h.to(out_ptr.dtype.element_ty), mask=m)
'''

_HOST = '''def __KNAME___host(x, n_dims, cts, rng, bins, weight, density, linear, count, dev):
    """histogramdd of x [..., n_dims] (histogram: n_dims = 1 over every element): its edges (one fp32 buffer, a
    slice per dimension) and, when `count`, its histogram. `cts`: bin counts (edges from `rng` or the data) or
    None when `bins` holds the edge tensors."""
    xm = x.reshape([-1, n_dims]).contiguous()
    M = xm.shape[0]
    nbes = [c + 1 for c in cts] if cts is not None else [b.numel() for b in bins]
    offs = [sum(nbes[:d]) for d in range(n_dims)]
    E = torch.empty([max(sum(nbes), 1)], dtype=torch.float32, device=dev)
    if cts is not None:
        ext = torch.empty([2 * n_dims], dtype=torch.float32, device=dev)
        from_data = rng is None and M > 0
        if from_data:
            __KNAME___minmax[(n_dims,)](xm, ext, M, n_dims, BLOCK=BLOCK, num_warps=NUM_WARPS)
        for d in range(n_dims):
            lo, hi = (rng[2 * d], rng[2 * d + 1]) if rng is not None else (0.0, 1.0)
            if lo == hi:
                lo, hi = lo - 0.5, hi + 0.5
            __KNAME___linspace[(1,)](ext, E[offs[d]:], d, nbes[d], lo, hi, FROM_DATA=from_data, BLOCK=BLOCK,
                                     num_warps=NUM_WARPS)
    else:
        for d in range(n_dims):
            __KNAME___copy[(1,)](bins[d].contiguous(), E[offs[d]:], nbes[d], BLOCK=BLOCK, num_warps=NUM_WARPS)
    edges = [E[offs[d]:offs[d] + nbes[d]] for d in range(n_dims)]
    if not count:
        return edges, None
    meta = torch.tensor([v for d in range(n_dims) for v in (offs[d], nbes[d])], dtype=torch.int32, device=dev)
    shape = [n - 1 for n in nbes]
    B = _numel(shape)
    h = torch.zeros([max(B, 1)], dtype=torch.float32, device=dev)
    w = weight.reshape([-1]).contiguous() if weight is not None else xm
    iters = max(nbes).bit_length() + 1
    if M and B:
        __KNAME___count[(triton.cdiv(M, BLOCK),)](xm, w, E, meta, h, M, n_dims, iters, LINEAR=linear,
                                                  HAS_W=weight is not None, BLOCK=BLOCK, num_warps=NUM_WARPS)
    out = torch.empty(shape, dtype=x.dtype, device=dev)
    if B:
        __KNAME___finish[(1,)](h, E, meta, out, B, n_dims, DENSITY=density, BLOCK=BLOCK, num_warps=NUM_WARPS)
    return edges, out
'''


def _arg(node: fx.Node, i: int, key: str, default):  # noqa: ANN001, ANN202
    return node.args[i] if len(node.args) > i else node.kwargs.get(key, default)


def histogram_kernel(name: str, node: fx.Node, names: dict[fx.Node, str], expr) -> tuple[str, list[str], set[str]]:  # noqa: ANN001
    p, x = packet(node), node.args[0]
    dt = dtype(x)
    if dt != torch.float32:  # ATen's CPU histogram takes float32 and float64; fp64 is not lowered
        raise Unsupported(f"unsupported: {op_name(node)} on {dt}")
    bins = _arg(node, 1, "bins", 100)
    weight = node.kwargs.get("weight")
    density = bool(node.kwargs.get("density", False))
    rng = node.kwargs.get("range")
    xv, v = names[x], names[node]
    wv = names[weight] if weight is not None else "None"
    if p == "histogram":
        n_dims = 1
        if isinstance(bins, fx.Node):
            cts, tens, linear = "None", f"[{names[bins]}]", False
        elif isinstance(bins, int):
            cts, tens, linear = f"[{bins}]", "None", True
        else:
            raise Unsupported(f"unsupported: {op_name(node)} with a symbolic bin count")
    else:
        n_dims = int(val(x).shape[-1])
        if p == "_histogramdd_from_bin_tensors":
            cts, tens, linear = "None", "[" + ", ".join(names[b] for b in bins) + "]", False
        elif all(isinstance(b, int) for b in bins):
            cts, tens, linear = repr(list(bins)), "None", True
        else:
            raise Unsupported(f"unsupported: {op_name(node)} with symbolic bin counts")
        if n_dims > _MAX_DIMS:
            raise Unsupported(f"unsupported: {op_name(node)} over {n_dims} dimensions (at most {_MAX_DIMS})")
    rv = repr([float(r) for r in rng]) if rng is not None else "None"
    call = f"__KNAME___host({xv}, {n_dims}, {cts}, {rv}, {tens}, {wv}, {density}, {linear}, {{count}}, dev)"
    if p == "histogram":
        launch = [f"_edges, {v}_0 = {call.format(count=True)}", f"{v}_1 = _edges[0]"]
    elif p == "_histogramdd_bin_edges":
        launch = [f"{v}, _ = {call.format(count=False)}"]
        launch += [f"{v}_{d} = {v}[{d}]" for d in range(n_dims)]
    else:
        launch = [f"_, {v} = {call.format(count=True)}"]
    return _KERNELS + "\n\n" + _HOST, launch, set()


register("histogram", Primitive("histogram", TUNABLES, histogram_kernel, tuple_out=True))
register("_histogramdd_bin_edges", Primitive("histogram", TUNABLES, histogram_kernel, tuple_out=_MAX_DIMS))
for _op in ("_histogramdd_from_bin_cts", "_histogramdd_from_bin_tensors"):
    register(_op, Primitive("histogram", TUNABLES, histogram_kernel))
