"""The evaluator interface the search engine submits candidates to.

Backends: `LocalPoolEvaluator` (default, no extra dependency: K pre-warmed harness servers on
this machine) and the Ray backend in `workbench.distributed` (the `distributed` extra).
Every backend returns the same `EvalResult` records with the same isolation rules, because
every backend ends in `workbench.harness.Harness.evaluate`.
"""
from __future__ import annotations

import dataclasses
import itertools
import logging
import math
import queue
import threading
from concurrent.futures import Future
from typing import Any

from workbench.jobs import EvalJob, Evaluator
from workbench.result import EvalResult, Status

__all__ = ["EvalJob", "Evaluator", "InOrder", "LocalPoolEvaluator", "make_evaluator"]

log = logging.getLogger(__name__)


class LocalPoolEvaluator(Evaluator):
    """K harness servers on this machine, each evaluating one candidate at a time; a waiting job with a
    lower `EvalJob.order` goes first, equal orders in submission order.

    Servers on one GPU time one candidate at a time (the device clock, `platforms.clock`): the others
    compile and check while it times.
    """

    def __init__(self, workers: int = 1, device: str = "auto") -> None:
        from workbench.harness import Harness  # lazy: the harness imports torch

        if workers < 1:
            raise ValueError(f"workers must be >= 1, got {workers}")
        self._device = device
        # (order, submission number, job and its future); the stop sentinel sorts after every job
        self._queue: "queue.PriorityQueue[tuple[float, int, tuple[EvalJob, Future[EvalResult]] | None]]" = (
            queue.PriorityQueue())
        self._seq = itertools.count()
        self._harnesses = [Harness(device=device) for _ in range(workers)]
        self._busy: dict[str, int] = {}
        self._lock = threading.Lock()
        self._threads = [
            threading.Thread(target=self._loop, args=(h, f"local-{i}"), daemon=True, name=f"eval-{i}")
            for i, h in enumerate(self._harnesses)
        ]
        for t in self._threads:
            t.start()

    @property
    def capacity(self) -> int:
        return len(self._harnesses)

    def submit(self, job: EvalJob) -> "Future[EvalResult]":
        fut: Future[EvalResult] = Future()
        self._queue.put((float(job.order), next(self._seq), (job, fut)))
        return fut

    def in_flight(self) -> dict[str, int]:
        with self._lock:
            return dict(self._busy)

    def _loop(self, harness: Any, name: str) -> None:
        while True:
            _, _, item = self._queue.get()
            if item is None:
                return
            job, fut = item
            if not fut.set_running_or_notify_cancel():
                continue
            with self._lock:
                self._busy[name] = 1
            try:
                fut.set_result(harness.evaluate_job(job))
            except Exception as exc:  # the harness itself failed: an infrastructure error
                log.exception("harness failed on job %s", job.job_id)
                fut.set_result(EvalResult(status=Status.INFRA_ERROR, error=f"{type(exc).__name__}: {exc}"))
            finally:
                with self._lock:
                    self._busy.pop(name, None)

    def close(self) -> None:
        for _ in self._threads:
            self._queue.put((math.inf, next(self._seq), None))
        for t in self._threads:
            t.join(timeout=5)
        for h in self._harnesses:
            h.close()


class InOrder(Evaluator):
    """Another evaluator's view that gives every job it submits one `order` (the suite: a problem's start),
    so a local pool serves older problems first. Closing it leaves the shared evaluator open."""

    def __init__(self, inner: Evaluator, order: float) -> None:
        self.inner, self.order = inner, float(order)

    def submit(self, job: EvalJob) -> "Future[EvalResult]":
        return self.inner.submit(dataclasses.replace(job, order=self.order))

    @property
    def capacity(self) -> int:
        return self.inner.capacity

    def in_flight(self) -> dict[str, int]:
        return self.inner.in_flight()


def make_evaluator(kind: str = "local", *, workers: int = 1, device: str = "auto", **kwargs: Any) -> Evaluator:
    """Build an evaluator by name: `local` (default) or `ray` (needs the `distributed` extra)."""
    if kind == "local":
        return LocalPoolEvaluator(workers=workers, device=device)
    if kind == "ray":
        try:
            from workbench.distributed import RayEvaluator
        except ImportError as exc:
            raise ValueError(f"the ray evaluator needs the 'distributed' extra (pip install ray): {exc}") from exc
        return RayEvaluator(workers=workers, device=device, **kwargs)
    raise ValueError(f"unknown evaluator {kind!r}: expected 'local' or 'ray'")
