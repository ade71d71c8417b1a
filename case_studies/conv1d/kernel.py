"""conv1d as an implicit GEMM in Triton (KernelEvolve section 5.1, appendix A).

    y[b, co, l] = bias[co] + sum_{ci, k} w[co, ci, k] * x[b, ci, l * stride + k - padding]

Shapes: x `[B, C_in, L]`, w `[C_out, C_in, K]`, bias `[C_out]`, y `[B, C_out, L_out]`.

As a GEMM: M = C_out, N = B * L_out (batch and length flattened, so a short L such as 200 wastes no
tile), reduction R = C_in * K. The weights are packed once to `[K * C_in, C_out]` (the paper's
`[C_in*K, C_out]`, k-major so that one k's rows are contiguous) and the packed copy is cached by
pointer, shape, dtype, device and version; the input is never unfolded in memory (im2col happens in
the loads: each reduction step loads a `[BLOCK_CI, BLOCK_N]` window of x shifted by k, padding is the
load mask). Accumulation is fp32 (`tl.dot`), the bias add is fused in the epilogue, and the whole
convolution is one kernel launch (PyTorch's conv1d runs five kernels on the paper's H100, conv2d four).

fp32 inputs use TF32 tensor cores, as cuDNN does by default (`torch.backends.cudnn.allow_tf32`).

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

try:  # probes are compiled away unless PROBES=True; the interpreter lacks the semantic
    import triton.profiler.language as pl

    pl.enable_semantic("triton")
except Exception:  # pragma: no cover - depends on the triton build
    pl = None

# -- tunables, declared as data (docs/CONTRACTS.md) ---------------------------------------------------
TUNABLES = {
    "BLOCK_N": [32, 64, 128, 256],
    "BLOCK_CO": [32, 64, 128],
    "BLOCK_CI": [16, 32, 64],
    "NUM_WARPS": [2, 4, 8],
    "NUM_STAGES": [1, 2, 3, 4],
}
BLOCK_N = 128
BLOCK_CO = 128
BLOCK_CI = 32
NUM_WARPS = 4
NUM_STAGES = 3
# On a GPU, tune per shape over `autotune_configs()`; the constants above are the interpreter's config,
# the config the offline search rewrites, and the one used when AUTOTUNE is False.
AUTOTUNE_WARMUP_MS = 5
AUTOTUNE_REP_MS = 20
AUTOTUNE = True
FP32_DOT_PRECISION = "tf32"   # "ieee" for exact fp32 products (about 8x slower on tensor-core-less paths)


def tunables_valid(cfg: dict) -> bool:
    """Prune tiles whose fp32 accumulator alone would take more than 128 registers a thread."""
    acc_regs = cfg["BLOCK_N"] * cfg["BLOCK_CO"] // (32 * cfg["NUM_WARPS"])
    return acc_regs <= 128


# A short list, not the TUNABLES product: the device lease pays for every compiled config
# (about a second each), and the offline search explores the full TUNABLES space instead.
AUTOTUNE_SPACE = [
    # BLOCK_N, BLOCK_CO, BLOCK_CI, num_warps, num_stages
    (128, 128, 32, 4, 3), (128, 128, 32, 8, 3), (256, 128, 32, 8, 3), (64, 128, 32, 4, 3),
    (128, 64, 32, 4, 3), (256, 64, 32, 4, 3), (128, 128, 64, 8, 2), (256, 32, 32, 4, 4),
]


def autotune_configs() -> list[triton.Config]:
    """The autotune space as triton configs, pruned by `tunables_valid`."""
    out = []
    for bn, bco, bci, nw, ns in AUTOTUNE_SPACE:
        if tunables_valid({"BLOCK_N": bn, "BLOCK_CO": bco, "BLOCK_CI": bci, "NUM_WARPS": nw}):
            out.append(triton.Config({"BLOCK_N": bn, "BLOCK_CO": bco, "BLOCK_CI": bci}, num_warps=nw,
                                     num_stages=ns))
    return out


def prune_configs(configs: list[triton.Config], named_args: dict, **kwargs) -> list[triton.Config]:
    """Drop tiles much larger than the problem (a 256-wide C_out tile for 96 channels)."""
    c_out, c_in = named_args["C_out"], named_args["C_in"]
    keep = [c for c in configs if c.kwargs["BLOCK_CO"] <= max(32, triton.next_power_of_2(c_out))
            and c.kwargs["BLOCK_CI"] <= max(16, triton.next_power_of_2(c_in))]
    return keep or configs


@triton.jit
def _conv1d_kernel(
    x_ptr, w_ptr, b_ptr, y_ptr,
    B, C_in, L_in, C_out, L_out,
    x_stride_b, x_stride_c, x_stride_l,
    y_stride_b, y_stride_c, y_stride_l,
    STRIDE: tl.constexpr, PAD: tl.constexpr, KSIZE: tl.constexpr, HAS_BIAS: tl.constexpr,
    DOT_PRECISION: tl.constexpr, UPCAST_DOT: tl.constexpr,
    BLOCK_N: tl.constexpr, BLOCK_CO: tl.constexpr, BLOCK_CI: tl.constexpr,
    PROBES: tl.constexpr = False,
):
    # C_out tiles vary fastest so that the programs sharing one x window run together (L2 reuse).
    pid = tl.program_id(0)
    n_co = tl.cdiv(C_out, BLOCK_CO)
    pid_co = pid % n_co
    pid_n = pid // n_co

    co = pid_co * BLOCK_CO + tl.arange(0, BLOCK_CO)
    co_mask = co < C_out
    n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    n_mask = n < B * L_out
    bb = (n // L_out).to(tl.int64)
    ll = n % L_out
    x_col = x_ptr + bb * x_stride_b                      # [BLOCK_N] base of each output column's batch row

    acc = tl.zeros((BLOCK_CO, BLOCK_N), dtype=tl.float32)
    n_ci = tl.cdiv(C_in, BLOCK_CI)
    # k varies fastest: the K shifted windows of one channel chunk are loaded back to back (L1 hits).
    for it in range(0, n_ci * KSIZE):
        k = it % KSIZE
        ci = (it // KSIZE) * BLOCK_CI + tl.arange(0, BLOCK_CI)
        ci_mask = ci < C_in
        if PROBES:
            pl.enter_scope("load_x")
        pos = ll * STRIDE + k - PAD
        col_ok = n_mask & (pos >= 0) & (pos < L_in)      # zero padding is the mask
        x = tl.load(x_col[None, :] + ci[:, None] * x_stride_c + pos[None, :] * x_stride_l,
                    mask=ci_mask[:, None] & col_ok[None, :], other=0.0)
        if PROBES:
            pl.exit_scope("load_x")
            pl.enter_scope("load_w")
        # packed weights: row k * C_in + ci, column co
        w = tl.load(w_ptr + (k * C_in + ci)[None, :] * C_out + co[:, None],
                    mask=co_mask[:, None] & ci_mask[None, :], other=0.0)
        if PROBES:
            pl.exit_scope("load_w")
            pl.enter_scope("mma")
        if UPCAST_DOT:  # Triton 3.6's interpreter computes bf16 dots wrongly; bf16 -> fp32 is exact
            acc = tl.dot(w.to(tl.float32), x.to(tl.float32), acc, input_precision="ieee")
        else:
            acc = tl.dot(w, x, acc, input_precision=DOT_PRECISION)
        if PROBES:
            pl.exit_scope("mma")

    if PROBES:
        pl.enter_scope("epilogue")
    if HAS_BIAS:
        bias = tl.load(b_ptr + co, mask=co_mask, other=0.0).to(tl.float32)
        acc += bias[:, None]
    y_ptrs = y_ptr + (bb * y_stride_b)[None, :] + co[:, None] * y_stride_c + ll[None, :] * y_stride_l
    tl.store(y_ptrs, acc.to(y_ptr.dtype.element_ty), mask=co_mask[:, None] & n_mask[None, :])
    if PROBES:
        pl.exit_scope("epilogue")


def _autotune_bench(fn, quantiles):
    """A short do_bench for tuning: the device lease pays for every config timed (differences under a
    few percent are not resolved at this length; the recorded benchmark re-times the winner properly)."""
    return triton.testing.do_bench(fn, warmup=AUTOTUNE_WARMUP_MS, rep=AUTOTUNE_REP_MS, quantiles=quantiles)


_conv1d_autotuned = triton.autotune(
    do_bench=_autotune_bench,
    configs=autotune_configs(), key=["C_in", "C_out", "L_out", "KSIZE"],
    prune_configs_by={"early_config_prune": prune_configs},
)(_conv1d_kernel)

# -- the Hopper path: TMA loads ------------------------------------------------------------------------
# Measured on the H200 (results/case_studies/conv1d/gpu_run1_checks.json): the gather kernel above ran
# 760-1430 us in fp16 at the production shape, 2.3x slower than F.conv1d. Its shifted, div/mod-indexed
# loads are neither vectorizable nor eligible for async copies, so every reduction step waits on memory.
# On sm_90 the same implicit GEMM reads its shifted x windows with the tensor-memory accelerator instead:
# x viewed as [B * C_in, L] (a row is one channel of one example), each step loads a [BLOCK_CI, BLOCK_L]
# box at (b * C_in + ci0, l0 + k - padding); the box may start before 0 or run past L and the hardware
# fills those elements with zeros, which is exactly the convolution's zero padding. Loads are
# asynchronous and pipelined (num_stages). Needs stride 1, C_in % BLOCK_CI == 0 (a box never crosses
# into the next example's channels), 16-byte aligned rows (L * itemsize % 16 == 0).
TMA_AUTOTUNE_SPACE = [
    # BLOCK_L, BLOCK_CO, BLOCK_CI, num_warps, num_stages
    (128, 128, 32, 4, 3), (128, 128, 32, 8, 4), (256, 128, 32, 8, 3), (64, 128, 32, 4, 4),
    (128, 64, 32, 4, 4), (256, 64, 32, 8, 3), (128, 128, 16, 4, 4), (64, 64, 32, 4, 4),
]
TMA_BLOCK_L = 128
# The first GPU run with device-side descriptors (tl.make_tensor_descriptor) died with "illegal
# instruction"; the second, with host-side descriptors, failed its isolated probe too. The path is
# therefore OFF unless CONV1D_TMA=1: an illegal instruction poisons the whole process (the harness's
# worker, a search run), so it must not be the default before a hardware probe passes.
# case_studies/run_gpu_part1.py probes it in a child process and turns it on for its own run only if
# the probe passes.
TMA_ENABLED = os.environ.get("CONV1D_TMA") == "1"


def _set_tma_blocks(nargs: dict) -> None:
    """Autotune pre-hook: a host-side descriptor's box is the config's tile."""
    nargs["x_desc"].block_shape = [nargs["BLOCK_CI"], nargs["BLOCK_L"]]
    nargs["w_desc"].block_shape = [nargs["BLOCK_CO"], nargs["BLOCK_CI"]]


def tma_autotune_configs() -> list[triton.Config]:
    return [triton.Config({"BLOCK_L": bl, "BLOCK_CO": bco, "BLOCK_CI": bci}, num_warps=nw, num_stages=ns,
                          pre_hook=_set_tma_blocks)
            for bl, bco, bci, nw, ns in TMA_AUTOTUNE_SPACE]


def _tma_config_fits(kw: dict, c_in: int, c_out: int, l_in: int, ksize: int) -> bool:
    # a box never wider than the tensor it reads (not known to be legal), never across examples
    return c_in % kw["BLOCK_CI"] == 0 and kw["BLOCK_L"] <= l_in and kw["BLOCK_CO"] <= ksize * c_out \
        and kw["BLOCK_CO"] <= max(64, triton.next_power_of_2(c_out))


def prune_tma_configs(configs: list[triton.Config], named_args: dict, **kwargs) -> list[triton.Config]:
    c_in, c_out, l_in = named_args["C_in"], named_args["C_out"], named_args["L_in"]
    ksize = kwargs.get("KSIZE", named_args.get("KSIZE", 1))
    keep = [c for c in configs if _tma_config_fits(c.kwargs, c_in, c_out, l_in, ksize)]
    return keep or [c for c in configs if c_in % c.kwargs["BLOCK_CI"] == 0][:1]


@triton.jit
def _conv1d_tma_kernel(
    x_desc, w_desc, b_ptr, y_ptr,
    B, C_in, L_in, C_out, L_out,
    y_stride_b, y_stride_c, y_stride_l,
    PAD: tl.constexpr, KSIZE: tl.constexpr, HAS_BIAS: tl.constexpr, DOT_PRECISION: tl.constexpr,
    BLOCK_L: tl.constexpr, BLOCK_CO: tl.constexpr, BLOCK_CI: tl.constexpr,
    PROBES: tl.constexpr = False,
):
    # x_desc: x viewed as [B * C_in, L_in], box [BLOCK_CI, BLOCK_L]; w_desc: packed weights [K, C_out, C_in]
    # viewed as [K * C_out, C_in], box [BLOCK_CO, BLOCK_CI] (rows past C_out read the next tap's weights:
    # their outputs are masked at the store; rows past the last tap read zeros).
    pid = tl.program_id(0)
    n_co = tl.cdiv(C_out, BLOCK_CO)
    # outputs [PAD, L_out) only: every box then starts at a coordinate >= 0 (the first [0, PAD) outputs
    # are left to the gather kernel, see _conv1d_tma). A negative start is the prime suspect for the
    # "illegal instruction" the first version hit on the H200; not yet confirmed on hardware.
    n_l = tl.cdiv(L_out - PAD, BLOCK_L)
    pid_co = pid % n_co
    rest = pid // n_co
    pid_l = rest % n_l
    b = rest // n_l
    l0 = PAD + pid_l * BLOCK_L
    co0 = pid_co * BLOCK_CO
    acc = tl.zeros((BLOCK_CO, BLOCK_L), dtype=tl.float32)
    n_ci = C_in // BLOCK_CI
    for it in range(0, n_ci * KSIZE):
        k = it % KSIZE
        ci0 = (it // KSIZE) * BLOCK_CI
        if PROBES:
            pl.enter_scope("load_x")
        x = x_desc.load([b * C_in + ci0, l0 + k - PAD])
        if PROBES:
            pl.exit_scope("load_x")
            pl.enter_scope("load_w")
        w = w_desc.load([k * C_out + co0, ci0])
        if PROBES:
            pl.exit_scope("load_w")
            pl.enter_scope("mma")
        acc = tl.dot(w, x, acc, input_precision=DOT_PRECISION)
        if PROBES:
            pl.exit_scope("mma")
    if PROBES:
        pl.enter_scope("epilogue")
    co = co0 + tl.arange(0, BLOCK_CO)
    ll = l0 + tl.arange(0, BLOCK_L)
    co_mask = co < C_out
    if HAS_BIAS:
        acc += tl.load(b_ptr + co, mask=co_mask, other=0.0).to(tl.float32)[:, None]
    y_ptrs = y_ptr + b.to(tl.int64) * y_stride_b + co[:, None] * y_stride_c + ll[None, :] * y_stride_l
    tl.store(y_ptrs, acc.to(y_ptr.dtype.element_ty), mask=co_mask[:, None] & (ll < L_out)[None, :])
    if PROBES:
        pl.exit_scope("epilogue")


_conv1d_tma_autotuned = triton.autotune(
    configs=tma_autotune_configs(), key=["C_in", "C_out", "L_out", "KSIZE"], do_bench=_autotune_bench,
    prune_configs_by={"early_config_prune": prune_tma_configs},
)(_conv1d_tma_kernel)


def tma_supported(x: torch.Tensor, weight: torch.Tensor, stride: int, padding: int = 0) -> bool:
    """Whether the TMA path applies: sm_90+, stride 1, contiguous 16-byte aligned rows, C_in % 16 == 0,
    a sequence at least 64 long (the narrowest box), padding < K (the left sliver reads x[:, :, :K-1])."""
    if padding >= weight.shape[2] or padding < 0:
        return False
    if not TMA_ENABLED or os.environ.get("TRITON_INTERPRET") == "1" or not x.is_cuda or stride != 1:
        return False
    if torch.cuda.get_device_capability(x.device)[0] < 9 or not x.is_contiguous():
        return False
    item = x.element_size()
    return (x.shape[2] * item) % 16 == 0 and x.data_ptr() % 16 == 0 and x.shape[1] % 16 == 0 \
        and x.shape[2] >= 64 and weight.shape[0] * weight.shape[2] >= 64


# -- weight packing, cached ----------------------------------------------------------------------------
_PACK_CACHE: OrderedDict[tuple, tuple[weakref.ref, torch.Tensor]] = OrderedDict()
_PACK_CACHE_SIZE = 32


def pack_weight(weight: torch.Tensor, use_cache: bool = True, layout: str = "gather") -> torch.Tensor:
    """`[C_out, C_in, K]` -> `[K * C_in, C_out]` (the paper's packing, for the gather kernel) or
    `[K, C_out, C_in]` (`layout="tma"`: ci contiguous, the A operand's reduction axis), contiguous.

    Cached by pointer, shape, strides, dtype, device and version counter (an in-place update, e.g. an
    optimizer step, repacks), as the paper does, and also by the weight tensor itself (a weak reference):
    a key of pointer and shape alone returned stale weights on the H200 when a freed weight's memory was
    reused by a new weight of the same shape (results/case_studies/conv1d/gpu_run2_checks.json,
    the "gather" check of B4 Cin32 Cout17).
    """
    key = (layout, weight.data_ptr(), tuple(weight.shape), weight.stride(), weight.dtype, weight.device,
           weight._version)
    if use_cache and key in _PACK_CACHE:
        ref, packed = _PACK_CACHE[key]
        if ref() is weight:
            _PACK_CACHE.move_to_end(key)
            return packed
        del _PACK_CACHE[key]
    if layout == "tma":
        packed = weight.detach().permute(2, 0, 1).contiguous()
    else:
        packed = weight.detach().permute(2, 1, 0).contiguous().view(-1, weight.shape[0])
    if use_cache:
        _PACK_CACHE[key] = (weakref.ref(weight), packed)
        while len(_PACK_CACHE) > _PACK_CACHE_SIZE:
            _PACK_CACHE.popitem(last=False)
    return packed


def _interpreter_bf16(dtype: torch.dtype) -> bool:
    return dtype == torch.bfloat16 and os.environ.get("TRITON_INTERPRET") == "1"


def fixed_config() -> dict:
    """The module-level constants as launch parameters."""
    return {"BLOCK_N": BLOCK_N, "BLOCK_CO": BLOCK_CO, "BLOCK_CI": BLOCK_CI, "num_warps": NUM_WARPS,
            "num_stages": NUM_STAGES}


def conv1d(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None, stride: int = 1,
           padding: int = 0, *, config: dict | None = None, autotune: bool | None = None,
           use_cache: bool = True, probes: bool = False, path: str = "auto") -> torch.Tensor:
    """Triton conv1d (groups 1, dilation 1). `path`: "tma" (sm_90+, see `tma_supported`), "gather"
    (anywhere, the interpreter included) or "auto" (tma where supported). `config` pins the tiles
    (BLOCK_N or BLOCK_L, BLOCK_CO, BLOCK_CI, num_warps, num_stages); otherwise autotuned on a GPU when
    `AUTOTUNE`, else the module constants."""
    if x.dim() != 3 or weight.dim() != 3 or weight.shape[1] != x.shape[1]:
        raise ValueError(f"expected x [B, C_in, L] and w [C_out, C_in, K]; got {tuple(x.shape)}, "
                         f"{tuple(weight.shape)}")
    if weight.dtype != x.dtype or (bias is not None and bias.dtype != x.dtype):
        raise TypeError(f"x, weight and bias must share a dtype; got {x.dtype}, {weight.dtype}, "
                        f"{None if bias is None else bias.dtype}")
    bsz, c_in, l_in = x.shape
    c_out, _, ksize = weight.shape
    l_out = (l_in + 2 * padding - ksize) // stride + 1
    y = torch.empty((bsz, c_out, l_out), dtype=x.dtype, device=x.device)
    if y.numel() == 0:
        return y
    use_tma = path == "tma" or (path == "auto" and tma_supported(x, weight, stride, padding))
    if use_tma:
        return _conv1d_tma(x, weight, bias, padding, y, config, autotune, use_cache, probes)
    wp = pack_weight(weight, use_cache)
    b = bias if bias is not None else wp  # any pointer; not read when HAS_BIAS is False
    args = (x, wp, b, y, bsz, c_in, l_in, c_out, l_out, *x.stride(), *y.stride())
    meta = dict(STRIDE=stride, PAD=padding, KSIZE=ksize, HAS_BIAS=bias is not None,
                DOT_PRECISION=FP32_DOT_PRECISION if x.dtype == torch.float32 else "ieee",
                UPCAST_DOT=_interpreter_bf16(x.dtype), PROBES=probes)
    use_autotune = (AUTOTUNE if autotune is None else autotune) and config is None and x.is_cuda \
        and not probes
    if use_autotune:
        def grid(m):
            return (triton.cdiv(bsz * l_out, m["BLOCK_N"]) * triton.cdiv(c_out, m["BLOCK_CO"]),)
        _conv1d_autotuned[grid](*args, **meta)
    else:
        cfg = dict(fixed_config(), **(config or {}))
        grid = (triton.cdiv(bsz * l_out, cfg["BLOCK_N"]) * triton.cdiv(c_out, cfg["BLOCK_CO"]),)
        _conv1d_kernel[grid](*args, **meta, BLOCK_N=cfg["BLOCK_N"], BLOCK_CO=cfg["BLOCK_CO"],
                             BLOCK_CI=cfg["BLOCK_CI"], num_warps=cfg["num_warps"],
                             num_stages=cfg["num_stages"])
    return y


def _conv1d_tma(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None, padding: int,
                y: torch.Tensor, config: dict | None, autotune: bool | None, use_cache: bool,
                probes: bool) -> torch.Tensor:
    from triton.tools.tensor_descriptor import TensorDescriptor

    bsz, c_in, l_in = x.shape
    c_out, _, ksize = weight.shape
    l_out = y.shape[2]
    wp = pack_weight(weight, use_cache, layout="tma").view(ksize * c_out, c_in)
    b = bias if bias is not None else wp
    cfg = None
    if not ((AUTOTUNE if autotune is None else autotune) and config is None and not probes):
        cfg = {"BLOCK_L": TMA_BLOCK_L, "BLOCK_CO": BLOCK_CO, "BLOCK_CI": BLOCK_CI, "num_warps": NUM_WARPS,
               "num_stages": NUM_STAGES, **(config or {})}
        if not _tma_config_fits(cfg, c_in, c_out, l_in, ksize):
            cfg.update(BLOCK_L=64, BLOCK_CO=64, BLOCK_CI=32 if c_in % 32 == 0 else 16)
    blocks = cfg or {"BLOCK_L": 64, "BLOCK_CO": 64, "BLOCK_CI": 16}   # autotune's pre-hook resets these
    x_desc = TensorDescriptor(x.view(bsz * c_in, l_in), shape=[bsz * c_in, l_in], strides=[l_in, 1],
                              block_shape=[blocks["BLOCK_CI"], blocks["BLOCK_L"]])
    w_desc = TensorDescriptor(wp, shape=[ksize * c_out, c_in], strides=[c_in, 1],
                              block_shape=[blocks["BLOCK_CO"], blocks["BLOCK_CI"]])
    args = (x_desc, w_desc, b, y, bsz, c_in, l_in, c_out, l_out, *y.stride())
    meta = dict(PAD=padding, KSIZE=ksize, HAS_BIAS=bias is not None,
                DOT_PRECISION=FP32_DOT_PRECISION if x.dtype == torch.float32 else "ieee", PROBES=probes)
    if cfg is None:
        def grid(m):
            return (bsz * triton.cdiv(l_out - padding, m["BLOCK_L"]) * triton.cdiv(c_out, m["BLOCK_CO"]),)
        _conv1d_tma_autotuned[grid](*args, **meta)
    else:
        grid = (bsz * triton.cdiv(l_out - padding, cfg["BLOCK_L"]) * triton.cdiv(c_out, cfg["BLOCK_CO"]),)
        _conv1d_tma_kernel[grid](*args, **meta, BLOCK_L=cfg["BLOCK_L"], BLOCK_CO=cfg["BLOCK_CO"],
                                 BLOCK_CI=cfg["BLOCK_CI"], num_warps=cfg["num_warps"],
                                 num_stages=cfg["num_stages"])
    if padding > 0:   # outputs [0, padding) read x[:, :, :K - 1] with left zero padding: a sliver
        _gather_into(x[:, :, :ksize - 1], weight, bias, padding, y[:, :, :padding], probes)
    return y


def _gather_into(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None, padding: int,
                 y: torch.Tensor, probes: bool = False) -> None:
    """The gather kernel with the module-constant tiles, writing into the (strided) view `y`."""
    bsz, c_in, l_in = x.shape
    c_out, _, ksize = weight.shape
    l_out = y.shape[2]
    wp = pack_weight(weight)
    cfg = fixed_config()
    grid = (triton.cdiv(bsz * l_out, cfg["BLOCK_N"]) * triton.cdiv(c_out, cfg["BLOCK_CO"]),)
    _conv1d_kernel[grid](x, wp, bias if bias is not None else wp, y, bsz, c_in, l_in, c_out, l_out,
                         *x.stride(), *y.stride(), STRIDE=1, PAD=padding, KSIZE=ksize,
                         HAS_BIAS=bias is not None,
                         DOT_PRECISION=FP32_DOT_PRECISION if x.dtype == torch.float32 else "ieee",
                         UPCAST_DOT=_interpreter_bf16(x.dtype), PROBES=probes, BLOCK_N=cfg["BLOCK_N"],
                         BLOCK_CO=cfg["BLOCK_CO"], BLOCK_CI=cfg["BLOCK_CI"], num_warps=cfg["num_warps"],
                         num_stages=cfg["num_stages"])


def best_config() -> dict[str, dict]:
    """What the autotuners chose so far, by key (for the benchmark log)."""
    out = {}
    for name, tuner in (("gather", _conv1d_autotuned), ("tma", _conv1d_tma_autotuned)):
        for k, c in tuner.cache.items():
            out[f"{name} {k}"] = {**c.kwargs, "num_warps": c.num_warps, "num_stages": c.num_stages}
    return out


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
