"""Achieved throughput, read against the ceilings measured on this project's H200
(`workbench.platforms`: copy bandwidth about 4.3 TB/s counting read+write bytes, dense bf16/fp16 GEMM
about 790 TFLOP/s)."""
from __future__ import annotations

H200_BANDWIDTH_GBS = 4300.0
H200_PEAK_TFLOPS = {"float16": 790.0, "bfloat16": 790.0, "float32": 395.0}   # fp32 via TF32 tensor cores


def achieved_gbs(nbytes: float, time_us: float) -> float:
    """GB/s = bytes moved (each tensor read once plus each output written once) / time."""
    return nbytes / (time_us * 1e-6) / 1e9 if time_us > 0 else float("nan")


def achieved_tflops(flops: float, time_us: float) -> float:
    """TFLOP/s = useful floating-point operations (2 per multiply-add) / time."""
    return flops / (time_us * 1e-6) / 1e12 if time_us > 0 else float("nan")


def memory_floor_us(nbytes: float, bandwidth_gbs: float = H200_BANDWIDTH_GBS) -> float:
    """The time the compulsory bytes take at the copy bandwidth: no kernel can beat it."""
    return nbytes / (bandwidth_gbs * 1e9) * 1e6


def dtype_bytes(dtype: str) -> int:
    return {"float16": 2, "bfloat16": 2, "float32": 4, "int64": 8, "int32": 4}[dtype]
