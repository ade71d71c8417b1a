"""The leaf of the evaluation layer: what a job is and what an evaluator promises.

`harness`, `evaluator` and `distributed` all import from here and nothing here imports them back,
so the evaluation layer has no import cycle.
"""
from __future__ import annotations

import abc
import uuid
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

from workbench.result import EvalResult


@dataclass
class EvalJob:
    """One candidate to evaluate against one spec."""

    spec_path: str
    candidate_source: str
    device: str = "auto"            # auto | cpu | cuda
    trials: int = 3
    timeout_s: float = 300.0
    overrides: dict[str, Any] = field(default_factory=dict)   # module constants of the spec (--set)
    shapes: list[str] | None = None  # named shapes to check (None: all the spec declares)
    platform: str | None = None      # target platform label, e.g. "cuda:sm_90" or "cpu" (routing)
    job_id: str = field(default_factory=lambda: uuid.uuid4().hex[:12])
    # The static source policy (harness/policy.py) runs unless a trusted caller turns it off, e.g. to
    # test that the runtime guards catch what the policy would have caught first.
    policy: bool = True
    # The clock the fitness compares: "device" (CUDA-graph replay, what do_bench measures; the default)
    # or "wall" (per call, host launch included). None: the spec's `TIMING`, else "device".
    timing: str | None = None
    # Which waiting job a local evaluator runs first (lower first, then in submission order): the suite
    # gives every job of a problem the problem's start, so the oldest problem's candidates go first and
    # problems finish one after another instead of all together (a run cut off loses less work)
    order: float = 0.0


class Evaluator(abc.ABC):
    """Asynchronous evaluation of candidates: `submit` returns at once with a Future."""

    @abc.abstractmethod
    def submit(self, job: EvalJob) -> "Future[EvalResult]":
        ...

    @property
    @abc.abstractmethod
    def capacity(self) -> int:
        """How many evaluations this evaluator runs at once."""

    def in_flight(self) -> dict[str, int]:
        """Evaluations running now, per worker or platform label (for progress bars)."""
        return {}

    def close(self) -> None:  # noqa: B027 - an optional hook: backends without resources need no close
        pass

    def __enter__(self) -> "Evaluator":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
