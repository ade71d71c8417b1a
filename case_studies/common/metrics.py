"""Achieved throughput, the formulas in code. The ceilings they are read against (the H200's, measured on
this project's lent machine) live in `platforms` only (`peak_tflops`, `mem_bandwidth_gbs`)."""
from __future__ import annotations

from platforms import mem_bandwidth_gbs

# The recorded case-study results were all measured on the H200: its ceilings are the reports' default.
RESULTS_ARCH = "sm_90"


def achieved_gbs(nbytes: float, time_us: float) -> float:
    """GB/s = bytes moved (each tensor read once plus each output written once) / time."""
    return nbytes / (time_us * 1e-6) / 1e9 if time_us > 0 else float("nan")


def achieved_tflops(flops: float, time_us: float) -> float:
    """TFLOP/s = useful floating-point operations (2 per multiply-add) / time."""
    return flops / (time_us * 1e-6) / 1e12 if time_us > 0 else float("nan")


def memory_floor_us(nbytes: float, bandwidth_gbs: float | None = None) -> float:
    """The time the compulsory bytes take at the copy bandwidth (default: the H200's): no kernel beats it."""
    bw = mem_bandwidth_gbs(RESULTS_ARCH) if bandwidth_gbs is None else bandwidth_gbs
    return nbytes / (bw * 1e9) * 1e6


def dtype_bytes(dtype: str) -> int:
    return {"float16": 2, "bfloat16": 2, "float32": 4, "int64": 8, "int32": 4}[dtype]
