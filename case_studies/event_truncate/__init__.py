"""Batch Event Truncate (KernelEvolve section 5.5): keep the last T events of every jagged segment.

Public face:
- `BatchEventTruncateDispatch(max_len, num_features)`: the module, the Triton kernels only where the
recorded benchmark shows them winning;
- `ModelNew`: the Triton seed candidate for the search (the spec's `Model` signatures, `kernel.py`);
- `BENCHMARK`: the benchmark declared as data (`bench.py`), run by `benchmarks/case_studies/run.py`.
Each is imported on first use (`case_studies.faces`).
"""
from case_studies.faces import lazy_face

__all__, __getattr__ = lazy_face(__name__, dispatcher="BatchEventTruncateDispatch")
