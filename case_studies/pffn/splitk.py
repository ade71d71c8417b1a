"""PFFN with K split across programs, for small B (the launch-bound sizes).

At B 64 the one-pass kernel (`kernel.py`) runs 16 tokens x 4 row tiles = 64 programs on the H200's 132
SMs, and each walks all of its token's weights (128 KB at D 128) alone; at B 256 D 256 its 256 programs
re-read each token's 256 KB of weights 16 times from L2. Here one program owns (token, row tile,
K split): it walks every SPLIT_K-th chunk of K, so a token's weights are divided among its splits.

The first RMSNorm is a per-row scalar that commutes with the second product, so a split's share is
exact and linear: `P_s = (gelu(X W1[:, K_s]) * g1) @ W2[K_s, :]` (`[BLOCK_B, D]`, fp32) and the partial
sum of squares of h, `S_s`. Each split writes `P_s`, `S_s` to an fp32 workspace slot of its own, then
takes a ticket (one atomic add per program on a counter per (token, row tile)); the split that draws
the last ticket sums the slots in split order (the result does not depend on which split came last),
scales by `rsqrt(sum S / K + eps)`, applies the second RMSNorm, stores the output and sets the counter
back to zero for the next launch. No program ever waits for another: correct with any number of
programs resident, under CUDA-graph replay and back to back.

The workspace (slots and counters, zeroed once) is cached per call signature by the wrapper in
`kernel.py`; two launches of one signature must not run concurrently on different streams (they would
share counters). Only D <= 256 (one D tile): past that the one-pass kernel's two-tile path is used.

Probe regions (PROBES=True): `load_x`, `ffn_chunks`, `partial_out`, `reduce_store`.
"""
from __future__ import annotations

import triton
import triton.language as tl

from case_studies.pffn.gelu import gelu
from case_studies.pffn.weights import weight_descriptors

try:  # probes are compiled away unless PROBES=True; the interpreter lacks the semantic
    import triton.profiler.language as pl

    pl.enable_semantic("triton")
except Exception:  # pragma: no cover - depends on the triton build
    pl = None


@triton.jit
def _load_w2(src, row0, k0, USE_TMA: tl.constexpr):
    """The chunk's W2 tile `[BLOCK_KC, D_POW2]` from a tensor descriptor (its token's rows from `row0`)
    or a block pointer."""
    if USE_TMA:
        w2 = src.load([row0 + k0, 0])
    else:
        w2 = tl.load(src, boundary_check=(0, 1), padding_option="zero")
    return w2


@triton.jit
def _pffn_splitk_kernel(
    x_ptr, w1_ptr, w2_ptr, g1_ptr, g2_ptr, out_ptr, part_ptr, ss_ptr, ticket_ptr,
    N, B, D, K, eps,
    x_stride_n, x_stride_b, x_stride_d,
    w1_stride_n, w1_stride_d, w1_stride_k,
    w2_stride_n, w2_stride_k, w2_stride_d,
    o_stride_n, o_stride_b, o_stride_d,
    D_POW2: tl.constexpr, UPCAST_DOT: tl.constexpr, DOT_PRECISION: tl.constexpr, USE_TMA: tl.constexpr,
    BLOCK_B: tl.constexpr, BLOCK_KC: tl.constexpr, SPLIT_K: tl.constexpr,
    PROBES: tl.constexpr = False, FAST_GELU: tl.constexpr = 0, W2_EARLY: tl.constexpr = 0,
    HOST_TMA: tl.constexpr = False, w1_hdesc=None, w2_hdesc=None,
):
    """W2_EARLY = 1: a chunk's W2 tile is loaded before its first product instead of after the GELU, so
    its memory round trip overlaps W1's (at B 64 a split walks one chunk: nothing else hides it).
    HOST_TMA (with USE_TMA): the weights' descriptors come from the host (`w1_hdesc`, `w2_hdesc` over the
    2-D views W1 [N*D, K], W2 [N*K, D]; kernel.host_descriptors) instead of being built here."""
    pid = tl.program_id(0)
    split = pid % SPLIT_K                   # the splits of one tile are adjacent: they finish together
    tile = pid // SPLIT_K
    n_bt = tl.cdiv(B, BLOCK_B)
    tok = tile // n_bt
    rl = tl.arange(0, BLOCK_B)
    rb = (tile % n_bt) * BLOCK_B + rl
    b_mask = rb < B
    rd = tl.arange(0, D_POW2)
    d_mask = rd < D
    rkc = tl.arange(0, BLOCK_KC)
    dt = x_ptr.dtype.element_ty
    w1_base = w1_ptr + tok.to(tl.int64) * w1_stride_n
    w2_base = w2_ptr + tok.to(tl.int64) * w2_stride_n

    if PROBES:
        pl.enter_scope("load_x")
    x = tl.load(x_ptr + tok.to(tl.int64) * x_stride_n + rb[:, None] * x_stride_b + rd[None, :] * x_stride_d,
                mask=b_mask[:, None] & d_mask[None, :], other=0.0)                  # [BLOCK_B, D_POW2]
    if UPCAST_DOT:  # Triton 3.6's interpreter computes bf16 dots wrongly; bf16 -> fp32 is exact
        x = x.to(tl.float32)
    if PROBES:
        pl.exit_scope("load_x")
        pl.enter_scope("ffn_chunks")
    acc = tl.zeros((BLOCK_B, D_POW2), dtype=tl.float32)
    ss1 = tl.zeros((BLOCK_B,), dtype=tl.float32)
    r1 = 0            # the descriptors' first row of this token: 0 for the per-token in-kernel ones
    r2 = 0
    if USE_TMA:
        w1_desc, w2_desc, r1, r2 = weight_descriptors(w1_base, w2_base, w1_hdesc, w2_hdesc, tok, D, K, w1_stride_d,
                                                      w2_stride_k, D_POW2, BLOCK_KC, HOST_TMA)
    else:
        w1_blk = tl.make_block_ptr(w1_base, (D, K), (w1_stride_d, w1_stride_k), (0, split * BLOCK_KC),
                                   (D_POW2, BLOCK_KC), (1, 0))
        w2_blk = tl.make_block_ptr(w2_base, (K, D), (w2_stride_k, w2_stride_d), (split * BLOCK_KC, 0),
                                   (BLOCK_KC, D_POW2), (1, 0))
    for k0 in range(split * BLOCK_KC, K, SPLIT_K * BLOCK_KC):   # every SPLIT_K-th chunk: any K works
        kk = k0 + rkc
        k_mask = kk < K
        if USE_TMA:
            w1 = w1_desc.load([r1, k0])                                                # [D_POW2, BLOCK_KC]
        else:
            w1 = tl.load(w1_blk, boundary_check=(0, 1), padding_option="zero")
            w1_blk = tl.advance(w1_blk, (0, SPLIT_K * BLOCK_KC))
        if UPCAST_DOT:
            w1 = w1.to(tl.float32)
        if W2_EARLY:
            w2 = _load_w2(w2_desc if USE_TMA else w2_blk, r2, k0, USE_TMA)
            if not USE_TMA:
                w2_blk = tl.advance(w2_blk, (SPLIT_K * BLOCK_KC, 0))
        a = tl.dot(x, w1, input_precision=DOT_PRECISION)                              # [BLOCK_B, BLOCK_KC]
        # bmm's and gelu's outputs are in the input dtype in PyTorch; masked K columns give gelu(0) = 0
        h = gelu(a.to(dt).to(tl.float32), FAST_GELU).to(dt).to(tl.float32)
        ss1 += tl.sum(h * h, axis=1)
        g1 = tl.load(g1_ptr + kk, mask=k_mask, other=0.0).to(tl.float32)
        hg = (h * g1[None, :]).to(dt)
        if UPCAST_DOT:
            hg = hg.to(tl.float32)
        if not W2_EARLY:
            w2 = _load_w2(w2_desc if USE_TMA else w2_blk, r2, k0, USE_TMA)
            if not USE_TMA:
                w2_blk = tl.advance(w2_blk, (SPLIT_K * BLOCK_KC, 0))
        if UPCAST_DOT:
            w2 = w2.to(tl.float32)
        acc = tl.dot(hg, w2, acc, input_precision=DOT_PRECISION)                      # [BLOCK_B, D_POW2]
    if PROBES:
        pl.exit_scope("ffn_chunks")
        pl.enter_scope("partial_out")
    # this split's slot: [tile, split, BLOCK_B, D_POW2] fp32 (padded rows/columns hold zeros)
    slot0 = tile.to(tl.int64) * SPLIT_K
    p_offs = rl[:, None] * D_POW2 + rd[None, :]
    tl.store(part_ptr + (slot0 + split) * (BLOCK_B * D_POW2) + p_offs, acc)
    tl.store(ss_ptr + (slot0 + split) * BLOCK_B + rl, ss1)
    # every thread's stores before the ticket (thread 0 takes it with release semantics at GPU scope)
    tl.debug_barrier()
    ticket = tl.atomic_add(ticket_ptr + tile, 1, sem="acq_rel", scope="gpu")
    if PROBES:
        pl.exit_scope("partial_out")
    if ticket == SPLIT_K - 1:
        if PROBES:
            pl.enter_scope("reduce_store")
        # the last split: the others' slots are complete (acquired through the ticket); read them past
        # L1 (.cg), which is not coherent with other SMs' stores
        tot = tl.zeros((BLOCK_B, D_POW2), dtype=tl.float32)
        ss = tl.zeros((BLOCK_B,), dtype=tl.float32)
        for s in tl.static_range(SPLIT_K):     # split order: the sum does not depend on arrival order
            tot += tl.load(part_ptr + (slot0 + s) * (BLOCK_B * D_POW2) + p_offs, cache_modifier=".cg")
            ss += tl.load(ss_ptr + (slot0 + s) * BLOCK_B + rl, cache_modifier=".cg")
        inv1 = tl.rsqrt(ss / K + eps)
        o = (tot * inv1[:, None]).to(dt).to(tl.float32)       # PyTorch rounds the second bmm's output
        inv2 = tl.rsqrt(tl.sum(o * o, axis=1) / D + eps)
        g2 = tl.load(g2_ptr + rd, mask=d_mask, other=0.0).to(tl.float32)
        o_ptrs = out_ptr + tok.to(tl.int64) * o_stride_n + rb[:, None] * o_stride_b + rd[None, :] * o_stride_d
        tl.store(o_ptrs, (o * inv2[:, None] * g2[None, :]).to(dt), mask=b_mask[:, None] & d_mask[None, :])
        tl.store(ticket_ptr + tile, 0)         # ready for the next launch (ordered by the launch boundary)
        if PROBES:
            pl.exit_scope("reduce_store")


def workspace_shape(n_tok: int, bsz: int, d_pow2: int, block_b: int, split_k: int) -> tuple[int, int]:
    """(fp32 elements of the partial slots, number of (token, row tile) counters)."""
    tiles = n_tok * triton.cdiv(bsz, block_b)
    return tiles * split_k * block_b * d_pow2, tiles
