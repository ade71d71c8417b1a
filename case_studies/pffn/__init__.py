"""InterFormer PFFN (KernelEvolve section 5.3.2): per-token FFN with GELU and two RMSNorms, fused.

Public face:
- `pffn(x, w1, w2, g1, g2)`: the Triton kernel only where the recorded H200 benchmark shows it winning;
- `ModelNew`: the Triton seed candidate for the search (the spec's `Model` signatures, `kernel.py`);
- `BENCHMARK`: the benchmark declared as data (`bench.py`), run by `benchmarks/case_studies/run.py`.
Each is imported on first use (`case_studies.faces`).
"""
from case_studies.faces import lazy_face

__all__, __getattr__ = lazy_face(__name__, dispatcher="pffn")
