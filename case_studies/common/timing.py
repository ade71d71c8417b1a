"""Timing in the manner of `triton.testing.do_bench`: per-call CUDA events, the L2 flushed before
every call, the median and the 20th/80th percentiles reported. Plus CUDA-graph replay timing, so a
launch-bound kernel can be compared with PyTorch like with like (graph against graph, plain launch
against plain launch).

On a CPU (no CUDA device) the same functions time with `time.perf_counter` and no flush: those numbers
only exercise the code path, they are not speed results.

The one do_bench-style timing of the repository: the case studies' benchmarks, their kernels' autotuners
(`graph_autotune_bench`) and the benchmark scripts under benchmarks/ time with it. It imports torch (and
triton, lazily) only: the case-study kernels import it, and they never depend on the workbench
(tests/test_imports.py). The workbench's harness does not use it either way round: it times by the trusted
server's clock in rounds on fresh inputs, with no L2 flush (`workbench/harness/rounds.py`), and the
workbench must not depend on the case studies, which are its callers; of this module it shares only the
definition of `quantile` (the same seven lines in `workbench/harness/timing.py`).
"""
from __future__ import annotations

import logging
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass

import torch

log = logging.getLogger(__name__)

# 256 MB, as triton.testing.do_bench uses: several times the H200's 50-60 MB L2.
_FLUSH_BYTES = 256 * 2**20
_flush_buffers: dict[str, torch.Tensor] = {}


@dataclass(frozen=True)
class Timing:
    median_us: float
    p20_us: float
    p80_us: float
    n: int                 # timed calls
    mode: str              # "plain" | "graph" | "cpu"

    def as_dict(self) -> dict[str, float | int | str]:
        return {"median_us": self.median_us, "p20_us": self.p20_us, "p80_us": self.p80_us,
                "n_iter": self.n, "timing": self.mode}


def quantile(xs: list[float], q: float) -> float:
    """Linear-interpolated quantile of `xs`, q in [0, 1] (numpy's default), as do_bench reports them."""
    ys = sorted(xs)
    pos = q * (len(ys) - 1)
    lo = int(pos)
    hi = min(lo + 1, len(ys) - 1)
    return ys[lo] + (ys[hi] - ys[lo]) * (pos - lo)


def _summarize(times_ms: list[float], mode: str) -> Timing:
    us = [t * 1e3 for t in times_ms]
    return Timing(median_us=statistics.median(us), p20_us=quantile(us, 0.2), p80_us=quantile(us, 0.8),
                  n=len(us), mode=mode)


def _flush_buffer(device: torch.device) -> torch.Tensor:
    key = str(device)
    if key not in _flush_buffers:
        _flush_buffers[key] = torch.empty(_FLUSH_BYTES // 4, dtype=torch.int32, device=device)
    return _flush_buffers[key]


def _bench_cpu(fn: Callable[[], object], warmup_ms: float, rep_ms: float, max_iters: int) -> Timing:
    fn()                   # the first call may compile: keep it out of the estimate
    t0 = time.perf_counter()
    fn()
    est_ms = max((time.perf_counter() - t0) * 1e3, 1e-3)
    n_warm = max(1, min(int(warmup_ms / est_ms), max_iters))
    n_rep = max(3, min(int(rep_ms / est_ms), max_iters))
    for _ in range(n_warm):
        fn()
    times = []
    for _ in range(n_rep):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1e3)
    return _summarize(times, "cpu")


def bench(fn: Callable[[], object], *, warmup_ms: float = 25.0, rep_ms: float = 100.0,
          flush_l2: bool = True, device: str | torch.device | None = None,
          max_iters: int = 10_000, mode: str = "plain") -> Timing:
    """Time `fn()` as do_bench does: estimate from 5 calls, warm up for `warmup_ms`, then time each of
    about `rep_ms` worth of calls between two CUDA events, zeroing a 256 MB buffer before each call so
    that every call starts from a cold L2. Returns median/p20/p80 in microseconds.
    """
    dev = torch.device(device) if device is not None else (
        torch.device("cuda") if torch.cuda.is_available() else torch.device("cpu"))
    if dev.type != "cuda":
        return _bench_cpu(fn, warmup_ms, rep_ms, max_iters)
    return _summarize(_cuda_times_ms(fn, dev, warmup_ms, rep_ms, flush_l2, max_iters), mode)


def _cuda_times_ms(fn: Callable[[], object], dev: torch.device, warmup_ms: float, rep_ms: float,
                   flush_l2: bool, max_iters: int) -> list[float]:
    """Every timed call's milliseconds (the body of `bench`)."""
    cache = _flush_buffer(dev) if flush_l2 else None
    fn()
    torch.cuda.synchronize(dev)
    start = torch.cuda.Event(enable_timing=True)
    end = torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(5):
        if cache is not None:
            cache.zero_()
        fn()
    end.record()
    torch.cuda.synchronize(dev)
    est_ms = max(start.elapsed_time(end) / 5, 1e-4)
    n_warm = max(1, min(int(warmup_ms / est_ms), max_iters))
    n_rep = max(5, min(int(rep_ms / est_ms), max_iters))
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(n_rep)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(n_rep)]
    for _ in range(n_warm):
        fn()
    for i in range(n_rep):
        if cache is not None:
            cache.zero_()
        starts[i].record()
        fn()
        ends[i].record()
    torch.cuda.synchronize(dev)
    return [s.elapsed_time(e) for s, e in zip(starts, ends, strict=True)]


def capture_graph(fn: Callable[[], object], *, warmup_calls: int = 3) -> torch.cuda.CUDAGraph:
    """Capture one call of `fn` in a CUDA graph (after warm-up calls on a side stream, as PyTorch asks)."""
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(warmup_calls):
            fn()
    torch.cuda.current_stream().wait_stream(s)
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        fn()
    torch.cuda.synchronize()
    return g


def bench_graph(fn: Callable[[], object], **kw: object) -> Timing:
    """Capture `fn` in a CUDA graph and time its replay with `bench` (same flush, same events)."""
    if not torch.cuda.is_available():
        raise RuntimeError("CUDA-graph timing needs a CUDA device")
    g = capture_graph(fn)
    return bench(g.replay, mode="graph", **kw)  # type: ignore[arg-type]


def _cold_graph_ms(fn: Callable[[], object], rep_ms: float, warmup_ms: float, quantiles: object) -> object:
    """`fn` captured in a CUDA graph, its replays timed as `bench_graph` times them (L2 flushed before
    each), reported as `do_bench` reports: the quantiles in milliseconds, or the mean."""
    g = capture_graph(fn)
    times = _cuda_times_ms(g.replay, torch.device("cuda", torch.cuda.current_device()), warmup_ms, rep_ms,
                           True, 10_000)
    if quantiles is None:
        return statistics.fmean(times)
    return [quantile(times, float(q)) for q in quantiles]  # type: ignore[union-attr]


def graph_autotune_bench(rep_ms: float = 20.0, warmup_ms: float = 5.0, cold_l2: bool = False) -> Callable:
    """A `do_bench` for `triton.autotune` that times each config as CUDA-graph replays.

    The autotuner's ordinary `do_bench` launches through Triton's autotuned launch path, which costs
    tens of microseconds of Python a call: for kernels shorter than that it times the host, and the pick
    is noise (PFFN B 256 D 256 fp16 on the H200: a config measured at 29.5 us picked over one at 18.3;
    results/case_studies/pffn/README.md). Graph replays time the kernels alone: with a warm L2
    (`triton.testing.do_bench_cudagraph`), or with `cold_l2` exactly as the recorded benchmark times
    them (`bench_graph`: the L2 flushed before every replay), for kernels whose inputs fit in L2 and
    whose ranking changes with it. A config that cannot be captured is timed the ordinary way."""
    import triton

    def bench_fn(fn: Callable[[], object], quantiles: object = None) -> object:
        try:
            if cold_l2:
                return _cold_graph_ms(fn, rep_ms, warmup_ms, quantiles)
            return triton.testing.do_bench_cudagraph(fn, rep=rep_ms, quantiles=quantiles)
        except RuntimeError:
            log.warning("graph capture failed while autotuning; timing with plain launches", exc_info=True)
            return triton.testing.do_bench(fn, warmup=warmup_ms, rep=rep_ms, quantiles=quantiles)

    return bench_fn
