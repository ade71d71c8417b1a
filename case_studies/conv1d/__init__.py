"""Convolutional-transformer conv1d (KernelEvolve section 5.1-5.2): implicit GEMM with packed weights.

Public face:
- `conv1d(x, weight, bias, stride, padding)`: `F.conv1d` semantics, the Triton kernel only where the
recorded H200 benchmark shows it winning (`kernel.triton_conv1d` is the kernel alone);
- `ModelNew`: the Triton seed candidate for the search (the spec's `Model` signatures, `kernel.py`);
- `BENCHMARK`: the benchmark declared as data (`bench.py`), run by `benchmarks/case_studies/run.py`.
Each is imported on first use (`case_studies.faces`).
"""
from case_studies.faces import lazy_face

__all__, __getattr__ = lazy_face(__name__, dispatcher="conv1d")
