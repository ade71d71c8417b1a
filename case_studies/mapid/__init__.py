"""MapIdTransform (KernelEvolve section 5.4.1): sparse ids to dense indices through a sorted vocabulary.

Public face:
- `MapIdDispatch(vocab)`: the module, the Triton kernel only where the recorded benchmark shows it winning;
- `ModelNew`: the Triton seed candidate for the search (the spec's `Model` signatures, `kernel.py`);
- `BENCHMARK`: the benchmark declared as data (`bench.py`), run by `benchmarks/case_studies/run.py`.
Each is imported on first use (`case_studies.faces`).
"""
from case_studies.faces import lazy_face

__all__, __getattr__ = lazy_face(__name__, dispatcher="MapIdDispatch")
