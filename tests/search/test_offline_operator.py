"""The offline tuning operator: reads TUNABLES as data, rewrites only the `NAME = literal` lines."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from workbench.memory import content_hash
from workbench.search.node import Node
from workbench.search.operators import OfflineTuningOperator, OperatorContext, Signal
from workbench.search.tunables import TunablesError, apply_config, parse_tunables

FIX = Path(__file__).parent / "fixtures"
SRC = (FIX / "add_candidate.py").read_text()


def _ctx(*sources: str, seen=frozenset(), seed: int = 0) -> OperatorContext:
    parents = [
        Node(run_id="r", spec_key="s", operator="seed", source=s, status="passed", fitness=1.0)
        for s in sources
    ]
    return OperatorContext(
        spec_path="x",
        spec_source="",
        spec_key="s",
        platform="cpu",
        arch="cpu-interpreter",
        parents=parents,
        seen_hashes=frozenset(seen),
        seed=seed,
    )


def test_parse_reads_choices_current_and_predicate() -> None:
    sp = parse_tunables(SRC)
    assert sp.choices == {"BLOCK_SIZE": [16, 32, 64, 128], "NUM_WARPS": [1, 2]}
    assert sp.current == {"BLOCK_SIZE": 16, "NUM_WARPS": 1}
    assert sp.valid({"BLOCK_SIZE": 32, "NUM_WARPS": 2}) and not sp.valid({"BLOCK_SIZE": 16, "NUM_WARPS": 2})
    assert not sp.valid({"BLOCK_SIZE": 48, "NUM_WARPS": 1})  # not an allowed value


def test_rewrite_touches_only_the_assignment_values() -> None:
    src = 'TUNABLES = {"A": [1, 2], "B": ["x", "y"]}\nA = 1  # keep me\nB = "x"\nC = A\n'
    sp = parse_tunables(src)
    out = apply_config(src, sp, {"A": 2, "B": "y"})
    assert out == 'TUNABLES = {"A": [1, 2], "B": ["x", "y"]}\nA = 2  # keep me\nB = \'y\'\nC = A\n'


def test_mutations_are_valid_new_and_parse() -> None:
    op = OfflineTuningOperator()
    seen = {content_hash(SRC)}
    for seed in range(12):
        prop = op.propose(_ctx(SRC, seen=seen, seed=seed))
        if prop.source is None:
            assert prop.signal is Signal.EXHAUSTED
            break
        ast.parse(prop.source)
        cfg = parse_tunables(prop.source).current
        assert cfg == prop.meta["config"] and parse_tunables(SRC).valid(cfg)
        assert content_hash(prop.source) not in seen
        assert (
            prop.source.replace(f"BLOCK_SIZE = {cfg['BLOCK_SIZE']}", "BLOCK_SIZE = 16").replace(
                f"NUM_WARPS = {cfg['NUM_WARPS']}", "NUM_WARPS = 1"
            )
            == SRC
        )  # nothing else changed
        seen.add(content_hash(prop.source))
    # the valid space has 4 + 3 = 7 configurations: 6 new ones, then exhaustion
    assert len(seen) == 7 and prop.source is None and prop.error_class == "space_exhausted"


def test_crossover_takes_each_tunable_from_a_parent() -> None:
    a = SRC
    b = apply_config(SRC, parse_tunables(SRC), {"BLOCK_SIZE": 128, "NUM_WARPS": 2})
    op = OfflineTuningOperator()
    mixes = set()
    for seed in range(20):
        prop = op.propose(_ctx(a, b, seen={content_hash(a), content_hash(b)}, seed=seed))
        assert prop.operator == "offline-crossover" and prop.source is not None
        mixes.add(tuple(sorted(prop.meta["config"].items())))
    assert (("BLOCK_SIZE", 128), ("NUM_WARPS", 1)) in mixes  # the one mix of the two parents that is new


def test_no_tunables_is_a_recorded_reason() -> None:
    prop = OfflineTuningOperator().propose(_ctx((FIX / "notunables_candidate.py").read_text()))
    assert prop.source is None and prop.error_class == "no_tunables" and "TUNABLES" in prop.diagnosis


def test_bad_declarations() -> None:
    with pytest.raises(TunablesError, match="without a module-level"):
        parse_tunables('TUNABLES = {"A": [1, 2]}\n')
    with pytest.raises(TunablesError, match="non-empty list"):
        parse_tunables('TUNABLES = {"A": []}\nA = 1\n')


def test_predicate_needing_more_than_literals_is_ignored_with_a_reason() -> None:
    src = ('import os\nTUNABLES = {"A": [1, 2]}\nA = 1\n'
           '@decorator\ndef tunables_valid(cfg):\n    return os.sep\n')
    sp = parse_tunables(src)
    assert sp.predicate is not None  # compiles alone (decorator dropped) ...
    assert sp.valid({"A": 2})  # ... needs `os`: ignored, with the reason kept
    assert sp.predicate is None and "os" in sp.predicate_error
    strict = parse_tunables(
        'TUNABLES = {"A": [1, 2]}\nA = 1\ndef tunables_valid(cfg):\n    return cfg["B"]\n'
    )
    assert not strict.valid({"A": 2})  # any other exception rejects the configuration


def test_a_lowered_draft_gets_its_families_points_first_in_order_then_random_moves() -> None:
    """The H200 points each kernel family registers beside its template (`lowering.tune.configs`, best guess
    first) are the first proposals for a lowered draft, each once; random moves follow."""
    from workbench.lowering import lower_spec
    from workbench.lowering.tune import configs

    draft = lower_spec(Path(__file__).parents[1] / "lowering" / "specs" / "kb_linear_relu.py").source
    assert draft is not None
    space = parse_tunables(draft)
    points = [{**space.current, **p} for p in configs(draft, 8)]
    assert len(points) >= 2
    op, seen = OfflineTuningOperator(), {content_hash(draft)}
    for want in points:
        prop = op.propose(_ctx(draft, seen=seen, seed=len(seen)))
        assert prop.meta["family_point"] and parse_tunables(prop.source).current == want, prop.diagnosis
        seen.add(content_hash(prop.source))
    after = op.propose(_ctx(draft, seen=seen, seed=99))
    assert after.source is not None and not after.meta["family_point"]
    assert parse_tunables(after.source).current not in points
    # a kernel the lowering did not write has no family points: random moves from the first proposal
    assert not op.propose(_ctx(SRC, seen={content_hash(SRC)})).meta["family_point"]
