"""conv1d as an implicit GEMM in Triton (KernelEvolve section 5.1, appendix A).

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

import os
import weakref
from collections import OrderedDict

import torch
import triton
import triton.language as tl
from torch import nn
from triton.tools.tensor_descriptor import TensorDescriptor

from case_studies.common.launch import LaunchCache, Plan, aligned16

try:  # probes are compiled away unless PROBES=True; the interpreter lacks the semantic
    import triton.profiler.language as pl

    pl.enable_semantic("triton")
except Exception:  # pragma: no cover - depends on the triton build
    pl = None

# -- tunables, declared as data (docs/CONTRACTS.md) ---------------------------------------------------
TUNABLES = {
    "BLOCK_N": [32, 64, 128, 256],
    "BLOCK_CO": [16, 32, 64, 128],
    "CO_SUB": [1, 2, 3, 4],
    "BLOCK_CI": [16, 32, 64],
    "UNROLL_CI": [0, 1, 2],
    "PERSISTENT": [0, 1, 2, 4],
    "EVICT": [0, 1],
    "SHIFT_T": [0, 1],
    "W_TMA": [0, 1, 2],
    "NUM_WARPS": [2, 4, 8],
    "NUM_STAGES": [1, 2, 3, 4],
}
BLOCK_N = 128         # output positions (flattened B * L_out) per program: the dot's M
BLOCK_CO = 32         # output channels per accumulator: the dot's N
CO_SUB = 4            # accumulators per program (at most; fewer when C_out is smaller): C_out per program
BLOCK_CI = 32         # input channels per reduction step: the dot's K
UNROLL_CI = 1         # 0: an scf.for loop over C_in chunks; 1: unrolled; 2: unrolled, operands loaded a step ahead
PERSISTENT = 0        # 0: one tile per program; p > 0: p programs per SM loop over the tiles
EVICT = 0             # 1: x loads evict_first, weight loads evict_last (L1/L2 hints)
SHIFT_T = 1           # 1: shifted taps loaded as [ci, n] (a layout with 32 consecutive n across the lanes)
W_TMA = 0             # weight tiles by TMA (host descriptor) into shared memory: 1 from [K*C_in, C_out],
#                       2 from the K-major [K*C_out, C_in]; 0: pointer loads (see `weight_desc`).
# Off: measured no win on the H200 at the production shape (results/case_studies/conv1d/wtma/wtma.json,
# commit e4e255b, plain launches, L2 flushed, medians of 3 rounds; graph within 0.5 us): fp16 gather 126.2
# us against W_TMA 1 168.4 (each unrolled TMA load is waited for at once: 27 serial L2 round trips a
# program), persistent 378 / 217 (1 / 2 per SM), BLOCK_N 256 x 8 warps 246.6 (158.3 without TMA), looped C_in
# with num_stages 2 123.6 (the pipeliner prefetches the TMA tiles: 2 %, under the 3 % bar), 3 stages 151.7;
# bf16 126.3 against 168.8; fp32 gather 300.5 against 420.0 (W_TMA 1) and 356.6 (W_TMA 2), "cl" 271.9.
NUM_WARPS = 4
NUM_STAGES = 1
# On a GPU, tune per shape over `autotune_configs()`; the constants above are the interpreter's config,
# the config the offline search rewrites, and the one used when AUTOTUNE is False.
AUTOTUNE_WARMUP_MS = 5
AUTOTUNE_REP_MS = 20
AUTOTUNE = True
FP32_DOT_PRECISION = "tf32"   # "ieee" for exact fp32 products (about 8x slower on tensor-core-less paths)
MAX_CO_SUB = 4                # the kernel has four accumulator slots


def tunables_valid(cfg: dict) -> bool:
    """Prune tiles whose fp32 accumulators alone would take more than 128 registers a thread."""
    acc_regs = cfg["BLOCK_N"] * cfg["BLOCK_CO"] * cfg.get("CO_SUB", 1) // (32 * cfg["NUM_WARPS"])
    return acc_regs <= 128 and cfg.get("CO_SUB", 1) <= MAX_CO_SUB


# A short list, not the TUNABLES product: the device lease pays for every compiled config
# (about a second each), and the offline search explores the full TUNABLES space instead.
AUTOTUNE_SPACE = [
    # BLOCK_N, BLOCK_CO, CO_SUB, BLOCK_CI, UNROLL_CI, PERSISTENT, EVICT, SHIFT_T, W_TMA, num_warps, num_stages
    # H200, production shape, L2 flushed (results/case_studies/conv1d/gpu_run4_tuning.json): the first
    # row won everywhere it was tuned (K = 1, 3, 5; fp16 and fp32): fp16 126 us (168 with SHIFT_T = 0),
    # 64-position tiles 139-142, 256: 159, 32: 239; fp32 300 us (502 with SHIFT_T = 0), 256: 313. The
    # list keeps the runners-up only (each config timed costs lease time); dropped: 32-position tiles
    # (239 us), eviction hints (142), operands loaded a step ahead (140-143), 64 x 2 accumulators (191),
    # one 128-wide accumulator (164 fp16, 690 fp32: gpu_run6_sweep2.json), and before that the
    # software-pipelined C_in loop (201 us fp16, 887 fp32) and persistent variants (212-283 us fp16).
    # Weights by TMA (W_TMA) lost or tied in every variant measured (see W_TMA above): no W_TMA row.
    (128, 32, 4, 32, 1, 0, 0, 1, 0, 4, 1),
    (64, 32, 4, 32, 1, 0, 0, 1, 0, 4, 1),
    (128, 32, 4, 32, 1, 0, 0, 1, 0, 8, 1),
    (256, 32, 4, 32, 1, 0, 0, 1, 0, 8, 1),
]
CONFIG_KEYS = ("BLOCK_N", "BLOCK_CO", "CO_SUB", "BLOCK_CI", "UNROLL_CI", "PERSISTENT", "EVICT", "SHIFT_T",
               "W_TMA")


def autotune_configs() -> list[triton.Config]:
    """The autotune space as triton configs, pruned by `tunables_valid`."""
    out = []
    for *tiles, nw, ns in AUTOTUNE_SPACE:
        kw = dict(zip(CONFIG_KEYS, tiles))
        if tunables_valid({**kw, "NUM_WARPS": nw}):
            out.append(triton.Config(kw, num_warps=nw, num_stages=ns))
    return out


def fit_config(kw: dict, c_in: int, c_out: int) -> dict:
    """A config's tiles shrunk to the problem: no more accumulators than C_out needs, no C_in step much
    wider than C_in (`tl.dot` needs every side >= 16)."""
    kw = dict(kw)
    bco = min(kw["BLOCK_CO"], max(16, triton.next_power_of_2(c_out)))
    kw["BLOCK_CO"] = bco
    kw["CO_SUB"] = max(1, min(kw["CO_SUB"], triton.cdiv(c_out, bco)))
    kw["BLOCK_CI"] = min(kw["BLOCK_CI"], max(16, triton.next_power_of_2(c_in)))
    return kw


def prune_configs(configs: list[triton.Config], named_args: dict, **kwargs) -> list[triton.Config]:
    """Fit every config to the problem (`fit_config`), dropping the duplicates that makes, and the weight-TMA
    configs that the launch's descriptor (`w_desc`, one per launch) does not serve."""
    args = {**named_args, **kwargs}
    spec = desc_spec(args.get("w_desc"))
    out, seen = [], set()
    for c in configs:
        kw = fit_config(c.kwargs, args["C_IN"], args["C_OUT"])
        if kw.get("W_TMA", 0) and tma_block(kw) != spec:
            continue
        key = (tuple(sorted(kw.items())), c.num_warps, c.num_stages)
        if key not in seen:
            seen.add(key)
            out.append(triton.Config(kw, num_warps=c.num_warps, num_stages=c.num_stages))
    return out


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


def _autotune_bench(fn, quantiles):
    """A short do_bench for tuning: the device lease pays for every config timed (differences under a
    few percent are not resolved at this length; the recorded benchmark re-times the winner properly)."""
    return triton.testing.do_bench(fn, warmup=AUTOTUNE_WARMUP_MS, rep=AUTOTUNE_REP_MS, quantiles=quantiles)


_conv1d_autotuned = triton.autotune(
    do_bench=_autotune_bench,
    configs=autotune_configs(), key=["C_IN", "C_OUT", "L_IN", "L_OUT", "STRIDE", "KSIZE"],
    prune_configs_by={"early_config_prune": prune_configs},
)(_conv1d_kernel)


# -- weight packing, cached ----------------------------------------------------------------------------
class _OwnedLRU:
    """A bounded LRU of values derived from a tensor (its packing, a descriptor over it): keyed by cheap
    properties, and a hit only while the key's tensor is still the very object it was made from (a weak
    reference): a freed tensor's memory reused by a new one of the same shape is a miss."""

    def __init__(self, size: int):
        self.size = size
        self.entries: OrderedDict[tuple, tuple[weakref.ref, object]] = OrderedDict()

    def get(self, key: tuple, owner: torch.Tensor) -> object | None:
        hit = self.entries.get(key)
        if hit is not None:
            if hit[0]() is owner:
                self.entries.move_to_end(key)
                return hit[1]
            del self.entries[key]
        return None

    def put(self, key: tuple, owner: torch.Tensor, value: object) -> None:
        self.entries[key] = (weakref.ref(owner), value)
        while len(self.entries) > self.size:
            self.entries.popitem(last=False)


_PACK_CACHE = _OwnedLRU(32)


def pack_weight(weight: torch.Tensor, use_cache: bool = True, layout: str = "gather") -> torch.Tensor:
    """`[C_out, C_in, K]` -> `[K, C_in, C_out]`, contiguous (the paper's `[C_in*K, C_out]` packing,
    k-major: one tap's `[C_in, C_out]` matrix is the dot's B operand, contiguous along C_out), or with
    `layout="kmajor"` `[K, C_out, C_in]` (C_in-contiguous: the K-major B operand TF32 wgmma reads).

    Cached by pointer, shape, strides, dtype, device and version counter (an in-place update, e.g. an
    optimizer step, repacks), as the paper does, and also by the weight tensor itself (a weak reference):
    a key of pointer and shape alone returned stale weights on the H200 when a freed weight's memory was
    reused by a new weight of the same shape (results/case_studies/conv1d/gpu_run2_checks.json,
    the "gather" check of B4 Cin32 Cout17).
    """
    key = (layout, weight.data_ptr(), tuple(weight.shape), weight.stride(), weight.dtype, weight.device,
           weight._version)
    hit = _PACK_CACHE.get(key, weight) if use_cache else None
    if hit is not None:
        return hit
    packed = weight.detach().permute(2, 0, 1) if layout == "kmajor" else weight.detach().permute(2, 1, 0)
    packed = packed.contiguous()
    if use_cache:
        _PACK_CACHE.put(key, weight, packed)
    return packed


# -- weight tiles by TMA: host-side descriptors over the packed weight, cached with it --------------------
_DESC_CACHE = _OwnedLRU(32)


def tma_block(kw: dict) -> tuple[int, tuple[int, int]]:
    """(W_TMA, the descriptor's block shape) a fitted config needs."""
    if kw["W_TMA"] == 2:
        return 2, (kw["BLOCK_CO"], kw["BLOCK_CI"])
    return kw["W_TMA"], (kw["BLOCK_CI"], kw["BLOCK_CO"])


def desc_spec(desc: TensorDescriptor | None) -> tuple[int, tuple[int, int]] | None:
    """What `weight_desc` built a descriptor for (tagged on it), or None."""
    return None if desc is None else desc.conv1d_spec


def weight_desc(wp: torch.Tensor, kw: dict, use_cache: bool = True) -> TensorDescriptor | None:
    """A host TMA descriptor over the packed weight for a fitted config with W_TMA (`[K, C_in, C_out]` as
    `[K * C_in, C_out]` for 1, `[K, C_out, C_in]` as `[K * C_out, C_in]` for 2), or None where TMA does not
    apply: rows not a multiple of 16 bytes or a misaligned base, or neither a GPU nor the interpreter
    (Triton 3.6's interpreter takes host descriptors). Host descriptors avoid the in-kernel
    `tl.make_tensor_descriptor` (0.83 us of each warp's time in another kernel here); Triton still encodes
    the CUtensorMap at every launch, from `base` as it is then.

    Cached like `pack_weight`: by pointer, shape, dtype, device and block, checked against the packed
    tensor itself (a weak reference), so a repacked weight never meets a stale descriptor."""
    spec = tma_block(kw)
    if not spec[0] or not (wp.is_cuda or os.environ.get("TRITON_INTERPRET") == "1"):
        return None
    view = wp.view(-1, wp.shape[-1])
    if view.shape[1] * wp.element_size() % 16 or view.data_ptr() % 16 or not wp.is_contiguous():
        return None
    key = (wp.data_ptr(), tuple(wp.shape), wp.dtype, wp.device, spec)
    hit = _DESC_CACHE.get(key, wp) if use_cache else None
    if hit is not None:
        return hit
    desc = TensorDescriptor.from_tensor(view, list(spec[1]))
    desc.conv1d_spec = spec
    if use_cache:
        _DESC_CACHE.put(key, wp, desc)
    return desc


def _spec_kw(spec: tuple[int, tuple[int, int]]) -> dict:
    """`tma_block`'s inverse: the config entries a descriptor was built for."""
    w_tma, (a, b) = spec
    return {"W_TMA": w_tma, "BLOCK_CI": b if w_tma == 2 else a, "BLOCK_CO": a if w_tma == 2 else b}


def _pack_and_desc(weight: torch.Tensor, kw: dict, use_cache: bool) -> tuple[torch.Tensor, dict,
                                                                             TensorDescriptor | None]:
    """The gather packing (always `w_ptr`, whatever W_TMA: the autotuner's other configs read it), the
    config with W_TMA cleared where TMA does not apply, and the descriptor (None without W_TMA; for W_TMA 2
    over the K-major packing, which the descriptor keeps alive)."""
    wp = pack_weight(weight, use_cache)
    if not kw.get("W_TMA", 0):
        return wp, kw, None
    wt = pack_weight(weight, use_cache, "kmajor") if kw["W_TMA"] == 2 else wp
    desc = weight_desc(wt, kw, use_cache)
    return wp, (kw if desc is not None else {**kw, "W_TMA": 0}), desc


def _autotune_desc(weight: torch.Tensor, c_in: int, c_out: int, use_cache: bool) -> TensorDescriptor | None:
    """The one descriptor an autotuned launch passes: for the weight-TMA rows of `AUTOTUNE_SPACE` (all of
    one W_TMA and block once fitted; `prune_configs` drops the others), None when the space has none."""
    rows = [dict(zip(CONFIG_KEYS, r[:len(CONFIG_KEYS)])) for r in AUTOTUNE_SPACE]
    tma_rows = [fit_config(r, c_in, c_out) for r in rows if r["W_TMA"]]
    if not tma_rows:
        return None
    return _pack_and_desc(weight, tma_rows[0], use_cache)[2]


def _interpreter_bf16(dtype: torch.dtype) -> bool:
    return dtype == torch.bfloat16 and os.environ.get("TRITON_INTERPRET") == "1"


def fixed_config() -> dict:
    """The module-level constants as launch parameters."""
    return {"BLOCK_N": BLOCK_N, "BLOCK_CO": BLOCK_CO, "CO_SUB": CO_SUB, "BLOCK_CI": BLOCK_CI,
            "UNROLL_CI": UNROLL_CI, "PERSISTENT": PERSISTENT, "EVICT": EVICT, "SHIFT_T": SHIFT_T,
            "W_TMA": W_TMA, "num_warps": NUM_WARPS,
            "num_stages": NUM_STAGES}


_SM_COUNT: dict[int, int] = {}


def _sm_count(device: torch.device) -> int:
    if device.type != "cuda":
        return 4      # the interpreter: a few programs, so the persistent loop is exercised
    idx = device.index if device.index is not None else torch.cuda.current_device()
    if idx not in _SM_COUNT:
        _SM_COUNT[idx] = torch.cuda.get_device_properties(idx).multi_processor_count
    return _SM_COUNT[idx]


def n_tiles(n_total: int, c_out: int, kw: dict) -> int:
    return triton.cdiv(n_total, kw["BLOCK_N"]) * triton.cdiv(c_out, kw["BLOCK_CO"] * kw["CO_SUB"])


def grid_size(n_total: int, c_out: int, kw: dict, sm_count: int) -> int:
    tiles = n_tiles(n_total, c_out, kw)
    return min(tiles, kw["PERSISTENT"] * sm_count) if kw["PERSISTENT"] else tiles


def launch_meta(bsz: int, c_in: int, l_in: int, c_out: int, ksize: int, stride: int, padding: int,
                dtype: torch.dtype, has_bias: bool, probes: bool = False) -> tuple[int, dict]:
    """The kernel's `n_total` and compile-time arguments for one problem."""
    l_out = (l_in + 2 * padding - ksize) // stride + 1
    n_total = bsz * l_out
    big = max(bsz * c_in * l_in, bsz * c_out * l_out) + n_total >= 2**31 - 1
    return n_total, dict(C_IN=c_in, C_OUT=c_out, L_IN=l_in, L_OUT=l_out, STRIDE=stride, PAD=padding,
                         KSIZE=ksize, HAS_BIAS=has_bias,
                         DOT_PRECISION=FP32_DOT_PRECISION if dtype == torch.float32 else "ieee",
                         UPCAST_DOT=_interpreter_bf16(dtype), INT64=big, PROBES=probes)


# Which kernel (`path=` or `config["path"]`): "gather" (this module's pointer kernel), "cl" (x transposed
# to channels-last by one Triton pass, then the TMA kernel of `tma.py`: every tap aligned, K-major
# operands). "auto" takes what the H200 measured fastest: "cl" for fp32 where it applies, "gather" otherwise
# (results/case_studies/conv1d/). The staging-in-the-kernel experiment ("fused", slower everywhere it was
# measured) is in experiments/conv1d/fused.py.
PATHS = ("auto", "gather", "cl")


def choose_path(bsz: int, c_in: int, l_in: int, c_out: int, ksize: int, stride: int, padding: int,
                dtype: torch.dtype) -> str:
    from case_studies.conv1d.tma import cl_applies

    if dtype == torch.float32 and cl_applies(bsz, c_in, l_in, c_out, ksize, stride, padding, 4):
        return "cl"
    return "gather"


def configs_for(params: dict, dtype: str = "float16") -> list[dict]:
    """The configs the shipped path's autotuner times for a shape (`B`, `C_in`, `C_out`, `L`, `K`, `stride`,
    `padding`), as `conv1d` config dicts (for compiling them in parallel before a benchmark)."""
    from case_studies.conv1d import tma

    path = choose_path(params["B"], params["C_in"], params["L"], params["C_out"], params["K"], params["stride"],
                       params["padding"], getattr(torch, dtype))
    if path == "cl":
        return [{**dict(zip(tma.TMA_CONFIG_KEYS, row[:-1])), "num_warps": row[-1], "path": "cl"}
                for row in tma.CL_AUTOTUNE_SPACE]
    return [{**c.kwargs, "num_warps": c.num_warps, "num_stages": c.num_stages, "path": "gather"}
            for c in autotune_configs()]


# Plain launches of the gather kernel through `case_studies/common/launch.py`: at B 256 Triton's Python
# launch path (autotuner key, argument binding) cost more than the kernel (85 us plain against 28.5 us as
# a CUDA graph, results/case_studies/conv1d/bench.csv at ead6c8c).
_plans = LaunchCache(_conv1d_kernel, n_tensors=4)   # w_desc, when used, is the tail's last entry
PLAN_CACHE = True      # False: every call through Triton's own launch path (for measuring it)


def plan_key(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None, stride: int, padding: int,
             config: dict | None, autotune: bool | None, use_cache: bool, probes: bool,
             path: str) -> tuple | None:
    """The call signature a recorded gather launch is valid for, or None where no plan applies (CPU,
    non-contiguous x or bias, probe builds: those take the full path). Covers everything the compiled kernel was
    specialized on: shapes (constexprs), dtype, device, pointer alignment, bias presence, the options.
    The weight's values are not in it: the packed weight is looked up (`pack_weight`) on every call."""
    if not (PLAN_CACHE and x.is_cuda and x.is_contiguous()) or (bias is not None and not bias.is_contiguous()):
        return None
    if probes:   # an instrumented build is compiled inside the Proton session: always Triton's own path
        return None
    cfg = None if config is None else tuple(sorted(config.items()))
    return (x.shape, x.dtype, weight.shape, weight.dtype, None if bias is None else bias.dtype, stride, padding,
            torch.cuda.current_device(), aligned16(x) if bias is None else aligned16(x, bias),
            cfg, autotune, use_cache, probes, path, AUTOTUNE)


def conv1d(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None, stride: int = 1,
           padding: int = 0, *, config: dict | None = None, autotune: bool | None = None,
           use_cache: bool = True, probes: bool = False, path: str = "auto") -> torch.Tensor:
    """Triton conv1d (groups 1, dilation 1). `path` (or `config["path"]`): see `PATHS`. `config` pins the
    tiles of the chosen kernel (gather: `CONFIG_KEYS`, num_warps, num_stages, missing keys from the module
    constants; cl: `tma.TMA_CONFIG_KEYS`, num_warps); otherwise both are autotuned on a GPU when `AUTOTUNE`.

    On a GPU the first gather launch of a call signature goes through Triton and is recorded; later calls
    with that signature allocate y, look up the packed weight and call the compiled launcher directly."""
    key = plan_key(x, weight, bias, stride, padding, config, autotune, use_cache, probes, path)
    plan = None if key is None else _plans.plans.get(key)
    if plan is not None and plan.config["W_DESC"] is None:
        wp = pack_weight(weight, use_cache)
        y = x.new_empty((x.shape[0], weight.shape[0], plan.config["L_OUT"]))
        plan.launch((x, wp, wp if bias is None else bias, y))
        return y
    if plan is not None:    # weights by TMA: this call's descriptor (`w_desc`, the last argument)
        wp, _, wd = _pack_and_desc(weight, _spec_kw(plan.config["W_DESC"]), use_cache)
        if wd is not None:
            y = x.new_empty((x.shape[0], weight.shape[0], plan.config["L_OUT"]))
            Plan(plan.compiled, plan.grid, plan.tail[:-1] + (wd,), plan.config).launch(
                (x, wp, wp if bias is None else bias, y))
            return y
    pinned = config is not None     # an empty dict pins the module constants (no autotuning)
    config = dict(config or {})
    path = config.pop("path", path)
    if path not in PATHS:
        raise ValueError(f"unknown path {path!r}: one of {PATHS} (the TMA path was removed)")
    if x.dim() != 3 or weight.dim() != 3 or weight.shape[1] != x.shape[1]:
        raise ValueError(f"expected x [B, C_in, L] and w [C_out, C_in, K]; got {tuple(x.shape)}, "
                         f"{tuple(weight.shape)}")
    if weight.dtype != x.dtype or (bias is not None and bias.dtype != x.dtype):
        raise TypeError(f"x, weight and bias must share a dtype; got {x.dtype}, {weight.dtype}, "
                        f"{None if bias is None else bias.dtype}")
    bsz, c_in, l_in = x.shape
    c_out, _, ksize = weight.shape
    l_out = (l_in + 2 * padding - ksize) // stride + 1
    y = torch.empty((bsz, c_out, max(l_out, 0)), dtype=x.dtype, device=x.device)
    if y.numel() == 0:
        return y
    if path == "auto":
        path = choose_path(bsz, c_in, l_in, c_out, ksize, stride, padding, x.dtype)
    x = x.contiguous()
    n_total, meta = launch_meta(bsz, c_in, l_in, c_out, ksize, stride, padding, x.dtype, bias is not None,
                                probes)
    sms = _sm_count(x.device)
    use_autotune = (AUTOTUNE if autotune is None else autotune) and not pinned and x.is_cuda and not probes
    if path == "cl":
        from case_studies.conv1d import tma

        if not tma.cl_applies(bsz, c_in, l_in, c_out, ksize, stride, padding, x.element_size()):
            raise ValueError("the channels-last TMA path needs stride 1 and 16-byte rows of C_in")
        wk = x.dtype == torch.float32
        wp = pack_weight(weight, use_cache, "kmajor" if wk else "gather")
        b = bias.contiguous() if bias is not None else wp  # any pointer; not read when HAS_BIAS is False
        tma.conv1d_cl(x, wp, b, y, meta, config, wk, sms, use_autotune)
        return y
    if use_autotune:
        wd = _autotune_desc(weight, c_in, c_out, use_cache)
        wp = pack_weight(weight, use_cache)
        b = bias.contiguous() if bias is not None else wp
        compiled = _conv1d_autotuned[lambda m: (grid_size(n_total, c_out, m, sms),)](
            x, wp, b, y, n_total, **meta, w_desc=wd)
        best = _conv1d_autotuned.best_config
        kw, nw, ns = dict(best.kwargs), best.num_warps, best.num_stages
    else:
        cfg = dict(fixed_config(), **config)
        kw = fit_config({k: cfg[k] for k in CONFIG_KEYS}, c_in, c_out)
        wp, kw, wd = _pack_and_desc(weight, kw, use_cache)
        b = bias.contiguous() if bias is not None else wp
        nw, ns = cfg["num_warps"], cfg["num_stages"]
        compiled = _conv1d_kernel[(grid_size(n_total, c_out, kw, sms),)](
            x, wp, b, y, n_total, **meta, **kw, w_desc=wd, num_warps=nw, num_stages=ns)
    if key is not None:
        named = dict(x_ptr=x, w_ptr=wp, b_ptr=b, y_ptr=y, n_total=n_total, **meta, **kw, w_desc=wd)
        _plans.record(key, compiled, (grid_size(n_total, c_out, kw, sms),), named,
                      {**kw, "num_warps": nw, "num_stages": ns, "L_OUT": meta["L_OUT"], "W_DESC": desc_spec(wd)})
    return y


def best_config() -> dict[str, dict]:
    """What the autotuners chose so far, by key (for the benchmark log)."""
    from case_studies.conv1d import tma

    out = {f"implicit_gemm {k}": {**c.kwargs, "num_warps": c.num_warps, "num_stages": c.num_stages}
           for k, c in _conv1d_autotuned.cache.items()}
    return {**out, **tma.best_config()}


class ModelNew(nn.Module):
    """The spec's Model with the convolution in Triton (same constructor, same parameters)."""

    def __init__(self, c_in: int, c_out: int, kernel_size: int, stride: int = 1, padding: int = 0,
                 bias: bool = True, dtype: str = "float32"):
        super().__init__()
        self.conv = nn.Conv1d(c_in, c_out, kernel_size, stride=stride, padding=padding, bias=bias)
        self.conv.to(getattr(torch, dtype))
        self.stride, self.padding = stride, padding

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return conv1d(x, self.conv.weight, self.conv.bias, self.stride, self.padding)
