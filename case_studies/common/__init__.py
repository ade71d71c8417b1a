"""Shared benchmark utilities for the case studies.

- `timing`: do_bench-style timing (median, p20, p80 over CUDA events, L2 flushed before each call),
  CUDA-graph replay timing, a CPU fallback.
- `metrics`: achieved GB/s and TFLOP/s, and the ceilings they are read against.
- `contenders`: eager, eager as a CUDA graph, torch.compile (default and max-autotune) wrappers.
- `runner`: a benchmark declared as data (shapes x dtypes x contenders x launch modes) and its runner.
- `results`: CSV rows with provenance on every row; reading them back.
- `dispatch`: the shape-aware dispatcher base that reads a recorded results CSV.

Nothing here imports triton at module import, so it is safe to import before
`workbench.env.ensure_interpreter_if_no_gpu()`.
"""
from case_studies.common.dispatch import Decision, ShapeDispatcher
from case_studies.common.metrics import achieved_gbs, achieved_tflops
from case_studies.common.results import read_rows, write_rows
from case_studies.common.runner import BenchmarkDecl, BenchRow, CaseStudyBench, run_benchmark
from case_studies.common.timing import Timing, bench, bench_graph

__all__ = ["BenchRow", "BenchmarkDecl", "CaseStudyBench", "Decision", "ShapeDispatcher", "Timing",
           "achieved_gbs", "achieved_tflops", "bench", "bench_graph", "read_rows", "run_benchmark",
           "write_rows"]
