"""The gather kernel of conv1d as Triton JIT functions: the implicit GEMM with the taps gathered by pointer
loads (the launchers, the tile configs and the caches live in kernel.py, tiles.py, packing.py and
launch_plan.py). The design notes below were measured on the H200.
conv1d as an implicit GEMM in Triton (KernelEvolve section 5.1, appendix A).

    y[b, co, l] = bias[co] + sum_{ci, k} w[co, ci, k] * x[b, ci, l * stride + k - padding]

Shapes: x `[B, C_in, L]`, w `[C_out, C_in, K]`, bias `[C_out]`, y `[B, C_out, L_out]`.

As a GEMM with the output positions in M: `acc[n, co] += x_k[n, ci] @ w_k[ci, co]`, where n runs over
the flattened output positions `B * L_out` (so L = 200 wastes no tile: 64-wide tiles over one row of
200 would compute 256 columns), the reduction is C_in x K, and each k reads x shifted by
`k - padding` (im2col happens in the loads; zero padding is the load mask). The positions are the
M side because wgmma wants M >= 64 and a power of two, while C_out = 96 is not one: the C_out side is
cut into `n_sub` accumulators of BLOCK_CO columns (3 x 32 for 96) that all reuse the same x tile, so
no tensor-core work is spent on padding channels and x is read once per program, not once per C_out tile.

Why the first version (765 us at the production shape, 0.25 TB/s) was slow, and what changed:
  * C_in, C_out, L, K, stride are compile-time constants here. With a run-time L the kernel divided by
    L per element (`n // L`, `n % L`), and the compiler could prove no contiguity, so every x load and
    y store was a 2-byte scalar access through 64-bit addresses. With L = 200 a constant (200 % 8 == 0)
    Triton's axis analysis sees runs of 8 contiguous, 16-byte aligned positions: the unshifted tap and
    the store become 16-byte vector accesses, and the shifted taps read lines the unshifted one just
    brought into L1.
  * the old tile was 128 C_out x 128 positions for 96 channels (25 % of the MMAs on zero weights) and
    read x once per C_out tile.
  * (found on the H200 with the rewrite at 168 us) the shifted taps, which cannot be 16-byte aligned,
    inherited the unshifted tap's layout of 8 consecutive positions per thread, so each 2-byte warp load
    touched 16-byte-strided addresses over 4-6 cache lines; loading them as `[ci, n]` gives them a
    layout with 32 consecutive positions across the lanes (SHIFT_T): 168 -> 126 us fp16, 502 -> 300 us fp32.
The weights are packed once to `[K, C_in, C_out]` and cached (see `pack_weight` for the bug the cache
guards against); accumulation is fp32; the bias add is fused; one launch, against PyTorch's five.

fp32 inputs use TF32 tensor cores, as cuDNN does by default (`torch.backends.cudnn.allow_tf32`).

This module's kernel is the "gather" path of `conv1d`; fp32 takes the channels-last path of `tma.py`
where it applies (x transposed by one Triton pass, then every operand by TMA, K-major for TF32): 267 us
against this kernel's 300 at the production shape on the H200 (results/case_studies/conv1d/bench.csv).
For fp16 every alternative measured slower than this kernel (README, "Against the targets").

Probe regions (PROBES=True): `load_x`, `load_w`, `mma`, `epilogue`.
"""
from __future__ import annotations

import triton
import triton.language as tl

try:  # probes are compiled away unless PROBES=True; the interpreter lacks the semantic
    import triton.profiler.language as pl

    pl.enable_semantic("triton")
except Exception:  # pragma: no cover - depends on the triton build
    pl = None

@triton.jit
def _load(ptrs, mask, MASKED: tl.constexpr, POLICY: tl.constexpr):
    """`tl.load` with the mask dropped at compile time when the tile is known to be in bounds."""
    if MASKED:
        out = tl.load(ptrs, mask=mask, other=0.0, eviction_policy=POLICY)
    else:
        out = tl.load(ptrs, eviction_policy=POLICY)
    return out


@triton.jit
def _load_x(x_ptr, x_row, ll, n_ok, c, k: tl.constexpr,
            C_IN: tl.constexpr, L_IN: tl.constexpr, L_OUT: tl.constexpr, STRIDE: tl.constexpr,
            PAD: tl.constexpr, UPCAST_DOT: tl.constexpr, BLOCK_CI: tl.constexpr, EVICT: tl.constexpr,
            SHIFT_T: tl.constexpr, PROBES: tl.constexpr):
    """x tap k of C_in chunk c as the dot's A operand: `[BLOCK_N, BLOCK_CI]`, x[b, ci, l*stride + k - pad]."""
    if PROBES:
        pl.enter_scope("load_x")
    ci = c * BLOCK_CI + tl.arange(0, BLOCK_CI)
    pos = ll * STRIDE + (k - PAD)
    ok = n_ok
    # compile-time pruned masks: only taps that can reach the padding test the bounds
    if k < PAD:
        ok = ok & (pos >= 0)
    if (L_OUT - 1) * STRIDE + k - PAD >= L_IN:
        ok = ok & (pos < L_IN)
    # contiguous along n (runs of L): coalesced. EVICT: x streams through once (after its K taps),
    # the weights are re-read by every tile
    # A right-shifted tap of stride 1 that needs no bound (padding 0: pos < L_IN always) keeps the shared
    # layout: with SHIFT_T the H200 build computed wrong values when L is odd (B 2, C_in 32, C_out 24,
    # L 29, K 3, padding 0: max error 3.0 with 128-position tiles on 4 warps and 256 on 8; an illegal
    # address at K 5), while 64-position tiles, 8 warps at 128, SHIFT_T = 0 and the interpreter were right
    # (results/case_studies/conv1d/pad0_bug/isolate1-2*); a redundant `pos < L_IN` bound is folded away by
    # the compiler, so it cannot stand in. With this rule all 10 shapes x 7 configs (fp16) and the failing
    # ones in bf16 are right (isolate3*). Every tap of the benchmarked shapes has a bound: PTX unchanged.
    unbounded_right = STRIDE == 1 and k > PAD and (L_OUT - 1) + k - PAD < L_IN
    if SHIFT_T and (STRIDE != 1 or k != PAD) and not unbounded_right:
        # A shifted tap cannot be 16-byte aligned, so it is read with 2-byte loads. Loaded in the same
        # [n, ci] shape as the aligned tap, it would share that tap's layout (8 consecutive n per
        # thread: a warp instruction then touches 16-byte-strided addresses over 4-6 lines); loaded as
        # [ci, n] it gets a layout of its own with 32 consecutive n across a warp's lanes (64
        # contiguous bytes an instruction), and tl.trans makes it the dot's [n, ci] operand.
        if C_IN % BLOCK_CI != 0:
            xs_mask = ok[None, :] & (ci < C_IN)[:, None]
        else:
            xs_mask = ok[None, :]
        xs = _load(x_ptr + x_row[None, :] + ci[:, None] * L_IN + pos[None, :], xs_mask, True,
                   "evict_first" if EVICT else "")
        xt = tl.trans(xs)
    else:
        if C_IN % BLOCK_CI != 0:
            x_mask = ok[:, None] & (ci < C_IN)[None, :]
        else:
            x_mask = ok[:, None]
        xt = _load(x_ptr + x_row[:, None] + ci[None, :] * L_IN + pos[:, None], x_mask, True,
                   "evict_first" if EVICT else "")
    if UPCAST_DOT:  # Triton 3.6's interpreter computes bf16 dots wrongly; bf16 -> fp32 is exact
        xt = xt.to(tl.float32)
    if PROBES:
        pl.exit_scope("load_x")
    return xt


@triton.jit
def _load_w(w_ptr, w_desc, c, k: tl.constexpr, co0, j: tl.constexpr,
            C_IN: tl.constexpr, C_OUT: tl.constexpr, UPCAST_DOT: tl.constexpr, BLOCK_CO: tl.constexpr,
            BLOCK_CI: tl.constexpr, N_SUB: tl.constexpr, EVICT: tl.constexpr, W_TMA: tl.constexpr,
            PROBES: tl.constexpr):
    """Weights of tap k, C_in chunk c, accumulator j as the dot's B operand: `[BLOCK_CI, BLOCK_CO]`."""
    if PROBES:
        pl.enter_scope("load_w")
    if W_TMA == 1:
        # by TMA from the packed weight seen as [K * C_in, C_out] (host descriptor): straight into shared
        # memory, where wgmma reads B. Past C_out the box is zero-filled; rows past C_in (C_in % BLOCK_CI
        # != 0) are the next tap's rows, finite weights met by the zero-masked x columns
        w = w_desc.load([k * C_IN + c * BLOCK_CI, co0 + j * BLOCK_CO])
    elif W_TMA == 2:
        # by TMA from the K-major packing [K * C_out, C_in] (TF32 wgmma wants a K-major B): rows past
        # C_out are the next tap's (their accumulator columns are never stored), columns past C_in zero
        w = tl.trans(w_desc.load([k * C_OUT + co0 + j * BLOCK_CO, c * BLOCK_CI]))
    else:
        ci = c * BLOCK_CI + tl.arange(0, BLOCK_CI)
        cj = co0 + j * BLOCK_CO + tl.arange(0, BLOCK_CO)
        w = _load(w_ptr + (k * C_IN + ci)[:, None] * C_OUT + cj[None, :],      # packed [K, C_in, C_out]
                  (ci < C_IN)[:, None] & (cj < C_OUT)[None, :],
                  C_IN % BLOCK_CI != 0 or C_OUT % (BLOCK_CO * N_SUB) != 0, "evict_last" if EVICT else "")
    if UPCAST_DOT:
        w = w.to(tl.float32)
    if PROBES:
        pl.exit_scope("load_w")
    return w


@triton.jit
def _load_ws(w_ptr, w_desc, c, k: tl.constexpr, co0,
             C_IN: tl.constexpr, C_OUT: tl.constexpr, UPCAST_DOT: tl.constexpr, BLOCK_CO: tl.constexpr,
             BLOCK_CI: tl.constexpr, N_SUB: tl.constexpr, EVICT: tl.constexpr, W_TMA: tl.constexpr,
             PROBES: tl.constexpr):
    """The N_SUB weight tiles of one step (the unused slots repeat the first; never read)."""
    w0 = _load_w(w_ptr, w_desc, c, k, co0, 0, C_IN, C_OUT, UPCAST_DOT, BLOCK_CO, BLOCK_CI, N_SUB, EVICT,
                 W_TMA, PROBES)
    w1 = w0
    w2 = w0
    w3 = w0
    if N_SUB > 1:
        w1 = _load_w(w_ptr, w_desc, c, k, co0, 1, C_IN, C_OUT, UPCAST_DOT, BLOCK_CO, BLOCK_CI, N_SUB, EVICT,
                     W_TMA, PROBES)
    if N_SUB > 2:
        w2 = _load_w(w_ptr, w_desc, c, k, co0, 2, C_IN, C_OUT, UPCAST_DOT, BLOCK_CO, BLOCK_CI, N_SUB, EVICT,
                     W_TMA, PROBES)
    if N_SUB > 3:
        w3 = _load_w(w_ptr, w_desc, c, k, co0, 3, C_IN, C_OUT, UPCAST_DOT, BLOCK_CO, BLOCK_CI, N_SUB, EVICT,
                     W_TMA, PROBES)
    return w0, w1, w2, w3


@triton.jit
def _mma(acc0, acc1, acc2, acc3, xt, w0, w1, w2, w3,
         N_SUB: tl.constexpr, DOT_PRECISION: tl.constexpr, PROBES: tl.constexpr):
    """acc_j[n, co] += xt[n, ci] @ w_j[ci, co] for the N_SUB accumulators (one shared A operand)."""
    if PROBES:
        pl.enter_scope("mma")
    acc0 = tl.dot(xt, w0, acc0, input_precision=DOT_PRECISION)
    if N_SUB > 1:
        acc1 = tl.dot(xt, w1, acc1, input_precision=DOT_PRECISION)
    if N_SUB > 2:
        acc2 = tl.dot(xt, w2, acc2, input_precision=DOT_PRECISION)
    if N_SUB > 3:
        acc3 = tl.dot(xt, w3, acc3, input_precision=DOT_PRECISION)
    if PROBES:
        pl.exit_scope("mma")
    return acc0, acc1, acc2, acc3


@triton.jit
def _conv1d_step(acc0, acc1, acc2, acc3, x_ptr, w_ptr, w_desc, x_row, ll, n_ok, c, co0,
                 C_IN: tl.constexpr, C_OUT: tl.constexpr, L_IN: tl.constexpr, L_OUT: tl.constexpr,
                 STRIDE: tl.constexpr, PAD: tl.constexpr, KSIZE: tl.constexpr,
                 DOT_PRECISION: tl.constexpr, UPCAST_DOT: tl.constexpr,
                 BLOCK_CO: tl.constexpr, BLOCK_CI: tl.constexpr, N_SUB: tl.constexpr,
                 EVICT: tl.constexpr, SHIFT_T: tl.constexpr, W_TMA: tl.constexpr, PROBES: tl.constexpr):
    """One C_in chunk, every tap k: acc_j[n, co] += x[b, ci, l*stride + k - pad] @ w[k, ci, co_j]."""
    for k in tl.static_range(KSIZE):
        xt = _load_x(x_ptr, x_row, ll, n_ok, c, k, C_IN, L_IN, L_OUT, STRIDE, PAD, UPCAST_DOT, BLOCK_CI,
                     EVICT, SHIFT_T, PROBES)
        w0, w1, w2, w3 = _load_ws(w_ptr, w_desc, c, k, co0, C_IN, C_OUT, UPCAST_DOT, BLOCK_CO, BLOCK_CI,
                                  N_SUB, EVICT, W_TMA, PROBES)
        acc0, acc1, acc2, acc3 = _mma(acc0, acc1, acc2, acc3, xt, w0, w1, w2, w3, N_SUB, DOT_PRECISION,
                                      PROBES)
    return acc0, acc1, acc2, acc3


@triton.jit
def _conv1d_store(acc, b_ptr, y_ptr, y_row, ll, n_ok, co,
                  C_OUT: tl.constexpr, L_OUT: tl.constexpr, HAS_BIAS: tl.constexpr):
    co_ok = co < C_OUT
    if HAS_BIAS:
        acc += tl.load(b_ptr + co, mask=co_ok, other=0.0).to(tl.float32)[None, :]
    y_ptrs = y_ptr + y_row[:, None] + co[None, :] * L_OUT + ll[:, None]
    tl.store(y_ptrs, acc.to(y_ptr.dtype.element_ty), mask=n_ok[:, None] & co_ok[None, :])


@triton.jit
def _conv1d_tile(tile, x_ptr, w_ptr, w_desc, b_ptr, y_ptr, n_total,
                 C_IN: tl.constexpr, C_OUT: tl.constexpr, L_IN: tl.constexpr, L_OUT: tl.constexpr,
                 STRIDE: tl.constexpr, PAD: tl.constexpr, KSIZE: tl.constexpr, HAS_BIAS: tl.constexpr,
                 DOT_PRECISION: tl.constexpr, UPCAST_DOT: tl.constexpr, INT64: tl.constexpr,
                 BLOCK_N: tl.constexpr, BLOCK_CO: tl.constexpr, CO_SUB: tl.constexpr, BLOCK_CI: tl.constexpr,
                 UNROLL_CI: tl.constexpr, EVICT: tl.constexpr, SHIFT_T: tl.constexpr, W_TMA: tl.constexpr,
                 PROBES: tl.constexpr):
    """One output tile: BLOCK_N flattened positions x CO_SUB * BLOCK_CO channels."""
    # C_out groups vary fastest: the programs that share one x tile run together (L2 reuse)
    CO_GROUP: tl.constexpr = BLOCK_CO * CO_SUB
    n_groups: tl.constexpr = (C_OUT + CO_GROUP - 1) // CO_GROUP
    pid_g = tile % n_groups
    pid_n = tile // n_groups
    co0 = pid_g * CO_GROUP

    n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    n_ok = n < n_total
    bb = n // L_OUT          # constant divisor: a multiply-high, and runs of gcd(L_OUT, 8) stay contiguous
    ll = n % L_OUT
    if INT64:
        bb = bb.to(tl.int64)
    x_row = bb * (C_IN * L_IN)
    y_row = bb * (C_OUT * L_OUT)

    acc0 = tl.zeros((BLOCK_N, BLOCK_CO), dtype=tl.float32)
    acc1 = tl.zeros((BLOCK_N, BLOCK_CO), dtype=tl.float32)
    acc2 = tl.zeros((BLOCK_N, BLOCK_CO), dtype=tl.float32)
    acc3 = tl.zeros((BLOCK_N, BLOCK_CO), dtype=tl.float32)
    N_CI: tl.constexpr = (C_IN + BLOCK_CI - 1) // BLOCK_CI
    if UNROLL_CI == 2 and N_CI <= 8:
        # unrolled, and every step's operands loaded one step ahead: the next x tap and weight tiles
        # are in flight while the tensor cores work on this step
        N_STEPS: tl.constexpr = N_CI * KSIZE
        xt = _load_x(x_ptr, x_row, ll, n_ok, 0, 0, C_IN, L_IN, L_OUT, STRIDE, PAD, UPCAST_DOT, BLOCK_CI,
                     EVICT, SHIFT_T, PROBES)
        w0, w1, w2, w3 = _load_ws(w_ptr, w_desc, 0, 0, co0, C_IN, C_OUT, UPCAST_DOT, BLOCK_CO, BLOCK_CI,
                                  CO_SUB, EVICT, W_TMA, PROBES)
        for s in tl.static_range(N_STEPS):
            if s + 1 < N_STEPS:
                xn = _load_x(x_ptr, x_row, ll, n_ok, (s + 1) // KSIZE, (s + 1) % KSIZE, C_IN, L_IN, L_OUT,
                             STRIDE, PAD, UPCAST_DOT, BLOCK_CI, EVICT, SHIFT_T, PROBES)
                v0, v1, v2, v3 = _load_ws(w_ptr, w_desc, (s + 1) // KSIZE, (s + 1) % KSIZE, co0, C_IN,
                                          C_OUT, UPCAST_DOT, BLOCK_CO, BLOCK_CI, CO_SUB, EVICT, W_TMA,
                                          PROBES)
            acc0, acc1, acc2, acc3 = _mma(acc0, acc1, acc2, acc3, xt, w0, w1, w2, w3, CO_SUB, DOT_PRECISION,
                                          PROBES)
            if s + 1 < N_STEPS:
                xt = xn
                w0 = v0
                w1 = v1
                w2 = v2
                w3 = v3
    elif UNROLL_CI and N_CI <= 8:   # (wide C_in: a loop, not hundreds of unrolled dots to compile)
        for c in tl.static_range(N_CI):
            acc0, acc1, acc2, acc3 = _conv1d_step(
                acc0, acc1, acc2, acc3, x_ptr, w_ptr, w_desc, x_row, ll, n_ok, c, co0, C_IN, C_OUT, L_IN,
                L_OUT, STRIDE, PAD, KSIZE, DOT_PRECISION, UPCAST_DOT, BLOCK_CO, BLOCK_CI, CO_SUB, EVICT,
                SHIFT_T, W_TMA, PROBES)
    else:
        for c in range(N_CI):
            acc0, acc1, acc2, acc3 = _conv1d_step(
                acc0, acc1, acc2, acc3, x_ptr, w_ptr, w_desc, x_row, ll, n_ok, c, co0, C_IN, C_OUT, L_IN,
                L_OUT, STRIDE, PAD, KSIZE, DOT_PRECISION, UPCAST_DOT, BLOCK_CO, BLOCK_CI, CO_SUB, EVICT,
                SHIFT_T, W_TMA, PROBES)

    if PROBES:
        pl.enter_scope("epilogue")
    co = co0 + tl.arange(0, BLOCK_CO)
    _conv1d_store(acc0, b_ptr, y_ptr, y_row, ll, n_ok, co, C_OUT, L_OUT, HAS_BIAS)
    if CO_SUB > 1:
        _conv1d_store(acc1, b_ptr, y_ptr, y_row, ll, n_ok, co + BLOCK_CO, C_OUT, L_OUT, HAS_BIAS)
    if CO_SUB > 2:
        _conv1d_store(acc2, b_ptr, y_ptr, y_row, ll, n_ok, co + 2 * BLOCK_CO, C_OUT, L_OUT, HAS_BIAS)
    if CO_SUB > 3:
        _conv1d_store(acc3, b_ptr, y_ptr, y_row, ll, n_ok, co + 3 * BLOCK_CO, C_OUT, L_OUT, HAS_BIAS)
    if PROBES:
        pl.exit_scope("epilogue")


@triton.jit
def _conv1d_kernel(
    x_ptr, w_ptr, b_ptr, y_ptr, n_total,
    C_IN: tl.constexpr, C_OUT: tl.constexpr, L_IN: tl.constexpr, L_OUT: tl.constexpr,
    STRIDE: tl.constexpr, PAD: tl.constexpr, KSIZE: tl.constexpr, HAS_BIAS: tl.constexpr,
    DOT_PRECISION: tl.constexpr, UPCAST_DOT: tl.constexpr, INT64: tl.constexpr,
    BLOCK_N: tl.constexpr, BLOCK_CO: tl.constexpr, CO_SUB: tl.constexpr, BLOCK_CI: tl.constexpr,
    UNROLL_CI: tl.constexpr, PERSISTENT: tl.constexpr, EVICT: tl.constexpr, SHIFT_T: tl.constexpr,
    W_TMA: tl.constexpr = 0, PROBES: tl.constexpr = False, w_desc=None,
):
    """x `[B, C_IN, L_IN]` and y `[B, C_OUT, L_OUT]` contiguous; w packed `[K, C_IN, C_OUT]`;
    n_total = B * L_OUT output positions. PERSISTENT = 0: one tile per program; otherwise PERSISTENT
    programs per SM loop over the tiles (the weight loads are loop-invariant).

    W_TMA = 1: the weight tiles come by TMA through `w_desc`, a host `TensorDescriptor` over the packed
    weight as `[K * C_IN, C_OUT]` with block `[BLOCK_CI, BLOCK_CO]`; 2: over the K-major packing
    `[K * C_OUT, C_IN]`, block `[BLOCK_CO, BLOCK_CI]` (`weight_desc`). 0: `w_desc` is None, unused.
    (`w_desc` comes last, with a default, so positional launches of the other arguments keep working.)"""
    pid = tl.program_id(0)
    if PERSISTENT:
        n_tiles = tl.cdiv(n_total, BLOCK_N) * ((C_OUT + BLOCK_CO * CO_SUB - 1) // (BLOCK_CO * CO_SUB))
        for tile in tl.range(pid, n_tiles, tl.num_programs(0)):
            _conv1d_tile(tile, x_ptr, w_ptr, w_desc, b_ptr, y_ptr, n_total, C_IN, C_OUT, L_IN, L_OUT, STRIDE,
                         PAD, KSIZE, HAS_BIAS, DOT_PRECISION, UPCAST_DOT, INT64, BLOCK_N, BLOCK_CO, CO_SUB,
                         BLOCK_CI, UNROLL_CI, EVICT, SHIFT_T, W_TMA, PROBES)
    else:
        _conv1d_tile(pid, x_ptr, w_ptr, w_desc, b_ptr, y_ptr, n_total, C_IN, C_OUT, L_IN, L_OUT, STRIDE, PAD,
                     KSIZE, HAS_BIAS, DOT_PRECISION, UPCAST_DOT, INT64, BLOCK_N, BLOCK_CO, CO_SUB,
                     BLOCK_CI, UNROLL_CI, EVICT, SHIFT_T, W_TMA, PROBES)
