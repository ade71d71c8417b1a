"""conv1d as an implicit GEMM in Triton (KernelEvolve section 5.1, appendix A): the entry point, its tunables
and the seed candidate.

    y[b, co, l] = bias[co] + sum_{ci, k} w[co, ci, k] * x[b, ci, l * stride + k - padding]

Shapes: x `[B, C_in, L]`, w `[C_out, C_in, K]`, bias `[C_out]`, y `[B, C_out, L_out]`.

By concern, one module each:
- `gather_jit.py`: the gather kernel's JIT functions (the design notes and the H200 numbers behind them);
- `tiles.py`: its autotune space and how a config is fitted to a problem;
- `packing.py`: the packed weights and their TMA descriptors, cached;
- `launch_plan.py`: which path takes a call, the grid, the plan cache of repeated call signatures;
- `tma.py`: the channels-last path (fp32 where it applies);
- this module: the tunables the offline search rewrites (`TUNABLES` and their `NAME = value` lines), the
  autotuner, `triton_conv1d` (the Triton kernels, no dispatch) and `ModelNew`. The dispatching `conv1d`
  (PyTorch wherever the kernel was not measured to win) is `dispatch.conv1d`, exported by the package.

fp32 inputs use TF32 tensor cores, as cuDNN does by default (`torch.backends.cudnn.allow_tf32`).
Probe regions (PROBES=True): `load_x`, `load_w`, `mma`, `epilogue`.
"""
from __future__ import annotations

import torch
import triton
from torch import nn

from case_studies.common.contenders import torch_dtype
from case_studies.common.launch import Plan
from case_studies.conv1d.gather_jit import _conv1d_kernel
from case_studies.conv1d.launch_plan import PATHS, PLANS, _sm_count, choose_path, grid_size, launch_meta
from case_studies.conv1d.launch_plan import plan_key as _plan_key
from case_studies.conv1d.packing import _pack_and_desc, _spec_kw, desc_spec, pack_weight, tma_block
from case_studies.conv1d.tiles import (
    AUTOTUNE_SPACE,
    CONFIG_KEYS,
    autotune_desc,
    fit_config,
    prune_configs,
    space_configs,
)

# names other modules and the tests reach through this one (the gather path's public face)
__all__ = ["AUTOTUNE_SPACE", "CONFIG_KEYS", "PATHS", "TUNABLES", "ModelNew", "autotune_configs", "best_config",
           "choose_path", "configs_for", "fit_config", "fixed_config", "launch_meta", "pack_weight", "plan_key",
           "prune_configs", "tma_block", "triton_conv1d", "tunables_valid", "desc_spec", "grid_size"]

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


def autotune_configs() -> list[triton.Config]:
    """The autotune space (`tiles.AUTOTUNE_SPACE`) as triton configs, pruned by `tunables_valid`."""
    return space_configs(tunables_valid)


def _autotune_bench(fn, quantiles):
    """A short do_bench for tuning: the device lease pays for every config timed (differences under a
    few percent are not resolved at this length; the recorded benchmark re-times the winner properly)."""
    return triton.testing.do_bench(fn, warmup=AUTOTUNE_WARMUP_MS, rep=AUTOTUNE_REP_MS, quantiles=quantiles)


_conv1d_autotuned = triton.autotune(
    do_bench=_autotune_bench,
    configs=autotune_configs(), key=["C_IN", "C_OUT", "L_IN", "L_OUT", "STRIDE", "KSIZE"],
    prune_configs_by={"early_config_prune": prune_configs},
)(_conv1d_kernel)


def fixed_config() -> dict:
    """The module-level constants as launch parameters."""
    return {"BLOCK_N": BLOCK_N, "BLOCK_CO": BLOCK_CO, "CO_SUB": CO_SUB, "BLOCK_CI": BLOCK_CI,
            "UNROLL_CI": UNROLL_CI, "PERSISTENT": PERSISTENT, "EVICT": EVICT, "SHIFT_T": SHIFT_T,
            "W_TMA": W_TMA, "num_warps": NUM_WARPS,
            "num_stages": NUM_STAGES}



def configs_for(params: dict, dtype: str = "float16") -> list[dict]:
    """The configs the shipped path's autotuner times for a shape (`B`, `C_in`, `C_out`, `L`, `K`, `stride`,
    `padding`), as `conv1d` config dicts (for compiling them in parallel before a benchmark)."""
    from case_studies.conv1d import tma

    path = choose_path(params["B"], params["C_in"], params["L"], params["C_out"], params["K"], params["stride"],
                       params["padding"], torch_dtype(dtype))
    if path == "cl":
        return [{**dict(zip(tma.TMA_CONFIG_KEYS, row[:-1])), "num_warps": row[-1], "path": "cl"}
                for row in tma.CL_AUTOTUNE_SPACE]
    return [{**c.kwargs, "num_warps": c.num_warps, "num_stages": c.num_stages, "path": "gather"}
            for c in autotune_configs()]


PLAN_CACHE = True      # False: every call through Triton's own launch path (for measuring it)


def plan_key(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None, stride: int, padding: int,
             config: dict | None, autotune: bool | None, use_cache: bool, probes: bool,
             path: str) -> tuple | None:
    """`launch_plan.plan_key` under this module's PLAN_CACHE and AUTOTUNE."""
    return _plan_key(x, weight, bias, stride, padding, config, autotune, use_cache, probes, path,
                     enabled=PLAN_CACHE, autotune_default=AUTOTUNE)


def triton_conv1d(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None, stride: int = 1,
                  padding: int = 0, *, config: dict | None = None, autotune: bool | None = None,
           use_cache: bool = True, probes: bool = False, path: str = "auto") -> torch.Tensor:
    """Triton conv1d (groups 1, dilation 1). `path` (or `config["path"]`): see `PATHS`. `config` pins the
    tiles of the chosen kernel (gather: `CONFIG_KEYS`, num_warps, num_stages, missing keys from the module
    constants; cl: `tma.TMA_CONFIG_KEYS`, num_warps); otherwise both are autotuned on a GPU when `AUTOTUNE`.

    On a GPU the first gather launch of a call signature goes through Triton and is recorded; later calls
    with that signature allocate y, look up the packed weight and call the compiled launcher directly."""
    key = plan_key(x, weight, bias, stride, padding, config, autotune, use_cache, probes, path)
    plan = None if key is None else PLANS.plans.get(key)
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
                                probes, FP32_DOT_PRECISION)
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
        wd = autotune_desc(weight, c_in, c_out, use_cache)
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
        PLANS.record(key, compiled, (grid_size(n_total, c_out, kw, sms),), named,
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
        self.conv.to(torch_dtype(dtype))
        self.stride, self.padding = stride, padding

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return triton_conv1d(x, self.conv.weight, self.conv.bias, self.stride, self.padding)


# The earlier name of `triton_conv1d`, kept while notebooks/case_studies/conv1d.ipynb still imports it (its
# owner moves it to `triton_conv1d`; then this line goes): one function, the dispatching `conv1d` is
# `dispatch.conv1d`.
conv1d = triton_conv1d
