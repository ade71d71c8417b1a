"""The timing protocol, shared by the candidate and the reference so both are measured alike.

GPU: warm up, flush L2 before every repetition, CUDA events around the call only, synchronize,
median and p20/p80 of many repetitions; inputs are prepared outside the timed window.
CPU: the same protocol with a host clock (Triton's interpreter: a correctness platform, not a speed one).
"""
from __future__ import annotations

import statistics
import time
from dataclasses import dataclass
from typing import Callable

import torch

_L2_FLUSH_BYTES = 256 * 2**20  # larger than any current GPU's L2 (H200: 60 MB)


@dataclass
class TimingConfig:
    target_s: float = 0.5
    min_reps: int = 5
    max_reps: int = 300
    warmup: int = 2

    @classmethod
    def for_device(cls, device: str) -> "TimingConfig":
        if device == "cuda":
            return cls(target_s=0.4, min_reps=20, max_reps=500, warmup=3)
        return cls(target_s=0.3, min_reps=3, max_reps=20, warmup=1)


def quantile(xs: list[float], q: float) -> float:
    """Linear-interpolated quantile of `xs` (q in [0, 1]): the harness's and the case studies' one definition."""
    s = sorted(xs)
    pos = q * (len(s) - 1)
    lo = int(pos)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (pos - lo)


def time_callable(fn: Callable[[], object], prepare: Callable[[int], None], device: str,
                  cfg: TimingConfig | None = None) -> dict[str, float]:
    """Time `fn`; `prepare(rep)` runs before each repetition, outside the timed window."""
    cfg = cfg or TimingConfig.for_device(device)
    cuda = device == "cuda"
    flush = torch.empty(_L2_FLUSH_BYTES, dtype=torch.int8, device="cuda") if cuda else None
    for i in range(cfg.warmup):
        prepare(i)
        fn()
    if cuda:
        torch.cuda.synchronize()
    # Estimate one call to size the repetition count.
    prepare(0)
    t0 = time.perf_counter()
    fn()
    if cuda:
        torch.cuda.synchronize()
    est = max(time.perf_counter() - t0, 1e-6)
    reps = int(min(cfg.max_reps, max(cfg.min_reps, cfg.target_s / est)))
    times: list[float] = []
    if cuda:
        starts = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
        ends = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
        for r in range(reps):
            prepare(r)
            flush.zero_()
            starts[r].record()
            fn()
            ends[r].record()
        torch.cuda.synchronize()
        times = [s.elapsed_time(e) * 1e3 for s, e in zip(starts, ends)]  # ms -> us
    else:
        for r in range(reps):
            prepare(r)
            t0 = time.perf_counter()
            fn()
            times.append((time.perf_counter() - t0) * 1e6)
    return {"median_us": statistics.median(times), "p20_us": quantile(times, 0.2),
            "p80_us": quantile(times, 0.8), "reps": reps, "last_rep": reps - 1}
