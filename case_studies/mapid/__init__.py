"""MapIdTransform (KernelEvolve section 5.4.1): sparse ids to dense indices through a sorted vocabulary.

Public face:
- `MapIdDispatch(vocab)`: the module, the Triton kernel only where the recorded benchmark shows it winning;
- `ModelNew`: the Triton seed candidate for the search (the spec's `Model` signatures, `kernel.py`);
- `BENCHMARK`: the benchmark declared as data (`bench.py`), run by `benchmarks/case_studies/run.py`.

Imported on first use (PEP 562): importing `case_studies.mapid.reference` or `.spec`, as a spec file does,
must not pull in Triton before the caller chose the interpreter.
"""
from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from case_studies.mapid.bench import BENCHMARK
    from case_studies.mapid.dispatch import MapIdDispatch
    from case_studies.mapid.kernel import ModelNew

__all__ = ["BENCHMARK", "ModelNew", "MapIdDispatch"]
_HOME = {"BENCHMARK": "bench", "ModelNew": "kernel", "MapIdDispatch": "dispatch"}


def __getattr__(name: str) -> Any:
    if name not in _HOME:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{_HOME[name]}"), name)
