"""Termination rules: each one fires on its own and the stop names the rule."""

from __future__ import annotations

from pathlib import Path

import pytest

import workbench
from tests.search.fakes import TOY_SOURCE, TOY_SPEC, FakeEvaluator
from workbench.search.operators import Operator, OperatorContext, Proposal, Signal
from workbench.search.termination import Limits, Termination


class _Clock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


def test_rules_unit() -> None:
    clock = _Clock()
    term = Termination(
        Limits(max_evals=3, max_wall_s=10, max_tokens=100, stall_evals=2, fitness_target=5.0), clock=clock
    )
    assert term.check() is None
    term.record(1.0, counts=False)  # a seed: no budget spent, no stall counted
    assert (term.done, term.since_best, term.best) == (0, 0, 1.0)
    term.record(0.5)
    assert term.check() is None and term.may_submit(1) and not term.may_submit(3)
    term.record(0.7)
    assert term.check().rule == "stall"  # two in a row without a new best
    term.record(6.0)
    assert term.check().rule == "fitness_target"  # the target is checked first
    term2 = Termination(Limits(max_evals=None, max_tokens=100), clock=clock)
    term2.add_tokens(99)
    assert term2.check() is None
    term2.add_tokens(1)
    assert term2.check().rule == "budget_tokens"
    term3 = Termination(Limits(max_evals=None, max_wall_s=10), clock=clock)
    clock.t = 10.5
    stop = term3.check()
    assert stop.rule == "wall_time" and "10 s" in stop.message


def test_limits_reject_nonsense() -> None:
    with pytest.raises(ValueError, match="max_evals"):
        Limits(max_evals=0)


@pytest.fixture()
def toy(tmp_path: Path) -> tuple[Path, Path]:
    (tmp_path / "spec.py").write_text(TOY_SPEC)
    (tmp_path / "cand.py").write_text(TOY_SOURCE)
    return tmp_path / "spec.py", tmp_path / "cand.py"


def _run(toy, tmp_path, **kw):
    spec, cand = toy
    kw.setdefault("evaluator", FakeEvaluator())
    return workbench.optimize(
        spec, seeds=[cand], run_dir=tmp_path / "runs", progress=False, device="cpu", **kw
    )


def test_fitness_target_stops_early(toy, tmp_path: Path) -> None:
    run = _run(toy, tmp_path, budget=60, fitness_target=1.0)
    assert run.stop.rule == "fitness_target" and run.best.fitness >= 1.0 and len(run.tree) < 61


def test_stall_rule(toy, tmp_path: Path) -> None:
    flat = FakeEvaluator(fitness=lambda cfg: 1.0)  # nothing ever improves on the seed
    run = _run(toy, tmp_path, budget=60, stall=4, evaluator=flat)
    assert run.stop.rule == "stall" and len(run.tree) == 5


def test_space_exhausted_is_a_stop_rule(toy, tmp_path: Path) -> None:
    spec, _ = toy
    small = tmp_path / "small.py"
    small.write_text('TUNABLES = {"BLOCK": [16, 32], "WARPS": [1, 2]}\nBLOCK = 16\nWARPS = 1\n')
    run = workbench.optimize(
        spec,
        seeds=[small],
        budget=50,
        evaluator=FakeEvaluator(),
        run_dir=tmp_path / "r",
        progress=False,
        device="cpu",
    )
    assert run.stop.rule == "space_exhausted" and len(run.tree) == 4  # all 4 configurations, once each


class _TokenSpender(Operator):
    """Spends a fixed number of tokens per proposal (the arithmetic of the token budget only)."""

    name = "tokens"
    can_repair = True

    def __init__(self) -> None:
        self.k = 0

    def propose(self, ctx: OperatorContext) -> Proposal:
        self.k += 1
        src = ctx.parents[0].source.replace("WARPS = 1", "WARPS = 2") + f"# variant {self.k}\n"
        return Proposal("llm", source=src, prompt="p", response="r", prompt_tokens=30, completion_tokens=20)


class _Scripted(Operator):
    """Returns the given signals in turn, every one with the same diagnosis text: the engine must act on
    the signal alone (issue 34: it once matched "every valid configuration" in the text)."""

    name = "scripted"
    can_repair = True

    def __init__(self, signals: list[Signal]) -> None:
        self.signals, self.k = list(signals), 0

    def propose(self, ctx: OperatorContext) -> Proposal:
        self.k += 1
        sig = self.signals.pop(0) if self.signals else Signal.CANDIDATE
        src = ctx.parents[0].source.replace("WARPS = 1", "WARPS = 2") + f"# variant {self.k}\n"
        return Proposal("scripted", source=src if sig in (Signal.CANDIDATE, Signal.REJECTED) else None,
                        error_class=None if sig is Signal.CANDIDATE else "because", signal=sig,
                        diagnosis="every valid configuration is in the graph")  # fmt: skip


def test_the_engine_acts_on_signals_not_on_text(toy, tmp_path: Path) -> None:
    # the exhaustion text on candidates, rejections and failures changes nothing
    run = _run(toy, tmp_path, budget=2, operator=_Scripted([Signal.REJECTED, Signal.FAILED, Signal.CANDIDATE]))
    kids = [n for n in run.tree if n.operator == "scripted"]  # (two proposals in flight: any order)
    rejected = [n for n in kids if n.meta.get("rejected")]
    failed = [n for n in kids if n.source is None]
    assert run.stop.rule == "budget_evals" and len(rejected) == 1 and len(failed) == 1
    assert rejected[0].error_class == failed[0].error_class == "because" and rejected[0].result is None
    assert any(n.status == "passed" for n in kids)
    # the exhaustion signal stops the search, whatever the text says
    quiet = _run(toy, tmp_path, budget=20, workers=1, operator=_Scripted([Signal.CANDIDATE, Signal.EXHAUSTED]))
    assert quiet.stop.rule == "space_exhausted"
    assert len([n for n in quiet.tree if n.operator == "scripted"]) <= 2


def test_token_budget(toy, tmp_path: Path) -> None:
    run = _run(toy, tmp_path, budget=50, max_tokens=120, operator=_TokenSpender())
    assert run.stop.rule == "budget_tokens"
    assert sum(n.prompt_tokens + n.completion_tokens for n in run.tree) >= 120
    assert len(run.tree) <= 1 + 3 + 2  # 3 proposals reach 150 tokens (+ lookahead in flight)


def test_wall_time(toy, tmp_path: Path) -> None:
    class Slow(FakeEvaluator):
        def score(self, source):
            import time

            time.sleep(0.3)
            return super().score(source)

    run = _run(toy, tmp_path, budget=100, max_wall_s=1.0, evaluator=Slow())
    assert run.stop.rule == "wall_time" and len(run.tree) < 10


def test_broken_evaluator_stops_the_search(toy, tmp_path: Path) -> None:
    from workbench.result import EvalResult, Status

    class Broken(FakeEvaluator):
        def score(self, source):
            if source == TOY_SOURCE:  # the seed passes; every later evaluation loses its worker
                return super().score(source)
            return EvalResult(status=Status.INFRA_ERROR, error="worker lost")

    run = _run(toy, tmp_path, budget=30, evaluator=Broken())
    assert run.stop.rule == "evaluator_failed" and "worker lost" in run.stop.message
    assert len(run.tree) <= 1 + 3 + 3  # the streak of 3, plus what was already in flight (capacity + 1)


def test_shape_subset_reaches_every_job_and_keys_the_memory_apart(toy, tmp_path: Path) -> None:
    """`shapes=` narrows what each evaluation checks; such a run is a different problem for the memory."""
    ev_all, ev_sub = FakeEvaluator(), FakeEvaluator()
    full = _run(toy, tmp_path, budget=2, evaluator=ev_all)
    sub = _run(toy, tmp_path, budget=2, evaluator=ev_sub, shapes=["small"])
    assert ev_all.jobs and all(j.shapes is None for j in ev_all.jobs)
    assert ev_sub.jobs and all(j.shapes == ["small"] for j in ev_sub.jobs)
    assert full.spec_key != sub.spec_key and sub.config.shapes == ["small"]
