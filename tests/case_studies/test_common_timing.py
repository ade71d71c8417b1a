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


def test_cold_l2_graph_timing_reports_like_do_bench(monkeypatch):
    """With `cold_l2` each config is captured and its replays timed with the L2 flush (`bench_graph`'s
    way); the autotuner gets do_bench's answer: the requested quantiles in milliseconds, or the mean."""
    from case_studies.common import timing

    captured = []
    monkeypatch.setattr(timing, "capture_graph", lambda fn: captured.append(fn) or type("G", (), {"replay": fn})())
    monkeypatch.setattr(timing.torch.cuda, "current_device", lambda: 0)
    seen = {}

    def times(fn, dev, warmup_ms, rep_ms, flush_l2, max_iters):
        seen.update(flush_l2=flush_l2, rep_ms=rep_ms, warmup_ms=warmup_ms)
        return [1.0, 2.0, 3.0, 4.0, 5.0]

    monkeypatch.setattr(timing, "_cuda_times_ms", times)
    bench = graph_autotune_bench(rep_ms=20, warmup_ms=5, cold_l2=True)

    def fn():
        return None

    assert bench(fn, quantiles=(0.5, 0.2, 0.8)) == [3.0, 1.8, 4.2]
    assert bench(fn) == 3.0
    assert captured == [fn, fn] and seen == {"flush_l2": True, "rep_ms": 20, "warmup_ms": 5}


def test_the_harness_and_the_case_studies_define_quantile_alike():
    """The harness keeps its own seven-line `quantile` (the workbench must not depend on the case studies,
    nor their kernels on the workbench): both must stay numpy's linear interpolation."""
    import random

    import numpy as np

    from case_studies.common.timing import quantile
    from workbench.harness.timing import quantile as harness_quantile

    r = random.Random(0)
    for n in (1, 2, 5, 17):
        xs = [r.uniform(0, 10) for _ in range(n)]
        for q in (0.0, 0.2, 0.5, 0.8, 1.0):
            assert quantile(xs, q) == harness_quantile(xs, q)
            assert abs(quantile(xs, q) - float(np.quantile(xs, q))) < 1e-9
