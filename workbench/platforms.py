"""What a kernel runs on: the properties later parts key knowledge and rooflines on."""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

# Ceilings per architecture. `measured` entries were read on this project's lent H200
# (copy bandwidth counting read+write bytes, bf16 dense GEMM on random data, 2026-10-28);
# the others are datasheet leads and are labelled so.
_ARCH_TABLE: dict[str, dict[str, Any]] = {
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


@dataclass
class Platform:
    kind: str                      # "cuda" | "rocm" | "cpu"
    name: str
    arch: str                      # "sm_90", "sm_80", "gfx942", "cpu-interpreter"
    sm_count: int = 0
    mem_bytes: int = 0
    mem_bandwidth_gbs: float = 0.0
    peak_tflops: dict[str, float] = field(default_factory=dict)
    l2_bytes: int = 0
    shared_mem_bytes: int = 0
    warp_size: int = 32
    ceilings_source: str = ""
    interpreter: bool = False

    @property
    def label(self) -> str:
        return "cpu" if self.kind == "cpu" else f"{self.kind}:{self.arch}"

    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d["label"] = self.label
        return d


def describe_device(device: str = "auto") -> Platform:
    """Describe `cuda` (the current GPU), `cpu` (Triton's interpreter) or `auto`."""
    import torch

    if device not in ("auto", "cpu", "cuda"):
        raise ValueError(f"unknown device {device!r}: expected auto, cpu or cuda")
    if device == "cuda" and not torch.cuda.is_available():
        raise ValueError("device 'cuda' asked for, but no CUDA device is visible")
    if device == "cpu" or not torch.cuda.is_available():
        import os

        return Platform(kind="cpu", name="Triton interpreter on CPU", arch="cpu-interpreter",
                        sm_count=os.cpu_count() or 1, interpreter=True,
                        ceilings_source="none: the interpreter is a correctness platform, not a speed one")
    props = torch.cuda.get_device_properties(torch.cuda.current_device())
    is_rocm = getattr(torch.version, "hip", None) is not None
    arch = (getattr(props, "gcnArchName", "gfx").split(":")[0] if is_rocm else f"sm_{props.major}{props.minor}")
    row = _ARCH_TABLE.get(arch, {})
    return Platform(
        kind="rocm" if is_rocm else "cuda",
        name=props.name,
        arch=arch,
        sm_count=props.multi_processor_count,
        mem_bytes=props.total_memory,
        mem_bandwidth_gbs=row.get("mem_bandwidth_gbs", 0.0),
        peak_tflops=dict(row.get("peak_tflops", {})),
        l2_bytes=getattr(props, "L2_cache_size", 0) or row.get("l2_bytes", 0),
        shared_mem_bytes=row.get("shared_mem_bytes", 0),
        warp_size=getattr(props, "warp_size", 64 if is_rocm else 32),
        ceilings_source=row.get("source", "unknown architecture: no ceilings"),
    )


# torch dtype names -> the keys of `peak_tflops`: fp32 matmuls run on TF32 tensor cores (cuDNN's and our
# kernels' default), so their ceiling is the tf32 one where the table has it.
_DTYPE_KEYS = {"float16": "fp16", "bfloat16": "bf16", "float32": "tf32"}


def arch_ceilings(arch: str) -> dict[str, Any]:
    """The ceilings of an architecture (`mem_bandwidth_gbs`, `peak_tflops`, `source`, ...), a copy; {} when
    the table has none. Rooflines and benchmark reports read them here, not from a copy of their own."""
    import copy

    return copy.deepcopy(_ARCH_TABLE.get(arch, {}))


def peak_tflops(arch: str, dtype: str) -> float:
    """The dense-GEMM ceiling of `arch` for a torch dtype name (`float16`, `bfloat16`, `float32` via TF32),
    NaN when unknown."""
    peaks = _ARCH_TABLE.get(arch, {}).get("peak_tflops", {})
    key = _DTYPE_KEYS.get(dtype, dtype)
    return float(peaks.get(key, peaks.get("fp32" if key == "tf32" else key, float("nan"))))


def mem_bandwidth_gbs(arch: str) -> float:
    """The copy bandwidth of `arch` in GB/s (read + write bytes), NaN when unknown."""
    return float(_ARCH_TABLE.get(arch, {}).get("mem_bandwidth_gbs", float("nan")))
