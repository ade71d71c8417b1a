"""InterFormer PFFN (KernelEvolve section 5.3.2): per-token FFN with GELU and two RMSNorms, fused.

Public face:
- `pffn(x, w1, w2, g1, g2)`: the Triton kernel only where the recorded H200 benchmark shows it winning;
- `ModelNew`: the Triton seed candidate for the search (the spec's `Model` signatures, `kernel.py`);
- `BENCHMARK`: the benchmark declared as data (`bench.py`), run by `benchmarks/case_studies/run.py`.

Imported on first use (PEP 562): importing `case_studies.pffn.reference` or `.spec`, as a spec file does,
must not pull in Triton before the caller chose the interpreter.
"""
from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from case_studies.pffn.bench import BENCHMARK
    from case_studies.pffn.dispatch import pffn
    from case_studies.pffn.kernel import ModelNew

__all__ = ["BENCHMARK", "ModelNew", "pffn"]
_HOME = {"BENCHMARK": "bench", "ModelNew": "kernel", "pffn": "dispatch"}


def __getattr__(name: str) -> Any:
    if name not in _HOME:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{_HOME[name]}"), name)
