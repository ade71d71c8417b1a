"""The autotuner's graph-replay timer (`case_studies.common.timing.graph_autotune_bench`): it asks Triton
for CUDA-graph timing with the autotuner's quantiles, and falls back to plain launches when a config
cannot be captured. (The timings themselves need a GPU: results/case_studies/pffn/.)"""
from __future__ import annotations

import triton.testing

from case_studies.common.timing import graph_autotune_bench


def test_graph_timing_first_plain_launches_when_capture_fails(monkeypatch):
    calls = []

    def graph(fn, rep, quantiles):
        calls.append(("graph", rep, quantiles))
        if len(calls) > 1:
            raise RuntimeError("operation not permitted when stream is capturing")
        return [1.0, 0.9, 1.1]

    def plain(fn, warmup, rep, quantiles):
        calls.append(("plain", warmup, rep, quantiles))
        return [2.0, 1.9, 2.1]

    monkeypatch.setattr(triton.testing, "do_bench_cudagraph", graph)
    monkeypatch.setattr(triton.testing, "do_bench", plain)
    bench = graph_autotune_bench(rep_ms=20, warmup_ms=5)
    q = (0.5, 0.2, 0.8)
    assert bench(lambda: None, quantiles=q) == [1.0, 0.9, 1.1]
    assert bench(lambda: None, quantiles=q) == [2.0, 1.9, 2.1]
    assert calls == [("graph", 20, q), ("graph", 20, q), ("plain", 5, 20, q)]
