"""conv1d on Hopper from channels-last x: the implicit GEMM with every operand read by the tensor-memory
accelerator (the "cl" path of `kernel.conv1d`, fp32's default).

    y[b, co, l] = bias[co] + sum_{ci, k} w[co, ci, k] * xt[b, l + k - padding, ci]      (stride 1)

Why channels-last: in x `[B, C_in, L]` the taps shifted by `k - padding` move along the contiguous axis,
so they can never be 16-byte aligned: the gather kernel reads them with 2-byte loads, and a TMA box cannot
start there either (the innermost box coordinate must be 16-byte aligned; an unaligned one is an illegal
instruction on Hopper: what killed this case study's first TMA attempt, see tile-ai/tilelang#2681; the
interpreter asserts it too). In xt `[B, L, C_in]` the shift moves whole rows, an outer dimension, where a
box may start anywhere and rows outside `[0, L)` are zero-filled by the hardware (the padding). Both dot
operands are then C_in-contiguous: the K-major layout TF32 wgmma requires, so fp32 tiles are no longer
transposed on their way to the tensor cores.

`to_channels_last` makes xt in one Triton pass (at copy speed on the H200: 87 us for the fp32 production
shape); `_conv1d_tma_kernel` then takes, per program, BLOCK_L positions of one example and CO_SUB
accumulators of BLOCK_CO channels, loops over (C_in chunk, tap) steps software-pipelined (STAGES), with
the weights by pointer loads or by TMA (W_TMA), y by pointer or TMA stores (TMA_STORE), and optionally a
persistent grid whose (tile, step) loop is one flat loop (PERSIST programs per SM), so the next tile's
boxes load while this tile finishes. Tiles do not cross examples: L = 200 computes 256 positions (28 %
of the MMAs on padding; the out-of-range box rows cost no memory traffic).

Measured on the H200 (results/case_studies/conv1d/): fp32 production 267 us end to end (transpose 87 +
kernel 174) against the gather kernel's 300; fp16 148 us at best against 126, so fp16 keeps the gather path.

Applies to stride 1, 16-byte C_in rows, 32-bit TMA coordinates (`tma_applies`).
Probe regions (PROBES=True): `load_x`, `load_w`, `mma`, `epilogue`.
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl

try:  # probes are compiled away unless PROBES=True; the interpreter lacks the semantic
    import triton.profiler.language as pl

    pl.enable_semantic("triton")
except Exception:  # pragma: no cover - depends on the triton build
    pl = None

# BLOCK_L, BLOCK_CO, CO_SUB, BLOCK_CI, STAGES, TMA_STORE, W_TMA, PERSIST, FLAT (and num_warps)
TMA_CONFIG_KEYS = ("BLOCK_L", "BLOCK_CO", "CO_SUB", "BLOCK_CI", "STAGES", "TMA_STORE", "W_TMA", "PERSIST", "FLAT")
TMA_TUNABLES = {
    "BLOCK_L": [64, 128, 256],
    "BLOCK_CO": [16, 32, 64],
    "CO_SUB": [1, 2, 3, 4],
    "BLOCK_CI": [16, 32, 64],
    "STAGES": [1, 2, 3, 4],
    "TMA_STORE": [0, 1],
    "W_TMA": [0, 1],
    "PERSIST": [0, 1, 2, 3, 4],
    "FLAT": [0, 1],
    "NUM_WARPS": [4, 8],
}
TMA_DEFAULT = {"BLOCK_L": 128, "BLOCK_CO": 32, "CO_SUB": 4, "BLOCK_CI": 32, "STAGES": 3, "TMA_STORE": 0,
               "W_TMA": 0, "PERSIST": 0, "FLAT": 0, "num_warps": 4}


@triton.jit
def _w_tile(w_ptr, k, ci, cj, C_IN: tl.constexpr, C_OUT: tl.constexpr, W_KMAJOR: tl.constexpr,
            MASK_CO: tl.constexpr, MASK_CI: tl.constexpr):
    """Tap k's weights for channels ci x cj as `[BLOCK_CI, BLOCK_CO]`; packed `[K, C_in, C_out]`, or
    `[K, C_out, C_in]` (W_KMAJOR: C_in-contiguous, the K-major B operand TF32 wgmma wants). Channels past
    C_in are masked: the x box reads zeros there, but 0 * (whatever lies past the weights) may be NaN."""
    if W_KMAJOR:
        ptrs = w_ptr + (k * C_OUT + cj)[None, :] * C_IN + ci[:, None]
    else:
        ptrs = w_ptr + (k * C_IN + ci)[:, None] * C_OUT + cj[None, :]
    if MASK_CO or MASK_CI:
        w = tl.load(ptrs, mask=(cj < C_OUT)[None, :] & (ci < C_IN)[:, None], other=0.0)
    else:
        w = tl.load(ptrs)
    return w


@triton.jit
def _w_desc_tile(w_desc, k, c, c0, C_IN: tl.constexpr, C_OUT: tl.constexpr, W_KMAJOR: tl.constexpr,
                 BLOCK_CI: tl.constexpr):
    """`_w_tile` by TMA. K-major rows past C_out read the next tap's weights: they only reach output
    channels past C_out, which are never stored; boxes past the tensor read zeros."""
    if W_KMAJOR:
        w = tl.trans(w_desc.load([k * C_OUT + c0, c * BLOCK_CI]))
    else:
        w = w_desc.load([k * C_IN + c * BLOCK_CI, c0])
    return w


@triton.jit
def _to_channels_last(x_ptr, xt_ptr, C: tl.constexpr, L: tl.constexpr, BLOCK_C: tl.constexpr,
                      BLOCK_L: tl.constexpr):
    """xt[b, l, c] = x[b, c, l]: read L-contiguous, write C-contiguous (the transpose goes through shared
    memory in Triton's layout conversion)."""
    pid_l = tl.program_id(0)
    pid_c = tl.program_id(1)
    b = tl.program_id(2).to(tl.int64)
    c = pid_c * BLOCK_C + tl.arange(0, BLOCK_C)
    ll = pid_l * BLOCK_L + tl.arange(0, BLOCK_L)
    m = (c < C)[:, None] & (ll < L)[None, :]
    v = tl.load(x_ptr + b * (C * L) + c[:, None] * L + ll[None, :], mask=m)
    tl.store(xt_ptr + b * (C * L) + ll[None, :] * C + c[:, None], v, mask=m)


def to_channels_last(x: torch.Tensor, block_c: int = 32, block_l: int = 128) -> torch.Tensor:
    """`[B, C, L]` contiguous -> `[B, L, C]` contiguous (one Triton pass)."""
    bsz, c, length = x.shape
    xt = torch.empty((bsz, length, c), dtype=x.dtype, device=x.device)
    _to_channels_last[(triton.cdiv(length, block_l), triton.cdiv(c, block_c), bsz)](
        x, xt, C=c, L=length, BLOCK_C=block_c, BLOCK_L=block_l, num_warps=4)
    return xt


@triton.jit
def _store(acc, b_ptr, y_ptr, y_desc, y_row, b, l0, c0,
           C_OUT: tl.constexpr, L_OUT: tl.constexpr, HAS_BIAS: tl.constexpr, TMA_STORE: tl.constexpr,
           BLOCK_L: tl.constexpr, BLOCK_CO: tl.constexpr):
    ll = l0 + tl.arange(0, BLOCK_L)
    co = c0 + tl.arange(0, BLOCK_CO)
    co_ok = co < C_OUT
    if HAS_BIAS:
        acc += tl.load(b_ptr + co, mask=co_ok, other=0.0).to(tl.float32)[None, :]
    out = acc.to(y_ptr.dtype.element_ty)
    if TMA_STORE:  # box [BLOCK_CO, BLOCK_L]; columns past L_OUT are clipped by the hardware
        y_desc.store([b * C_OUT + c0, l0], tl.trans(out))
    else:
        tl.store(y_ptr + y_row + co[None, :] * L_OUT + ll[:, None], out,
                 mask=(ll < L_OUT)[:, None] & co_ok[None, :])


@triton.jit
def _store_flat(acc, b_ptr, y_ptr, n0, c0, N_TOTAL, C_OUT: tl.constexpr, L_OUT: tl.constexpr,
                HAS_BIAS: tl.constexpr, INT64: tl.constexpr, BLOCK_L: tl.constexpr, BLOCK_CO: tl.constexpr):
    """FLAT tiles: BLOCK_L flattened positions, which may span two examples, stored by pointer."""
    n = n0 + tl.arange(0, BLOCK_L)
    co = c0 + tl.arange(0, BLOCK_CO)
    co_ok = co < C_OUT
    if HAS_BIAS:
        acc += tl.load(b_ptr + co, mask=co_ok, other=0.0).to(tl.float32)[None, :]
    bb = n // L_OUT
    if INT64:
        bb = bb.to(tl.int64)
    tl.store(y_ptr + bb[:, None] * (C_OUT * L_OUT) + co[None, :] * L_OUT + (n % L_OUT)[:, None],
             acc.to(y_ptr.dtype.element_ty), mask=(n < N_TOTAL)[:, None] & co_ok[None, :])


@triton.jit
def _operands(x_desc, w_desc, w_ptr, b, l0, co0, c, k, C_IN: tl.constexpr, C_OUT: tl.constexpr,
              PAD: tl.constexpr, UPCAST_DOT: tl.constexpr, W_KMAJOR: tl.constexpr, W_TMA: tl.constexpr,
              MASK_CO: tl.constexpr, MASK_CI: tl.constexpr, BLOCK_L: tl.constexpr, BLOCK_CO: tl.constexpr,
              CO_SUB: tl.constexpr, BLOCK_CI: tl.constexpr, PROBES: tl.constexpr,
              FLAT: tl.constexpr = 0, L_IN: tl.constexpr = 1):
    """Step (c, k): the x box `[BLOCK_L, BLOCK_CI]` at rows l0 + k - pad (zeros outside [0, L)) and the
    CO_SUB weight tiles `[BLOCK_CI, BLOCK_CO]` (the unused slots repeat the first; never read).
    FLAT: l0 is a flattened position b * L + l; rows whose shifted position leaves its own example (they
    hold the neighbouring example's edge) are zeroed in registers: the padding."""
    if PROBES:
        pl.enter_scope("load_x")
    if FLAT:
        a = x_desc.load([l0 + k - PAD, c * BLOCK_CI])
        p = (l0 + tl.arange(0, BLOCK_L)) % L_IN + (k - PAD)
        a = tl.where(((p >= 0) & (p < L_IN))[:, None], a, tl.zeros_like(a))
    else:
        a = x_desc.load([b, l0 + k - PAD, c * BLOCK_CI]).reshape(BLOCK_L, BLOCK_CI)
    if UPCAST_DOT:  # Triton 3.6's interpreter computes bf16 dots wrongly; bf16 -> fp32 is exact
        a = a.to(tl.float32)
    if PROBES:
        pl.exit_scope("load_x")
        pl.enter_scope("load_w")
    if W_TMA:
        w0 = _w_desc_tile(w_desc, k, c, co0, C_IN, C_OUT, W_KMAJOR, BLOCK_CI)
    else:
        ci = c * BLOCK_CI + tl.arange(0, BLOCK_CI)
        cj = co0 + tl.arange(0, BLOCK_CO)
        w0 = _w_tile(w_ptr, k, ci, cj, C_IN, C_OUT, W_KMAJOR, MASK_CO, MASK_CI)
    w1 = w0
    w2 = w0
    w3 = w0
    if CO_SUB > 1:
        if W_TMA:
            w1 = _w_desc_tile(w_desc, k, c, co0 + BLOCK_CO, C_IN, C_OUT, W_KMAJOR, BLOCK_CI)
        else:
            w1 = _w_tile(w_ptr, k, ci, cj + BLOCK_CO, C_IN, C_OUT, W_KMAJOR, MASK_CO, MASK_CI)
    if CO_SUB > 2:
        if W_TMA:
            w2 = _w_desc_tile(w_desc, k, c, co0 + 2 * BLOCK_CO, C_IN, C_OUT, W_KMAJOR, BLOCK_CI)
        else:
            w2 = _w_tile(w_ptr, k, ci, cj + 2 * BLOCK_CO, C_IN, C_OUT, W_KMAJOR, MASK_CO, MASK_CI)
    if CO_SUB > 3:
        if W_TMA:
            w3 = _w_desc_tile(w_desc, k, c, co0 + 3 * BLOCK_CO, C_IN, C_OUT, W_KMAJOR, BLOCK_CI)
        else:
            w3 = _w_tile(w_ptr, k, ci, cj + 3 * BLOCK_CO, C_IN, C_OUT, W_KMAJOR, MASK_CO, MASK_CI)
    if UPCAST_DOT:
        w0 = w0.to(tl.float32)
        w1 = w1.to(tl.float32)
        w2 = w2.to(tl.float32)
        w3 = w3.to(tl.float32)
    if PROBES:
        pl.exit_scope("load_w")
    return a, w0, w1, w2, w3


@triton.jit
def _epilogue(acc0, acc1, acc2, acc3, b_ptr, y_ptr, y_desc, b, l0, co0,
              C_OUT: tl.constexpr, L_OUT: tl.constexpr, HAS_BIAS: tl.constexpr, INT64: tl.constexpr,
              TMA_STORE: tl.constexpr, BLOCK_L: tl.constexpr, BLOCK_CO: tl.constexpr, CO_SUB: tl.constexpr,
              PROBES: tl.constexpr, FLAT: tl.constexpr = 0, N_TOTAL=0):
    if PROBES:
        pl.enter_scope("epilogue")
    if FLAT:   # l0 is the flattened position of the tile's first row
        _store_flat(acc0, b_ptr, y_ptr, l0, co0, N_TOTAL, C_OUT, L_OUT, HAS_BIAS, INT64, BLOCK_L, BLOCK_CO)
        if CO_SUB > 1:
            _store_flat(acc1, b_ptr, y_ptr, l0, co0 + BLOCK_CO, N_TOTAL, C_OUT, L_OUT, HAS_BIAS, INT64, BLOCK_L,
                        BLOCK_CO)
        if CO_SUB > 2:
            _store_flat(acc2, b_ptr, y_ptr, l0, co0 + 2 * BLOCK_CO, N_TOTAL, C_OUT, L_OUT, HAS_BIAS, INT64,
                        BLOCK_L, BLOCK_CO)
        if CO_SUB > 3:
            _store_flat(acc3, b_ptr, y_ptr, l0, co0 + 3 * BLOCK_CO, N_TOTAL, C_OUT, L_OUT, HAS_BIAS, INT64,
                        BLOCK_L, BLOCK_CO)
    else:
        bb = b
        if INT64:
            bb = bb.to(tl.int64)
        y_row = bb * (C_OUT * L_OUT)
        _store(acc0, b_ptr, y_ptr, y_desc, y_row, b, l0, co0, C_OUT, L_OUT, HAS_BIAS, TMA_STORE, BLOCK_L,
               BLOCK_CO)
        if CO_SUB > 1:
            _store(acc1, b_ptr, y_ptr, y_desc, y_row, b, l0, co0 + BLOCK_CO, C_OUT, L_OUT, HAS_BIAS, TMA_STORE,
                   BLOCK_L, BLOCK_CO)
        if CO_SUB > 2:
            _store(acc2, b_ptr, y_ptr, y_desc, y_row, b, l0, co0 + 2 * BLOCK_CO, C_OUT, L_OUT, HAS_BIAS,
                   TMA_STORE, BLOCK_L, BLOCK_CO)
        if CO_SUB > 3:
            _store(acc3, b_ptr, y_ptr, y_desc, y_row, b, l0, co0 + 3 * BLOCK_CO, C_OUT, L_OUT, HAS_BIAS,
                   TMA_STORE, BLOCK_L, BLOCK_CO)
    if PROBES:
        pl.exit_scope("epilogue")


@triton.jit
def _tile_origin(rest, n_lt, BLOCK_L: tl.constexpr, FLAT: tl.constexpr):
    """(first position, example) of position tile `rest`: flattened (FLAT) or per example."""
    if FLAT:
        l0 = rest * BLOCK_L
        b = rest * 0
    else:
        l0 = (rest % n_lt) * BLOCK_L
        b = rest // n_lt
    return l0, b


@triton.jit
def _conv1d_tma_kernel(
    x_ptr, w_ptr, b_ptr, y_ptr, B,
    C_IN: tl.constexpr, C_OUT: tl.constexpr, L_IN: tl.constexpr, L_OUT: tl.constexpr,
    PAD: tl.constexpr, KSIZE: tl.constexpr, HAS_BIAS: tl.constexpr,
    DOT_PRECISION: tl.constexpr, UPCAST_DOT: tl.constexpr, INT64: tl.constexpr,
    W_KMAJOR: tl.constexpr, W_TMA: tl.constexpr,
    BLOCK_L: tl.constexpr, BLOCK_CO: tl.constexpr, CO_SUB: tl.constexpr, BLOCK_CI: tl.constexpr,
    STAGES: tl.constexpr, TMA_STORE: tl.constexpr, PERSIST: tl.constexpr,
    PROBES: tl.constexpr = False, FLAT: tl.constexpr = 0,
):
    """x channels-last `[B, L_IN, C_IN]`, y `[B, C_OUT, L_OUT]`, both contiguous; w packed (see `_w_tile`).
    Tiles: C_out groups x L tiles x B, C_out groups fastest (programs sharing x run together). PERSIST = 0:
    one tile per program; otherwise a persistent grid whose (tile, step) loop is one flat loop, so the
    pipeliner prefetches the next tile's boxes during this tile's last steps and its epilogue.
    FLAT = 1 (L_OUT == L_IN): tiles over the flattened positions B * L instead of per example, so L = 200
    wastes no MMA rows on padding positions (x as `[B * L_IN, C_IN]`; `_operands` zeroes the rows a tap
    shifts across an example's edge; `_store_flat`). Measured a wash, so off (H200, fp32 production shape,
    kernel alone, graph, 3 rounds: three 32-wide accumulators 179.1 us against the autotuner's pick
    180.9; with the pick's 128-wide accumulator 267.1; results/case_studies/conv1d/flat/flat.json): the
    masked A operand goes through registers, which costs what the padding rows saved."""
    pid = tl.program_id(0)
    CO_GROUP: tl.constexpr = BLOCK_CO * CO_SUB
    N_GROUPS: tl.constexpr = (C_OUT + CO_GROUP - 1) // CO_GROUP
    if FLAT:
        n_total = B * L_OUT
        n_lt = tl.cdiv(n_total, BLOCK_L)       # tiles along the flattened positions (run time: B is)
    else:
        n_total = 0
        n_lt = (L_OUT + BLOCK_L - 1) // BLOCK_L
    MASK_CO: tl.constexpr = C_OUT % CO_GROUP != 0
    MASK_CI: tl.constexpr = C_IN % BLOCK_CI != 0
    N_CI: tl.constexpr = (C_IN + BLOCK_CI - 1) // BLOCK_CI
    STEPS: tl.constexpr = N_CI * KSIZE

    if FLAT:
        x_desc = tl.make_tensor_descriptor(x_ptr, shape=[B * L_IN, C_IN], strides=[C_IN, 1],
                                           block_shape=[BLOCK_L, BLOCK_CI])
    else:
        x_desc = tl.make_tensor_descriptor(x_ptr, shape=[B, L_IN, C_IN], strides=[L_IN * C_IN, C_IN, 1],
                                           block_shape=[1, BLOCK_L, BLOCK_CI])
    if W_TMA:   # the weights by TMA too
        if W_KMAJOR:
            w_desc = tl.make_tensor_descriptor(w_ptr, shape=[KSIZE * C_OUT, C_IN], strides=[C_IN, 1],
                                               block_shape=[BLOCK_CO, BLOCK_CI])
        else:
            w_desc = tl.make_tensor_descriptor(w_ptr, shape=[KSIZE * C_IN, C_OUT], strides=[C_OUT, 1],
                                               block_shape=[BLOCK_CI, BLOCK_CO])
    else:
        w_desc = x_desc   # unused
    if TMA_STORE:
        y_desc = tl.make_tensor_descriptor(y_ptr, shape=[B * C_OUT, L_OUT], strides=[L_OUT, 1],
                                           block_shape=[BLOCK_CO, BLOCK_L])
    else:
        y_desc = x_desc   # unused

    acc0 = tl.zeros((BLOCK_L, BLOCK_CO), dtype=tl.float32)
    acc1 = tl.zeros((BLOCK_L, BLOCK_CO), dtype=tl.float32)
    acc2 = tl.zeros((BLOCK_L, BLOCK_CO), dtype=tl.float32)
    acc3 = tl.zeros((BLOCK_L, BLOCK_CO), dtype=tl.float32)
    if PERSIST:
        n_progs = tl.num_programs(0)
        n_tiles = N_GROUPS * n_lt if FLAT else N_GROUPS * n_lt * B
        my_steps = tl.cdiv(n_tiles - pid, n_progs) * STEPS
        for it in tl.range(0, my_steps, num_stages=STAGES):
            tile = pid + (it // STEPS) * n_progs
            s = it % STEPS
            co0 = (tile % N_GROUPS) * CO_GROUP
            l0, b = _tile_origin(tile // N_GROUPS, n_lt, BLOCK_L, FLAT)
            a, w0, w1, w2, w3 = _operands(x_desc, w_desc, w_ptr, b, l0, co0, s // KSIZE, s % KSIZE, C_IN,
                                          C_OUT, PAD, UPCAST_DOT, W_KMAJOR, W_TMA, MASK_CO, MASK_CI, BLOCK_L,
                                          BLOCK_CO, CO_SUB, BLOCK_CI, PROBES, FLAT, L_IN)
            acc0, acc1, acc2, acc3 = _mma4(acc0, acc1, acc2, acc3, a, w0, w1, w2, w3, CO_SUB, DOT_PRECISION,
                                           PROBES)
            if s == STEPS - 1:
                _epilogue(acc0, acc1, acc2, acc3, b_ptr, y_ptr, y_desc, b, l0, co0, C_OUT, L_OUT, HAS_BIAS,
                          INT64, TMA_STORE, BLOCK_L, BLOCK_CO, CO_SUB, PROBES, FLAT, n_total)
                acc0 = tl.zeros((BLOCK_L, BLOCK_CO), dtype=tl.float32)
                acc1 = tl.zeros((BLOCK_L, BLOCK_CO), dtype=tl.float32)
                acc2 = tl.zeros((BLOCK_L, BLOCK_CO), dtype=tl.float32)
                acc3 = tl.zeros((BLOCK_L, BLOCK_CO), dtype=tl.float32)
    else:
        co0 = (pid % N_GROUPS) * CO_GROUP
        l0, b = _tile_origin(pid // N_GROUPS, n_lt, BLOCK_L, FLAT)
        for s in tl.range(STEPS, num_stages=STAGES):
            a, w0, w1, w2, w3 = _operands(x_desc, w_desc, w_ptr, b, l0, co0, s // KSIZE, s % KSIZE, C_IN,
                                          C_OUT, PAD, UPCAST_DOT, W_KMAJOR, W_TMA, MASK_CO, MASK_CI, BLOCK_L,
                                          BLOCK_CO, CO_SUB, BLOCK_CI, PROBES, FLAT, L_IN)
            acc0, acc1, acc2, acc3 = _mma4(acc0, acc1, acc2, acc3, a, w0, w1, w2, w3, CO_SUB, DOT_PRECISION,
                                           PROBES)
        _epilogue(acc0, acc1, acc2, acc3, b_ptr, y_ptr, y_desc, b, l0, co0, C_OUT, L_OUT, HAS_BIAS, INT64,
                  TMA_STORE, BLOCK_L, BLOCK_CO, CO_SUB, PROBES, FLAT, n_total)


@triton.jit
def _mma4(acc0, acc1, acc2, acc3, a, w0, w1, w2, w3, CO_SUB: tl.constexpr, DOT_PRECISION: tl.constexpr,
          PROBES: tl.constexpr):
    if PROBES:
        pl.enter_scope("mma")
    acc0 = tl.dot(a, w0, acc0, input_precision=DOT_PRECISION)
    if CO_SUB > 1:
        acc1 = tl.dot(a, w1, acc1, input_precision=DOT_PRECISION)
    if CO_SUB > 2:
        acc2 = tl.dot(a, w2, acc2, input_precision=DOT_PRECISION)
    if CO_SUB > 3:
        acc3 = tl.dot(a, w3, acc3, input_precision=DOT_PRECISION)
    if PROBES:
        pl.exit_scope("mma")
    return acc0, acc1, acc2, acc3


def ensure_allocator() -> None:
    """In-kernel descriptors live in a small global scratch buffer that Triton asks an allocator for at
    launch: PyTorch's caching allocator (graph-capture safe) unless the user installed one."""
    from triton.runtime import _allocation

    if isinstance(_allocation._allocator.get(), _allocation.NullAllocator):
        triton.set_allocator(lambda size, align, stream: torch.empty(size, dtype=torch.int8,
                                                                     device="cuda" if torch.cuda.is_available()
                                                                     else "cpu"))


def fit_tma_config(cfg: dict, c_in: int, c_out: int) -> dict:
    """The config's C_out side shrunk to the problem (no accumulators past C_out), the C_in step to one
    that divides C_in (largest of 64/32/16 not above the config's)."""
    cfg = dict(cfg)
    bco = min(cfg["BLOCK_CO"], max(16, triton.next_power_of_2(c_out)))
    cfg["BLOCK_CO"] = bco
    cfg["CO_SUB"] = max(1, min(cfg["CO_SUB"], triton.cdiv(c_out, bco)))
    steps = [s for s in (64, 32, 16) if s <= cfg["BLOCK_CI"] and c_in % s == 0]
    cfg["BLOCK_CI"] = steps[0] if steps else cfg["BLOCK_CI"]
    return cfg


def tma_applies(bsz: int, c_in: int, l_in: int, c_out: int, ksize: int, stride: int, padding: int,
                elem: int, cfg: dict, w_kmajor: bool) -> bool:
    """Whether the TMA kernel computes this problem from channels-last x: stride 1, 16-byte rows of x
    (and of the weights, of y, for W_TMA / TMA_STORE), 32-bit coordinates."""
    l_out = l_in + 2 * padding - ksize + 1
    if stride != 1 or l_out <= 0 or bsz * max(l_in, c_out) >= 2**31 or (c_in * elem) % 16:
        return False
    if cfg.get("FLAT") and (l_out != l_in or cfg.get("TMA_STORE")):   # a constant row shift; pointer stores
        return False
    if cfg.get("W_TMA") and (c_in % cfg["BLOCK_CI"] or (not w_kmajor and (c_out * elem) % 16)):
        return False
    return not cfg.get("TMA_STORE") or ((l_out * elem) % 16 == 0 and c_out % cfg["BLOCK_CO"] == 0)


def n_tiles(bsz: int, meta: dict, kw: dict) -> int:
    """Output tiles: C_out groups x (flattened position tiles, or position tiles per example)."""
    groups = triton.cdiv(meta["C_OUT"], kw["BLOCK_CO"] * kw["CO_SUB"])
    if kw.get("FLAT"):
        return groups * triton.cdiv(bsz * meta["L_OUT"], kw["BLOCK_L"])
    return groups * triton.cdiv(meta["L_OUT"], kw["BLOCK_L"]) * bsz


def launch(x: torch.Tensor, wp: torch.Tensor, b: torch.Tensor, y: torch.Tensor, meta: dict, cfg: dict,
           w_kmajor: bool = False, sm_count: int = 132) -> None:
    """Launch on prepared operands: x channels-last `[B, L, C_in]` contiguous, wp packed (`[K, C_out,
    C_in]` when w_kmajor), y `[B, C_out, L_out]` contiguous; `meta` as `kernel.launch_meta` builds it."""
    ensure_allocator()
    kw = {k: cfg.get(k, TMA_DEFAULT[k]) for k in TMA_CONFIG_KEYS}
    tiles = n_tiles(x.shape[0], meta, kw)
    grid = min(tiles, kw["PERSIST"] * sm_count) if kw["PERSIST"] else tiles
    _conv1d_tma_kernel[(grid,)](
        x, wp, b, y, x.shape[0], C_IN=meta["C_IN"], C_OUT=meta["C_OUT"], L_IN=meta["L_IN"],
        L_OUT=meta["L_OUT"], PAD=meta["PAD"], KSIZE=meta["KSIZE"], HAS_BIAS=meta["HAS_BIAS"],
        DOT_PRECISION=meta["DOT_PRECISION"], UPCAST_DOT=meta["UPCAST_DOT"], INT64=meta["INT64"],
        W_KMAJOR=w_kmajor, PROBES=meta.get("PROBES", False), **kw,
        num_warps=cfg["num_warps"], num_stages=1)


# The channels-last path's autotune list (x transposed by `to_channels_last`, then this kernel), as data:
# BLOCK_L, BLOCK_CO, CO_SUB, BLOCK_CI, STAGES, TMA_STORE, W_TMA, PERSIST, FLAT, num_warps.
# H200, fp32 production shape, kernel alone (results/case_studies/conv1d/gpu_run6_sweep2.json): the first
# row 187 us, 128-wide accumulators 187-248, weights by TMA 200; the persistent rows were not measured
# before this list went into the benchmark's autotuner.
CL_AUTOTUNE_SPACE = [   # ... PERSIST, FLAT, num_warps
    (128, 32, 4, 32, 3, 0, 0, 0, 0, 4),
    (128, 32, 4, 32, 3, 0, 0, 2, 0, 4),
    (128, 32, 4, 32, 2, 0, 0, 3, 0, 4),
    (128, 128, 1, 32, 3, 0, 1, 1, 0, 4),
]
AUTOTUNE_WARMUP_MS = 5
AUTOTUNE_REP_MS = 20


def cl_configs() -> list[triton.Config]:
    return [triton.Config(dict(zip(TMA_CONFIG_KEYS, row[:-1])), num_warps=row[-1], num_stages=1)
            for row in CL_AUTOTUNE_SPACE]


def _prune(configs: list[triton.Config], named_args: dict, **kwargs) -> list[triton.Config]:
    """Fit each config to the problem (`fit_tma_config`); drop the ones it does not apply to and repeats."""
    args = {**named_args, **kwargs}
    elem = args["x_ptr"].element_size()
    out, seen = [], set()
    for c in configs:
        kw = fit_tma_config(c.kwargs, args["C_IN"], args["C_OUT"])
        ok = tma_applies(1, args["C_IN"], args["L_IN"], args["C_OUT"], args["KSIZE"], 1, args["PAD"], elem,
                         kw, args["W_KMAJOR"])
        key = (tuple(sorted(kw.items())), c.num_warps)
        if ok and key not in seen:
            seen.add(key)
            out.append(triton.Config(kw, num_warps=c.num_warps, num_stages=1))
    return out or [triton.Config(fit_tma_config(dict(zip(TMA_CONFIG_KEYS, CL_AUTOTUNE_SPACE[0][:-1])),
                                                args["C_IN"], args["C_OUT"]), num_warps=4, num_stages=1)]


def _autotune_bench(fn, quantiles):
    return triton.testing.do_bench(fn, warmup=AUTOTUNE_WARMUP_MS, rep=AUTOTUNE_REP_MS, quantiles=quantiles)


_conv1d_tma_autotuned = triton.autotune(
    configs=cl_configs(), key=["C_IN", "C_OUT", "L_IN", "L_OUT", "KSIZE", "W_KMAJOR"], do_bench=_autotune_bench,
    prune_configs_by={"early_config_prune": _prune},
)(_conv1d_tma_kernel)


def cl_applies(bsz: int, c_in: int, l_in: int, c_out: int, ksize: int, stride: int, padding: int,
               elem: int) -> bool:
    """Whether the channels-last path computes this problem with its first (pointer-weight) config."""
    return tma_applies(bsz, c_in, l_in, c_out, ksize, stride, padding, elem, TMA_DEFAULT, elem == 4)


def conv1d_cl(x: torch.Tensor, wp: torch.Tensor, b: torch.Tensor, y: torch.Tensor, meta: dict,
              config: dict | None, w_kmajor: bool, sm_count: int, autotune: bool) -> None:
    """x `[B, C_in, L]` contiguous -> channels-last (one Triton pass) -> the TMA kernel, autotuned over
    `CL_AUTOTUNE_SPACE` when `autotune`, else `config` over `TMA_DEFAULT`."""
    xt = to_channels_last(x)
    if autotune and x.is_cuda and not meta.get("PROBES"):
        ensure_allocator()
        bsz = x.shape[0]

        def grid(m: dict) -> tuple[int]:
            tiles = n_tiles(bsz, meta, m)
            return (min(tiles, m["PERSIST"] * sm_count) if m["PERSIST"] else tiles,)

        kmeta = {k: v for k, v in meta.items() if k != "STRIDE"}
        _conv1d_tma_autotuned[grid](xt, wp, b, y, bsz, W_KMAJOR=w_kmajor, **kmeta)
        return
    cfg = fit_tma_config(dict(TMA_DEFAULT, **(config or {})), meta["C_IN"], meta["C_OUT"])
    if cfg["FLAT"] and (meta["L_OUT"] != meta["L_IN"] or cfg["TMA_STORE"]):
        cfg["FLAT"] = 0       # flattened tiles need a constant row shift and pointer stores: per-example tiles
    if not tma_applies(x.shape[0], meta["C_IN"], meta["L_IN"], meta["C_OUT"], meta["KSIZE"], 1, meta["PAD"],
                       x.element_size(), cfg, w_kmajor):
        # a pinned config whose weight or store boxes this problem cannot take (rows not a multiple of 16
        # bytes: C_out 5 in fp16). The H200 computed garbage there without a word (max error 4.9,
        # results/case_studies/gpu_fuzz/seed0_24b3bb2.json); the interpreter asserts. Pointer loads and stores instead.
        cfg.update(W_TMA=0, TMA_STORE=0)
    launch(xt, wp, b, y, {k: v for k, v in meta.items() if k != "STRIDE"}, cfg, w_kmajor, sm_count)


def best_config() -> dict[str, dict]:
    return {f"channels_last {k}": {**c.kwargs, "num_warps": c.num_warps}
            for k, c in _conv1d_tma_autotuned.cache.items()}
