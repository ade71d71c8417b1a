"""Platforms: what a kernel runs on and how fast it could go there, and where a number was measured.

The ground floor: the workbench, profiling and the case studies read it; it imports none of them.
- `describe_device(device)` -> `Platform` (`cuda`, `cpu` = Triton's interpreter, `rocm`);
- `ceilings(arch)`, `peak_tflops(arch, dtype)`, `mem_bandwidth_gbs(arch)`: the rooflines' numbers;
- `collect()`: the provenance of a measurement (GPU, driver, versions, commit, date).
"""
from platforms.ceilings import ceilings, mem_bandwidth_gbs, peak_tflops
from platforms.device import Platform, describe_device
from platforms.provenance import collect, git_commit

__all__ = ["Platform", "ceilings", "collect", "describe_device", "git_commit", "mem_bandwidth_gbs", "peak_tflops"]
