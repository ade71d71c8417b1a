"""conv1d on Hopper: the implicit GEMM of `kernel.py` with its x taps read by the tensor-memory accelerator.

    y[b, co, l] = bias[co] + sum_{ci, k} w[co, ci, k] * x[b, ci, l + k - padding]      (stride 1)

Why: in the pointer kernel (`kernel.py`) the unshifted tap is a 16-byte vector load but the taps shifted by
`k - padding` cannot be 16-byte aligned and stay 2-byte loads; at the production shape each shifted tap
cost about 30-55 us of the 127 us (K = 1 ran 60 us, K = 5 185 us). A TMA box may start at any element
(only the base and the row stride must be 16-byte aligned, L = 200 fp16 rows are 400 bytes) and the
hardware zero-fills what falls outside the tensor, which is exactly the convolution's zero padding. So
every tap is one asynchronous box copy into shared memory, software-pipelined over the (C_in chunk, tap)
steps, and the dot reads it from there.

A program owns BLOCK_L output positions of one example (x viewed as `[B * C_in, L]`, the box `[BLOCK_CI,
BLOCK_L]` at row `b * C_in + ci0`, column `l0 + k - padding`) and all C_out channels as CO_SUB
accumulators of BLOCK_CO (3 x 32 for 96: `tl.dot` wants powers of two). Tiles do not cross examples, so
L = 200 computes 256 positions with BLOCK_L 64/128/256 (28 % of the MMAs wasted; the tensor cores are far
from busy, the out-of-range box columns cost no memory traffic).

`X_CL`: x already channels-last `[B, L, C_in]` (3-D descriptor, box `[1, BLOCK_L, BLOCK_CI]`): the A
operand is then C_in-contiguous, the K-major layout TF32 wgmma requires (a position-contiguous fp32 tile
is transposed on its way to the tensor cores).

Applies to stride 1, contiguous x with 16-byte aligned rows, C_in a multiple of the C_in step (a box must
not reach into the next example's channels) and B * C_in < 2^31 (TMA coordinates are 32-bit);
`kernel.conv1d` takes the pointer kernel everywhere else.
"""
from __future__ import annotations

import os

import torch
import triton
import triton.language as tl

try:  # probes are compiled away unless PROBES=True; the interpreter lacks the semantic
    import triton.profiler.language as pl

    pl.enable_semantic("triton")
except Exception:  # pragma: no cover - depends on the triton build
    pl = None

# BLOCK_L, BLOCK_CO, CO_SUB, BLOCK_CI, STAGES, TMA_STORE, num_warps
TMA_CONFIG_KEYS = ("BLOCK_L", "BLOCK_CO", "CO_SUB", "BLOCK_CI", "STAGES", "TMA_STORE", "W_TMA")
TMA_TUNABLES = {
    "BLOCK_L": [64, 128, 256],
    "BLOCK_CO": [16, 32, 64],
    "CO_SUB": [1, 2, 3, 4],
    "BLOCK_CI": [16, 32, 64],
    "STAGES": [1, 2, 3, 4],
    "TMA_STORE": [0, 1],
    "W_TMA": [0, 1],
    "NUM_WARPS": [4, 8],
}
TMA_DEFAULT = {"BLOCK_L": 128, "BLOCK_CO": 32, "CO_SUB": 4, "BLOCK_CI": 32, "STAGES": 3, "TMA_STORE": 0,
               "W_TMA": 0, "num_warps": 4}


@triton.jit
def _w_tile(w_ptr, k, ci, cj, C_IN: tl.constexpr, C_OUT: tl.constexpr, W_KMAJOR: tl.constexpr,
            MASK_CO: tl.constexpr):
    """Tap k's weights for channels ci x cj as `[BLOCK_CI, BLOCK_CO]`; packed `[K, C_in, C_out]`, or
    `[K, C_out, C_in]` (W_KMAJOR: C_in-contiguous, the K-major B operand TF32 wgmma wants)."""
    if W_KMAJOR:
        ptrs = w_ptr + (k * C_OUT + cj)[None, :] * C_IN + ci[:, None]
    else:
        ptrs = w_ptr + (k * C_IN + ci)[:, None] * C_OUT + cj[None, :]
    if MASK_CO:
        w = tl.load(ptrs, mask=(cj < C_OUT)[None, :], other=0.0)
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
def _conv1d_tma_kernel(
    x_ptr, w_ptr, b_ptr, y_ptr, B,
    C_IN: tl.constexpr, C_OUT: tl.constexpr, L_IN: tl.constexpr, L_OUT: tl.constexpr,
    PAD: tl.constexpr, KSIZE: tl.constexpr, HAS_BIAS: tl.constexpr,
    DOT_PRECISION: tl.constexpr, UPCAST_DOT: tl.constexpr, INT64: tl.constexpr,
    W_KMAJOR: tl.constexpr, W_TMA: tl.constexpr,
    BLOCK_L: tl.constexpr, BLOCK_CO: tl.constexpr, CO_SUB: tl.constexpr, BLOCK_CI: tl.constexpr,
    STAGES: tl.constexpr, TMA_STORE: tl.constexpr,
    PROBES: tl.constexpr = False,
):
    """x `[B, C_IN, L_IN]` (X_CL: `[B, L_IN, C_IN]`) and y `[B, C_OUT, L_OUT]` contiguous; w packed (see
    `_w_tile`); grid = C_out groups x L tiles x B, C_out groups fastest (programs sharing x run together)."""
    pid = tl.program_id(0)
    CO_GROUP: tl.constexpr = BLOCK_CO * CO_SUB
    N_GROUPS: tl.constexpr = (C_OUT + CO_GROUP - 1) // CO_GROUP
    N_LT: tl.constexpr = (L_OUT + BLOCK_L - 1) // BLOCK_L
    pid_g = pid % N_GROUPS
    rest = pid // N_GROUPS
    l0 = (rest % N_LT) * BLOCK_L
    b = rest // N_LT
    co0 = pid_g * CO_GROUP

    x_desc = tl.make_tensor_descriptor(x_ptr, shape=[B, L_IN, C_IN], strides=[L_IN * C_IN, C_IN, 1],
                                       block_shape=[1, BLOCK_L, BLOCK_CI])
    if W_TMA:   # the weights by TMA too: every operand of the loop asynchronous
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
    MASK_CO: tl.constexpr = C_OUT % CO_GROUP != 0
    N_CI: tl.constexpr = (C_IN + BLOCK_CI - 1) // BLOCK_CI
    cj = co0 + tl.arange(0, BLOCK_CO)
    for s in tl.range(N_CI * KSIZE, num_stages=STAGES):
        c = s // KSIZE
        k = s % KSIZE
        if PROBES:
            pl.enter_scope("load_x")
        a = x_desc.load([b, l0 + k - PAD, c * BLOCK_CI]).reshape(BLOCK_L, BLOCK_CI)
        if UPCAST_DOT:  # Triton 3.6's interpreter computes bf16 dots wrongly; bf16 -> fp32 is exact
            a = a.to(tl.float32)
        if PROBES:
            pl.exit_scope("load_x")
            pl.enter_scope("load_w")
        if W_TMA:
            w0 = _w_desc_tile(w_desc, k, c, co0, C_IN, C_OUT, W_KMAJOR, BLOCK_CI)
            w1 = w0
            w2 = w0
            w3 = w0
            if CO_SUB > 1:
                w1 = _w_desc_tile(w_desc, k, c, co0 + BLOCK_CO, C_IN, C_OUT, W_KMAJOR, BLOCK_CI)
            if CO_SUB > 2:
                w2 = _w_desc_tile(w_desc, k, c, co0 + 2 * BLOCK_CO, C_IN, C_OUT, W_KMAJOR, BLOCK_CI)
            if CO_SUB > 3:
                w3 = _w_desc_tile(w_desc, k, c, co0 + 3 * BLOCK_CO, C_IN, C_OUT, W_KMAJOR, BLOCK_CI)
        else:
            ci = c * BLOCK_CI + tl.arange(0, BLOCK_CI)
            w0 = _w_tile(w_ptr, k, ci, cj, C_IN, C_OUT, W_KMAJOR, MASK_CO)
            w1 = w0
            w2 = w0
            w3 = w0
            if CO_SUB > 1:
                w1 = _w_tile(w_ptr, k, ci, cj + BLOCK_CO, C_IN, C_OUT, W_KMAJOR, MASK_CO)
            if CO_SUB > 2:
                w2 = _w_tile(w_ptr, k, ci, cj + 2 * BLOCK_CO, C_IN, C_OUT, W_KMAJOR, MASK_CO)
            if CO_SUB > 3:
                w3 = _w_tile(w_ptr, k, ci, cj + 3 * BLOCK_CO, C_IN, C_OUT, W_KMAJOR, MASK_CO)
        if UPCAST_DOT:
            w0 = w0.to(tl.float32)
            w1 = w1.to(tl.float32)
            w2 = w2.to(tl.float32)
            w3 = w3.to(tl.float32)
        if PROBES:
            pl.exit_scope("load_w")
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

    if PROBES:
        pl.enter_scope("epilogue")
    bb = b
    if INT64:
        bb = bb.to(tl.int64)
    y_row = bb * (C_OUT * L_OUT)
    _store(acc0, b_ptr, y_ptr, y_desc, y_row, b, l0, co0, C_OUT, L_OUT, HAS_BIAS, TMA_STORE, BLOCK_L, BLOCK_CO)
    if CO_SUB > 1:
        _store(acc1, b_ptr, y_ptr, y_desc, y_row, b, l0, co0 + BLOCK_CO, C_OUT, L_OUT, HAS_BIAS, TMA_STORE,
               BLOCK_L, BLOCK_CO)
    if CO_SUB > 2:
        _store(acc2, b_ptr, y_ptr, y_desc, y_row, b, l0, co0 + 2 * BLOCK_CO, C_OUT, L_OUT, HAS_BIAS, TMA_STORE,
               BLOCK_L, BLOCK_CO)
    if CO_SUB > 3:
        _store(acc3, b_ptr, y_ptr, y_desc, y_row, b, l0, co0 + 3 * BLOCK_CO, C_OUT, L_OUT, HAS_BIAS, TMA_STORE,
               BLOCK_L, BLOCK_CO)
    if PROBES:
        pl.exit_scope("epilogue")


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
    if cfg.get("W_TMA") and (c_in % cfg["BLOCK_CI"] or (not w_kmajor and (c_out * elem) % 16)):
        return False
    return not cfg.get("TMA_STORE") or ((l_out * elem) % 16 == 0 and c_out % cfg["BLOCK_CO"] == 0)


def launch(x: torch.Tensor, wp: torch.Tensor, b: torch.Tensor, y: torch.Tensor, meta: dict, cfg: dict,
           x_cl: bool = False, w_kmajor: bool = False) -> None:
    """Launch on prepared operands: x `[B, C_in, L]` contiguous (x_cl: `[B, L, C_in]` contiguous memory
    passed as is), wp packed, y `[B, C_out, L_out]` contiguous; `meta` as `kernel.launch_meta` builds it."""
    ensure_allocator()
    kw = {k: cfg[k] for k in TMA_CONFIG_KEYS}
    grid = triton.cdiv(meta["C_OUT"], kw["BLOCK_CO"] * kw["CO_SUB"]) * \
        triton.cdiv(meta["L_OUT"], kw["BLOCK_L"]) * x.shape[0]
    _conv1d_tma_kernel[(grid,)](
        x, wp, b, y, x.shape[0], C_IN=meta["C_IN"], C_OUT=meta["C_OUT"], L_IN=meta["L_IN"],
        L_OUT=meta["L_OUT"], PAD=meta["PAD"], KSIZE=meta["KSIZE"], HAS_BIAS=meta["HAS_BIAS"],
        DOT_PRECISION=meta["DOT_PRECISION"], UPCAST_DOT=meta["UPCAST_DOT"], INT64=meta["INT64"],
        W_KMAJOR=w_kmajor, PROBES=meta.get("PROBES", False), **kw,
        num_warps=cfg["num_warps"], num_stages=1)


def interpreter() -> bool:
    return os.environ.get("TRITON_INTERPRET") == "1"
