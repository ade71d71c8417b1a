"""Convolutional-transformer conv1d (KernelEvolve section 5.1-5.2): implicit GEMM with packed weights.

Public face:
- `conv1d(x, weight, bias, stride, padding)`: `F.conv1d` semantics, the Triton kernel only where the
recorded H200 benchmark shows it winning (`kernel.triton_conv1d` is the kernel alone);
- `ModelNew`: the Triton seed candidate for the search (the spec's `Model` signatures, `kernel.py`);
- `BENCHMARK`: the benchmark declared as data (`bench.py`), run by `benchmarks/case_studies/run.py`.

Imported on first use (PEP 562): importing `case_studies.conv1d.reference` or `.spec`, as a spec file does,
must not pull in Triton before the caller chose the interpreter.
"""
from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from case_studies.conv1d.bench import BENCHMARK
    from case_studies.conv1d.dispatch import conv1d
    from case_studies.conv1d.kernel import ModelNew

__all__ = ["BENCHMARK", "ModelNew", "conv1d"]
_HOME = {"BENCHMARK": "bench", "ModelNew": "kernel", "conv1d": "dispatch"}


def __getattr__(name: str) -> Any:
    if name not in _HOME:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{_HOME[name]}"), name)
