"""When a search stops, and which rule said so."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable


@dataclass(frozen=True)
class Stop:
    """Why a search ended. `rule` is one stable name; `message` a sentence for people."""

    rule: str
    message: str


# Rules the engine itself raises (beyond the configured limits below).
SPACE_EXHAUSTED = "space_exhausted"  # the operator can propose nothing new
LLM_FATAL = "llm_unavailable"  # unreachable endpoint, bad key, bad provider config
BAD_SPEC = "bad_spec"  # the harness could not load or run the spec
SEEDS_FAILED = "seeds_failed"  # every seed failed and the operator cannot repair code
INTERRUPTED = "interrupted"  # Ctrl-C
EVALUATOR_FAILED = "evaluator_failed"  # the evaluation infrastructure keeps failing


@dataclass
class Limits:
    """Termination rules. None disables a rule; several may be set, the first to fire stops the search.

    - max_evals: budget of nodes created after the seeds (each evaluated or recorded as a generation failure)
    - max_wall_s: wall-clock seconds since the search (or its resumption) started
    - max_tokens: LLM tokens (prompt + completion) spent by the run
    - stall_evals: stop after this many consecutive finished nodes without a new best fitness
    - fitness_target: stop as soon as a node reaches this fitness (speedup)
    - max_rejected: proposals rejected before the harness (failed pre-harness checks, edits that did
      not apply, duplicates); they are recorded nodes but spend no evaluation, so they have their own
      budget instead of max_evals (else a model that never passes the checks would loop forever)
    """

    max_evals: int | None = 20
    max_wall_s: float | None = None
    max_tokens: int | None = None
    stall_evals: int | None = None
    fitness_target: float | None = None
    max_rejected: int | None = 60

    def __post_init__(self) -> None:
        for name in ("max_evals", "max_wall_s", "max_tokens", "stall_evals", "fitness_target", "max_rejected"):
            v = getattr(self, name)
            if v is not None and v <= 0:
                raise ValueError(f"{name} must be positive, got {v}")


class Termination:
    """Tracks the counters the rules read. The engine calls `record` for each finished node."""

    def __init__(
        self,
        limits: Limits,
        *,
        done: int = 0,
        tokens: int = 0,
        best: float = 0.0,
        since_best: int = 0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.limits = limits
        self.done = done  # finished nodes after the seeds
        self.rejected = 0  # proposals rejected before the harness (not in `done`)
        self.tokens = tokens
        self.best = best
        self.since_best = since_best
        self._clock = clock
        self._t0 = clock()

    def elapsed(self) -> float:
        return self._clock() - self._t0

    def add_tokens(self, n: int) -> None:
        self.tokens += int(n)

    def record(self, fitness: float, *, counts: bool = True) -> None:
        """One node finished. `counts=False` for seeds: they neither spend budget nor count as stalls."""
        if fitness > self.best:
            self.best = fitness
            self.since_best = 0
        elif counts:
            self.since_best += 1
        if counts:
            self.done += 1

    def record_rejected(self) -> None:
        """One proposal was rejected before the harness: it spends the rejection budget only."""
        self.rejected += 1

    def may_submit(self, in_flight: int) -> bool:
        """Whether one more node may be started (the budget counts nodes already in flight)."""
        lim = self.limits
        return lim.max_evals is None or self.done + in_flight < lim.max_evals

    def check(self) -> Stop | None:
        """The first rule that fires now, or None."""
        lim = self.limits
        if lim.fitness_target is not None and self.best >= lim.fitness_target:
            return Stop(
                "fitness_target", f"fitness {self.best:.4g} reached the target {lim.fitness_target:g}"
            )
        if lim.max_evals is not None and self.done >= lim.max_evals:
            return Stop("budget_evals", f"evaluation budget of {lim.max_evals} spent")
        if lim.max_rejected is not None and self.rejected >= lim.max_rejected:
            return Stop(
                "budget_rejected",
                f"{self.rejected} proposals were rejected before evaluation (limit {lim.max_rejected})",
            )
        if lim.max_tokens is not None and self.tokens >= lim.max_tokens:
            return Stop("budget_tokens", f"LLM token budget spent ({self.tokens} >= {lim.max_tokens})")
        if lim.max_wall_s is not None and self.elapsed() >= lim.max_wall_s:
            return Stop("wall_time", f"wall-time budget of {lim.max_wall_s:g} s spent")
        if lim.stall_evals is not None and self.since_best >= lim.stall_evals:
            return Stop("stall", f"no improvement in the last {self.since_best} evaluations")
        return None
