"""Lab book, frozen: ran at commit 2f7679a as `case_studies.conv1d.fused`; results: results/case_studies/conv1d/
(gpu_run5_sweep.json, proton/fused_probes*); the path is gone from kernel.py.
Nothing imports this file and it is not maintained: its imports name the modules as they were at 2f7679a;
to re-run it, check that commit out. The maintained benchmark is `benchmarks/case_studies/run.py`.

conv1d with the transpose to channels-last fused in: every tap a 16-byte vector load, K-major operands.

    y[b, co, l] = bias[co] + sum_{ci, k} w[co, ci, k] * x[b, ci, l + k - padding]     (stride 1, "same")

Why: in `kernel.py` the taps shifted by `k - padding` along the contiguous L axis can never be 16-byte
aligned, so they stay 2-byte loads (K = 1 ran 60 us at the production shape, K = 3 127 us, K = 5 185 us),
and an fp32 tile that is position-contiguous must be transposed for TF32 wgmma, which reads both operands
K-major (C_in-contiguous). A TMA box cannot fix the first: its innermost start coordinate must be
16-byte aligned too (an unaligned one is an illegal instruction on Hopper, which is what killed this case
study's first TMA attempt; tile-ai/tilelang#2681 hit the same). In channels-last memory `[L, C_in]` a
shift by `k - padding` moves whole 192-byte rows, and every tap is aligned.

So each program stages its tile of x channels-last in a private scratch slot and reads the taps from
there: for BLOCK_N flattened output positions `n0 ..` (rows `n0 - HALO .. n0 + BLOCK_N + HALO`, zero
outside the tensor), the x tile is read as `[BLOCK_CI, rows]` (16-byte vectors along L), written as
`[rows, C_in]` (the transpose happens in registers and shared memory), and after a CTA barrier every tap
k reads rows shifted by `k - padding`, C_in-contiguous, from L1/L2. The grid is persistent (a few
programs per SM, each looping over tiles), so the scratch slots (tens of KB each) are reused and stay in
L2: DRAM sees x once and y once, like the floor counts. Positions are flattened over the batch (no tile
waste at L = 200); the mask `0 <= l + k - padding < L` keeps taps inside their example.

Applies to stride 1 and `L_out == L_in` (K = 2 * padding + 1, what the production shapes use), padding
at most HALO. Opt-in only (`path="fused"`): measured on the H200 it is correct and vectorized but slower
than the gather kernel, 175 us fp16 (126) and 295 us fp32 (300; the channels-last path 267), with 37 % of
its probe cycles in the staging (results/case_studies/conv1d/gpu_run5_sweep.json, proton/fused_probes).

Probe regions (PROBES=True): `stage_x`, `load_x`, `load_w`, `mma`, `epilogue`.
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl

from case_studies.conv1d.kernel import _conv1d_store, _mma

try:  # probes are compiled away unless PROBES=True; the interpreter lacks the semantic
    import triton.profiler.language as pl

    pl.enable_semantic("triton")
except Exception:  # pragma: no cover - depends on the triton build
    pl = None

HALO = 8   # scratch rows on each side of a tile: >= padding, and a 16-byte run of fp16 positions
FUSED_CONFIG_KEYS = ("BLOCK_N", "BLOCK_CO", "CO_SUB", "BLOCK_CI", "CTAS_PER_SM", "W_KMAJOR")
FUSED_TUNABLES = {
    "BLOCK_N": [64, 128, 256],
    "BLOCK_CO": [16, 32, 64],
    "CO_SUB": [1, 2, 3, 4],
    "BLOCK_CI": [16, 32, 64],
    "CTAS_PER_SM": [1, 2, 3, 4, 6, 8],
    "W_KMAJOR": [0, 1],
    "NUM_WARPS": [4, 8],
}
# by element size; W_KMAJOR for fp32: TF32 wgmma reads both operands K-major
FUSED_CONFIGS = {
    2: {"BLOCK_N": 128, "BLOCK_CO": 32, "CO_SUB": 4, "BLOCK_CI": 32, "CTAS_PER_SM": 2, "W_KMAJOR": 0,
        "num_warps": 4},
    4: {"BLOCK_N": 128, "BLOCK_CO": 32, "CO_SUB": 4, "BLOCK_CI": 32, "CTAS_PER_SM": 2, "W_KMAJOR": 1,
        "num_warps": 4},
}


def fused_config(dtype: torch.dtype) -> dict:
    return dict(FUSED_CONFIGS[4 if dtype == torch.float32 else 2])


@triton.jit
def _stage(x_ptr, s_base, m0, r0, n_total,
           C_IN: tl.constexpr, L: tl.constexpr, SC: tl.constexpr, R: tl.constexpr, BLOCK_CI: tl.constexpr,
           INT64: tl.constexpr):
    """x at flattened positions m0 .. m0 + R (zeros outside [0, n_total)) -> scratch rows r0 .. r0 + R."""
    m = m0 + tl.arange(0, R)
    ok = (m >= 0) & (m < n_total)   # (masked lanes read nothing: their address may be anything)
    bb = m // L
    if INT64:
        bb = bb.to(tl.int64)
    src = x_ptr + (bb * (C_IN * L) + m % L)[None, :]
    dst = s_base + (r0 + tl.arange(0, R))[None, :] * SC
    N_CI: tl.constexpr = (C_IN + BLOCK_CI - 1) // BLOCK_CI
    for c in tl.static_range(N_CI):
        ci = c * BLOCK_CI + tl.arange(0, BLOCK_CI)
        if C_IN % BLOCK_CI != 0:
            v = tl.load(src + ci[:, None] * L, mask=ok[None, :] & (ci < C_IN)[:, None], other=0.0)
            tl.store(dst + ci[:, None], v, mask=(ci < C_IN)[:, None])
        else:
            v = tl.load(src + ci[:, None] * L, mask=ok[None, :], other=0.0)
            tl.store(dst + ci[:, None], v)


@triton.jit
def _tap(s_base, ll, c, k: tl.constexpr, C_IN: tl.constexpr, L: tl.constexpr, SC: tl.constexpr,
         PAD: tl.constexpr, HALO_: tl.constexpr, UPCAST_DOT: tl.constexpr, BLOCK_N: tl.constexpr,
         BLOCK_CI: tl.constexpr):
    """Tap k of C_in chunk c as the dot's A operand `[BLOCK_N, BLOCK_CI]`, C_in-contiguous (K-major)."""
    ci = c * BLOCK_CI + tl.arange(0, BLOCK_CI)
    rows = HALO_ + tl.arange(0, BLOCK_N) + (k - PAD)
    ptrs = s_base + rows[:, None] * SC + ci[None, :]
    if k != PAD:   # the shifted taps must not cross into the neighbouring example
        pos = ll + (k - PAD)
        ok = (pos >= 0) & (pos < L)
        if C_IN % BLOCK_CI != 0:
            a = tl.load(ptrs, mask=ok[:, None] & (ci < C_IN)[None, :], other=0.0)
        else:
            a = tl.load(ptrs, mask=ok[:, None], other=0.0)
    elif C_IN % BLOCK_CI != 0:
        a = tl.load(ptrs, mask=(ci < C_IN)[None, :], other=0.0)
    else:
        a = tl.load(ptrs)
    if UPCAST_DOT:  # Triton 3.6's interpreter computes bf16 dots wrongly; bf16 -> fp32 is exact
        a = a.to(tl.float32)
    return a


@triton.jit
def _w(w_ptr, c, k: tl.constexpr, cj, C_IN: tl.constexpr, C_OUT: tl.constexpr, W_KMAJOR: tl.constexpr,
       UPCAST_DOT: tl.constexpr, BLOCK_CI: tl.constexpr):
    """Tap k's weights `[BLOCK_CI, BLOCK_CO]`, packed `[K, C_in, C_out]` or (W_KMAJOR) `[K, C_out, C_in]`."""
    ci = c * BLOCK_CI + tl.arange(0, BLOCK_CI)
    if W_KMAJOR:
        ptrs = w_ptr + (k * C_OUT + cj)[None, :] * C_IN + ci[:, None]
    else:
        ptrs = w_ptr + (k * C_IN + ci)[:, None] * C_OUT + cj[None, :]
    w = tl.load(ptrs, mask=(ci < C_IN)[:, None] & (cj < C_OUT)[None, :], other=0.0)
    if UPCAST_DOT:
        w = w.to(tl.float32)
    return w


@triton.jit
def _ws(w_ptr, c, k: tl.constexpr, co0, C_IN: tl.constexpr, C_OUT: tl.constexpr, W_KMAJOR: tl.constexpr,
        UPCAST_DOT: tl.constexpr, BLOCK_CO: tl.constexpr, BLOCK_CI: tl.constexpr, CO_SUB: tl.constexpr):
    cj = co0 + tl.arange(0, BLOCK_CO)
    w0 = _w(w_ptr, c, k, cj, C_IN, C_OUT, W_KMAJOR, UPCAST_DOT, BLOCK_CI)
    w1 = w0
    w2 = w0
    w3 = w0
    if CO_SUB > 1:
        w1 = _w(w_ptr, c, k, cj + BLOCK_CO, C_IN, C_OUT, W_KMAJOR, UPCAST_DOT, BLOCK_CI)
    if CO_SUB > 2:
        w2 = _w(w_ptr, c, k, cj + 2 * BLOCK_CO, C_IN, C_OUT, W_KMAJOR, UPCAST_DOT, BLOCK_CI)
    if CO_SUB > 3:
        w3 = _w(w_ptr, c, k, cj + 3 * BLOCK_CO, C_IN, C_OUT, W_KMAJOR, UPCAST_DOT, BLOCK_CI)
    return w0, w1, w2, w3


@triton.jit
def _step(acc0, acc1, acc2, acc3, s_base, w_ptr, ll, c, co0,
          C_IN: tl.constexpr, C_OUT: tl.constexpr, L: tl.constexpr, SC: tl.constexpr, PAD: tl.constexpr,
          KSIZE: tl.constexpr, HALO_: tl.constexpr, DOT_PRECISION: tl.constexpr, UPCAST_DOT: tl.constexpr,
          W_KMAJOR: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_CO: tl.constexpr, BLOCK_CI: tl.constexpr,
          CO_SUB: tl.constexpr, PROBES: tl.constexpr):
    """One C_in chunk, every tap: acc_j[n, co] += x[b, ci, l + k - pad] @ w[k, ci, co_j]."""
    for k in tl.static_range(KSIZE):
        if PROBES:
            pl.enter_scope("load_x")
        a = _tap(s_base, ll, c, k, C_IN, L, SC, PAD, HALO_, UPCAST_DOT, BLOCK_N, BLOCK_CI)
        if PROBES:
            pl.exit_scope("load_x")
            pl.enter_scope("load_w")
        w0, w1, w2, w3 = _ws(w_ptr, c, k, co0, C_IN, C_OUT, W_KMAJOR, UPCAST_DOT, BLOCK_CO, BLOCK_CI, CO_SUB)
        if PROBES:
            pl.exit_scope("load_w")
        acc0, acc1, acc2, acc3 = _mma(acc0, acc1, acc2, acc3, a, w0, w1, w2, w3, CO_SUB, DOT_PRECISION, PROBES)
    return acc0, acc1, acc2, acc3


@triton.jit
def _conv1d_fused_kernel(
    x_ptr, w_ptr, b_ptr, y_ptr, s_ptr, n_total, n_tiles,
    C_IN: tl.constexpr, C_OUT: tl.constexpr, L: tl.constexpr, PAD: tl.constexpr, KSIZE: tl.constexpr,
    HAS_BIAS: tl.constexpr, DOT_PRECISION: tl.constexpr, UPCAST_DOT: tl.constexpr, INT64: tl.constexpr,
    SC: tl.constexpr, W_KMAJOR: tl.constexpr,
    BLOCK_N: tl.constexpr, BLOCK_CO: tl.constexpr, CO_SUB: tl.constexpr, BLOCK_CI: tl.constexpr,
    PROBES: tl.constexpr = False,
):
    """x `[B, C_IN, L]`, y `[B, C_OUT, L]` contiguous; s a scratch of num_programs slots of
    `[BLOCK_N + 2 * HALO, SC]`; n_tiles = cdiv(n_total, BLOCK_N); persistent grid."""
    pid = tl.program_id(0)
    HALO_: tl.constexpr = 8 if KSIZE > 1 else 0
    ROWS: tl.constexpr = BLOCK_N + 2 * HALO_
    s_base = s_ptr + pid * (ROWS * SC)
    CO_GROUP: tl.constexpr = BLOCK_CO * CO_SUB
    N_GROUPS: tl.constexpr = (C_OUT + CO_GROUP - 1) // CO_GROUP
    N_CI: tl.constexpr = (C_IN + BLOCK_CI - 1) // BLOCK_CI
    for t in tl.range(pid, n_tiles, tl.num_programs(0), num_stages=1):
        n0 = t * BLOCK_N
        if PROBES:
            pl.enter_scope("stage_x")
        _stage(x_ptr, s_base, n0, HALO_, n_total, C_IN, L, SC, BLOCK_N, BLOCK_CI, INT64)
        if HALO_ > 0:
            _stage(x_ptr, s_base, n0 - HALO_, 0, n_total, C_IN, L, SC, HALO_, BLOCK_CI, INT64)
            _stage(x_ptr, s_base, n0 + BLOCK_N, HALO_ + BLOCK_N, n_total, C_IN, L, SC, HALO_, BLOCK_CI, INT64)
        tl.debug_barrier()   # the slot's rows are read by other threads of this CTA
        if PROBES:
            pl.exit_scope("stage_x")
        n = n0 + tl.arange(0, BLOCK_N)
        n_ok = n < n_total
        bb = n // L
        ll = n % L
        if INT64:
            bb = bb.to(tl.int64)
        y_row = bb * (C_OUT * L)
        for g in tl.static_range(N_GROUPS):
            co0 = g * CO_GROUP
            acc0 = tl.zeros((BLOCK_N, BLOCK_CO), dtype=tl.float32)
            acc1 = tl.zeros((BLOCK_N, BLOCK_CO), dtype=tl.float32)
            acc2 = tl.zeros((BLOCK_N, BLOCK_CO), dtype=tl.float32)
            acc3 = tl.zeros((BLOCK_N, BLOCK_CO), dtype=tl.float32)
            if N_CI <= 8:
                for c in tl.static_range(N_CI):
                    acc0, acc1, acc2, acc3 = _step(acc0, acc1, acc2, acc3, s_base, w_ptr, ll, c, co0, C_IN, C_OUT,
                                                   L, SC, PAD, KSIZE, HALO_, DOT_PRECISION, UPCAST_DOT,
                                                   W_KMAJOR, BLOCK_N, BLOCK_CO, BLOCK_CI, CO_SUB, PROBES)
            else:   # wide C_in: a loop, not hundreds of unrolled dots to compile
                for c in range(N_CI):
                    acc0, acc1, acc2, acc3 = _step(acc0, acc1, acc2, acc3, s_base, w_ptr, ll, c, co0, C_IN, C_OUT,
                                                   L, SC, PAD, KSIZE, HALO_, DOT_PRECISION, UPCAST_DOT,
                                                   W_KMAJOR, BLOCK_N, BLOCK_CO, BLOCK_CI, CO_SUB, PROBES)
            if PROBES:
                pl.enter_scope("epilogue")
            co = co0 + tl.arange(0, BLOCK_CO)
            _conv1d_store(acc0, b_ptr, y_ptr, y_row, ll, n_ok, co, C_OUT, L, HAS_BIAS)
            if CO_SUB > 1:
                _conv1d_store(acc1, b_ptr, y_ptr, y_row, ll, n_ok, co + BLOCK_CO, C_OUT, L, HAS_BIAS)
            if CO_SUB > 2:
                _conv1d_store(acc2, b_ptr, y_ptr, y_row, ll, n_ok, co + 2 * BLOCK_CO, C_OUT, L, HAS_BIAS)
            if CO_SUB > 3:
                _conv1d_store(acc3, b_ptr, y_ptr, y_row, ll, n_ok, co + 3 * BLOCK_CO, C_OUT, L, HAS_BIAS)
            if PROBES:
                pl.exit_scope("epilogue")
        tl.debug_barrier()   # every tap read before the next tile overwrites the slot


def fused_applies(c_in: int, l_in: int, ksize: int, stride: int, padding: int) -> bool:
    """Stride 1, L_out == L_in (K = 2 * padding + 1), the padding within the scratch halo."""
    return stride == 1 and ksize == 2 * padding + 1 and padding <= HALO and l_in >= 1 and c_in >= 1


def fit_fused_config(cfg: dict, c_in: int, c_out: int) -> dict:
    cfg = dict(cfg)
    bco = min(cfg["BLOCK_CO"], max(16, triton.next_power_of_2(c_out)))
    cfg["BLOCK_CO"] = bco
    cfg["CO_SUB"] = max(1, min(cfg["CO_SUB"], triton.cdiv(c_out, bco)))
    cfg["BLOCK_CI"] = min(cfg["BLOCK_CI"], max(16, triton.next_power_of_2(c_in)))
    return cfg


def launch(x: torch.Tensor, wp: torch.Tensor, b: torch.Tensor, y: torch.Tensor, meta: dict, cfg: dict,
           sm_count: int) -> None:
    """x `[B, C_in, L]` and y contiguous, wp packed (`[K, C_out, C_in]` when cfg["W_KMAJOR"]), `meta` as
    `kernel.launch_meta` builds it, cfg fitted (`fit_fused_config`)."""
    n_total = x.shape[0] * meta["L_OUT"]
    n_tiles = triton.cdiv(n_total, cfg["BLOCK_N"])
    grid = max(1, min(n_tiles, cfg["CTAS_PER_SM"] * sm_count))
    halo = HALO if meta["KSIZE"] > 1 else 0
    sc = triton.cdiv(meta["C_IN"], 8) * 8      # 16-byte rows in fp16
    scratch = torch.empty((grid, cfg["BLOCK_N"] + 2 * halo, sc), dtype=x.dtype, device=x.device)
    _conv1d_fused_kernel[(grid,)](
        x, wp, b, y, scratch, n_total, n_tiles, C_IN=meta["C_IN"], C_OUT=meta["C_OUT"], L=meta["L_IN"],
        PAD=meta["PAD"], KSIZE=meta["KSIZE"], HAS_BIAS=meta["HAS_BIAS"], DOT_PRECISION=meta["DOT_PRECISION"],
        UPCAST_DOT=meta["UPCAST_DOT"], INT64=meta["INT64"], SC=sc, W_KMAJOR=bool(cfg["W_KMAJOR"]),
        BLOCK_N=cfg["BLOCK_N"], BLOCK_CO=cfg["BLOCK_CO"], CO_SUB=cfg["CO_SUB"], BLOCK_CI=cfg["BLOCK_CI"],
        PROBES=meta.get("PROBES", False), num_warps=cfg["num_warps"], num_stages=1)
