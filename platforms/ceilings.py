"""The ceilings rooflines and reports read, per architecture: copy bandwidth, dense-GEMM TFLOP/s, cache sizes."""
from __future__ import annotations

import copy
from typing import Any

# `measured` entries were read on this project's lent H200 (copy bandwidth counting read+write bytes,
# bf16 dense GEMM on random data, 2026-10-28); the others are datasheet leads and are labelled so.
_TABLE: dict[str, dict[str, Any]] = {
    "sm_90": {"mem_bandwidth_gbs": 4300.0, "peak_tflops": {"bf16": 790.0, "fp16": 790.0, "tf32": 395.0,
                                                           "fp32": 67.0},
              "source": "measured on NVIDIA H200 (copy 4.3 TB/s, bf16 GEMM 788 TFLOP/s)",
              "l2_bytes": 50 * 2**20, "shared_mem_bytes": 227 * 1024},
    "sm_80": {"mem_bandwidth_gbs": 2039.0, "peak_tflops": {"bf16": 312.0, "fp16": 312.0, "tf32": 156.0,
                                                           "fp32": 19.5},
              "source": "datasheet lead (A100 80GB SXM)", "l2_bytes": 40 * 2**20,
              "shared_mem_bytes": 163 * 1024},
    "gfx942": {"mem_bandwidth_gbs": 5300.0, "peak_tflops": {"bf16": 1307.0, "fp16": 1307.0, "fp32": 163.4},
               "source": "datasheet lead (MI300X)", "l2_bytes": 256 * 2**20, "shared_mem_bytes": 64 * 1024},
}

# torch dtype names -> the keys of `peak_tflops`: fp32 matmuls run on TF32 tensor cores (cuDNN's and our
# kernels' default), so their ceiling is the tf32 one where the table has it.
_DTYPE_KEYS = {"float16": "fp16", "bfloat16": "bf16", "float32": "tf32"}


def ceilings(arch: str) -> dict[str, Any]:
    """The ceilings of an architecture (`mem_bandwidth_gbs`, `peak_tflops`, `source`, `l2_bytes`,
    `shared_mem_bytes`), a copy; {} when the table has none."""
    return copy.deepcopy(_TABLE.get(arch, {}))


def peak_tflops(arch: str, dtype: str) -> float:
    """The dense-GEMM ceiling of `arch` for a torch dtype name (`float16`, `bfloat16`, `float32` via TF32),
    NaN when unknown."""
    peaks = _TABLE.get(arch, {}).get("peak_tflops", {})
    key = _DTYPE_KEYS.get(dtype, dtype)
    return float(peaks.get(key, peaks.get("fp32" if key == "tf32" else key, float("nan"))))


def mem_bandwidth_gbs(arch: str) -> float:
    """The copy bandwidth of `arch` in GB/s (read + write bytes), NaN when unknown."""
    return float(_TABLE.get(arch, {}).get("mem_bandwidth_gbs", float("nan")))
