"""Batch Event Truncate (KernelEvolve section 5.5): keep the last T events of every jagged segment.

Public face:
- `BatchEventTruncateDispatch(max_len, num_features)`: the module, the Triton kernels only where the
recorded benchmark shows them winning;
- `ModelNew`: the Triton seed candidate for the search (the spec's `Model` signatures, `kernel.py`);
- `BENCHMARK`: the benchmark declared as data (`bench.py`), run by `benchmarks/case_studies/run.py`.

Imported on first use (PEP 562): importing `case_studies.event_truncate.reference` or `.spec`, as a spec file does,
must not pull in Triton before the caller chose the interpreter.
"""
from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from case_studies.event_truncate.bench import BENCHMARK
    from case_studies.event_truncate.dispatch import BatchEventTruncateDispatch
    from case_studies.event_truncate.kernel import ModelNew

__all__ = ["BENCHMARK", "ModelNew", "BatchEventTruncateDispatch"]
_HOME = {"BENCHMARK": "bench", "ModelNew": "kernel", "BatchEventTruncateDispatch": "dispatch"}


def __getattr__(name: str) -> Any:
    if name not in _HOME:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{_HOME[name]}"), name)
