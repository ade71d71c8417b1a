"""Selection-policy arithmetic (greedy, MCTS-UCT, evolutionary islands) on a deterministic fake evaluator.

These tests are about the policies' bookkeeping only; tests with real kernels use the real harness.
"""

from __future__ import annotations

import math
import random
from pathlib import Path

import pytest

import workbench
from tests.search.fakes import TOY_SOURCE, TOY_SPEC, FakeEvaluator, toy_fitness
from workbench.result import EvalResult, Status
from workbench.search.node import Node, Tree
from workbench.search.policies import EvolvePolicy, GreedyPolicy, MCTSPolicy, make_policy, reward


def _done(tree: Tree, fit: float, parents: list[str] = (), *, island=None, ok: bool = True) -> Node:
    n = Node(
        run_id="r",
        spec_key="s",
        operator="seed" if not parents else "offline",
        parents=list(parents),
        source=f"# {len(tree)}\n",
        seq=len(tree),
        island=island,
    )
    tree.add(n)
    res = (
        EvalResult(status=Status.PASSED, fitness=fit, speedup=fit, correct=True)
        if ok
        else EvalResult(status=Status.INCORRECT, error="mismatch")
    )
    n.apply_result(res, "diag")
    return n


def test_greedy_expands_the_best_and_repairs_when_nothing_passed() -> None:
    t = Tree()
    p = GreedyPolicy(can_draft=True)
    assert p.select(t).kind == "draft"  # empty graph + LLM: draft from the spec
    bad = _done(t, 0, ok=False)
    assert p.select(t).parents == [bad]  # nothing passed: repair the latest failure
    a = _done(t, 1.2, [bad.id])
    b = _done(t, 1.9, [a.id])
    _done(t, 1.1, [b.id])
    assert p.select(t).parents == [b]
    assert GreedyPolicy(can_draft=False).select(Tree()) is None  # offline tuner: wait for seeds


def test_mcts_backs_up_visits_and_rewards_along_the_chain() -> None:
    t = Tree()
    p = MCTSPolicy(c=0.7)
    s = _done(t, 1.0)
    p.observe(s, t)
    sel = p.select(t)
    assert sel.parents == [s] and p.virtual[s.id] == 1.0 and p.virtual[p.ROOT] == 1.0
    c = _done(t, 3.0, [s.id])
    p.observe(c, t)
    assert p.virtual[s.id] == 0.0  # the virtual loss is returned
    assert p.visits[s.id] == 2 and p.visits[c.id] == 1 and p.visits[p.ROOT] == 2
    assert p.value[s.id] == pytest.approx(reward(s) + reward(c)) == pytest.approx(0.5 + 0.75)
    # UCT(c | s) = Q + c * sqrt(ln N(s) / N(c))
    assert p.uct(c.id, s.id) == pytest.approx(0.75 + 0.7 * math.sqrt(math.log(2) / 1))


def test_mcts_progressive_widening_then_descends_by_uct() -> None:
    t = Tree()
    p = MCTSPolicy(c=0.0)  # pure exploitation makes the descent predictable
    s = _done(t, 1.0)
    p.observe(s, t)
    assert p.select(t).parents == [s]
    good = _done(t, 4.0, [s.id])
    p.observe(good, t)
    # N(s)=2 allows int(sqrt 2) = 1 child: descend to the only child, a leaf, and expand it
    sel = p.select(t)
    assert sel.parents == [good]
    p.release(sel, t)  # a discarded proposal returns its virtual visits
    assert p.virtual[good.id] == 0.0 and p.virtual[s.id] == 0.0
    for _ in range(2):  # N(s) grows to 4: room for a second child of s
        k = _done(t, 0.5, [s.id])
        p.observe(k, t)
    assert p._allowed_children(p._n(s.id)) == 2
    sel = p.select(t)
    assert sel.parents[0].id in {good.id}  # UCT with c=0 follows the best mean reward


def test_mcts_virtual_loss_spreads_concurrent_selections() -> None:
    t = Tree()
    p = MCTSPolicy(c=1.0)
    s = _done(t, 1.0)
    p.observe(s, t)
    for fit in (2.0, 2.0):
        k = _done(t, fit, [s.id])
        p.observe(k, t)
    first = p.select(t).parents[0]
    second = p.select(t).parents[0]
    assert first.id != second.id  # the first pick's virtual visit deflects the second


def test_evolve_islands_tournament_migration_crossover() -> None:
    t = Tree()
    p = EvolvePolicy(
        rng=random.Random(3),
        islands=2,
        tournament=2,
        population=3,
        migration_every=4,
        crossover_rate=1.0,
        crossover=True,
    )
    s1, s2 = _done(t, 1.0), _done(t, 2.0)
    p.observe(s1, t)
    p.observe(s2, t)
    assert p.islands == [[s1.id], [s2.id]]  # seeds spread over the islands
    sel = p.select(t)
    assert sel.island == 0 and sel.parents == [s1]  # one member: no crossover partner yet
    kid = _done(t, 5.0, [s1.id], island=0)
    p.observe(kid, t)
    sel = p.select(t)
    assert sel.island == 1
    kid2 = _done(t, 0.5, [s2.id], island=1)
    p.observe(kid2, t)  # 4th finished node: migration
    assert p.migrations == [(0, 1, kid.id), (1, 0, s2.id)]
    assert kid.id in p.islands[1]
    sel = p.select(t)  # island 0: crossover of two passing members
    assert sel.kind == "crossover" and sel.island == 0 and len({n.id for n in sel.parents}) == 2
    for _ in range(5):  # populations are capped, fittest kept
        p.observe(_done(t, 9.0, [kid.id], island=0), t)
    assert len(p.islands[0]) == 3 and all(t[i].fitness == 9.0 for i in p.islands[0])


def test_tournament_prefers_the_fitter() -> None:
    t = Tree()
    p = EvolvePolicy(rng=random.Random(0), islands=1, tournament=4, population=10)
    nodes = [_done(t, f) for f in (0.1, 0.2, 3.0, 0.3)]
    for n in nodes:
        p.observe(n, t)
    assert p.select(t).parents == [nodes[2]]  # a tournament of the whole island returns its best


def test_unknown_policy() -> None:
    with pytest.raises(ValueError, match="unknown policy 'beam'"):
        make_policy("beam")


@pytest.mark.parametrize("policy", ["greedy", "mcts", "evolve"])
def test_each_policy_improves_on_the_toy_landscape(tmp_path: Path, policy: str) -> None:
    (tmp_path / "spec.py").write_text(TOY_SPEC)
    (tmp_path / "cand.py").write_text(TOY_SOURCE)
    ev = FakeEvaluator(capacity=2)
    run = workbench.optimize(
        tmp_path / "spec.py",
        seeds=[tmp_path / "cand.py"],
        policy=policy,
        budget=12,
        evaluator=ev,
        run_dir=tmp_path / "runs",
        progress=False,
        device="cpu",
        rng_seed=1,
    )
    seed_fit = toy_fitness({"BLOCK": 16, "WARPS": 1})
    assert run.stop.rule == "budget_evals"
    assert len(run.tree) == 13 and len(ev.jobs) == 13  # the seed + 12, each evaluated once
    assert len({n.source for n in run.tree}) == 13  # no duplicate candidates
    assert run.best.fitness > seed_fit and run.improvement > 1.5
    for n in run.tree:  # every candidate respects tunables_valid
        if n.operator != "seed":
            cfg = n.meta["config"]
            assert cfg["BLOCK"] * cfg["WARPS"] <= 4096
    if policy == "evolve":
        assert any(n.island is not None for n in run.tree)
