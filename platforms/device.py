"""What a kernel runs on: the properties later parts key knowledge and rooflines on."""
from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass, field
from typing import Any

from platforms.ceilings import ceilings


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
        return Platform(kind="cpu", name="Triton interpreter on CPU", arch="cpu-interpreter",
                        sm_count=os.cpu_count() or 1, interpreter=True,
                        ceilings_source="none: the interpreter is a correctness platform, not a speed one")
    props = torch.cuda.get_device_properties(torch.cuda.current_device())
    is_rocm = getattr(torch.version, "hip", None) is not None
    arch = (getattr(props, "gcnArchName", "gfx").split(":")[0] if is_rocm else f"sm_{props.major}{props.minor}")
    row = ceilings(arch)
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
