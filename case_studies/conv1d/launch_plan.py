"""How a conv1d call is launched: which path takes it, the grid and compile-time arguments, and the plan
cache that lets a repeated call signature skip Triton's Python launch path."""
from __future__ import annotations

import os

import torch
import triton

from case_studies.common.launch import LaunchCache, aligned16
from case_studies.conv1d.gather_jit import _conv1d_kernel


def _interpreter_bf16(dtype: torch.dtype) -> bool:
    return dtype == torch.bfloat16 and os.environ.get("TRITON_INTERPRET") == "1"


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
                dtype: torch.dtype, has_bias: bool, probes: bool = False,
                fp32_dot_precision: str = "tf32") -> tuple[int, dict]:
    """The kernel's `n_total` and compile-time arguments for one problem (`fp32_dot_precision`: the
    kernel module's FP32_DOT_PRECISION)."""
    l_out = (l_in + 2 * padding - ksize) // stride + 1
    n_total = bsz * l_out
    big = max(bsz * c_in * l_in, bsz * c_out * l_out) + n_total >= 2**31 - 1
    return n_total, dict(C_IN=c_in, C_OUT=c_out, L_IN=l_in, L_OUT=l_out, STRIDE=stride, PAD=padding,
                         KSIZE=ksize, HAS_BIAS=has_bias,
                         DOT_PRECISION=fp32_dot_precision if dtype == torch.float32 else "ieee",
                         UPCAST_DOT=_interpreter_bf16(dtype), INT64=big, PROBES=probes)


# Which kernel (`path=` or `config["path"]`): "gather" (the pointer kernel of gather_jit.py), "cl" (x transposed
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


# Plain launches of the gather kernel through `case_studies/common/launch.py`: at B 256 Triton's Python
# launch path (autotuner key, argument binding) cost more than the kernel (85 us plain against 28.5 us as
# a CUDA graph, results/case_studies/conv1d/bench.csv at ead6c8c).
PLANS = LaunchCache(_conv1d_kernel, n_tensors=4)   # w_desc, when used, is the tail's last entry


def plan_key(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None, stride: int, padding: int,
             config: dict | None, autotune: bool | None, use_cache: bool, probes: bool,
             path: str, *, enabled: bool = True, autotune_default: bool = True) -> tuple | None:
    """The call signature a recorded gather launch is valid for, or None where no plan applies (CPU,
    non-contiguous x or bias, probe builds: those take the full path). Covers everything the compiled kernel was
    specialized on: shapes (constexprs), dtype, device, pointer alignment, bias presence, the options.
    The weight's values are not in it: the packed weight is looked up (`pack_weight`) on every call.
    `enabled` and `autotune_default` are the kernel module's PLAN_CACHE and AUTOTUNE."""
    if not (enabled and x.is_cuda and x.is_contiguous()) or (bias is not None and not bias.is_contiguous()):
        return None
    if probes:   # an instrumented build is compiled inside the Proton session: always Triton's own path
        return None
    cfg = None if config is None else tuple(sorted(config.items()))
    return (x.shape, x.dtype, weight.shape, weight.dtype, None if bias is None else bias.dtype, stride, padding,
            torch.cuda.current_device(), aligned16(x) if bias is None else aligned16(x, bias),
            cfg, autotune, use_cache, probes, path, autotune_default)
