"""The fusion-family registry (workbench/lowering/families.py): each family registered where it is defined,
each group claimed by exactly one, and the lowering importing nothing of the search above it."""
from __future__ import annotations

from pathlib import Path

import pytest

from tests.test_imports import _graph
from workbench.lowering import families, tune
from workbench.lowering.capture import capture, spec_module
from workbench.lowering.graph import rewrite_addmm
from workbench.lowering.partition import partition

SPECS = Path(__file__).parent / "specs"


def test_the_six_fusion_families_are_registered_by_their_own_modules() -> None:
    fams = {f.name: f for f in families.families()}
    assert set(fams) == {"pointwise", "reduction", "matmul", "int_matmul", "conv", "softmax"}
    where = {name: f.make.__module__ for name, f in fams.items()}
    assert where["conv"] == "workbench.lowering.conv" and where["matmul"] == "workbench.lowering.templates"
    assert where["int_matmul"] == "workbench.lowering.int_matmul"
    names = [f.name for f in families.families()]
    assert names.index("int_matmul") < names.index("matmul")  # integer operands claimed before the float family
    assert where["softmax"] == "workbench.lowering.softmax"
    assert fams["conv"].dot and fams["matmul"].dot and not fams["reduction"].dot
    assert "MM_PRECISION" in fams["conv"].tunables_for("ieee") and \
        "MM_PRECISION" not in fams["conv"].tunables_for("tf32")


def test_the_tuner_space_is_the_registered_one_in_merge_order() -> None:
    sp = tune.space()
    # matmul's MM_PRECISION wins a merge: no space registered after it names a tunable of its own
    order = list(sp)
    assert order[0] == "pointwise"
    later = {name for space in order[order.index("matmul") + 1:] for name in sp[space][0]}
    assert not later & set(sp["matmul"][0]), later
    assert {"conv", "depthwise", "reduction", "scan", "pool"} <= set(sp)


def test_a_duplicate_family_name_is_refused() -> None:
    fam = next(f for f in families.families() if f.name == "matmul")
    with pytest.raises(ValueError, match="registered twice"):
        families.register_family(families.Family("matmul", "other", fam.make, ()))


@pytest.mark.parametrize("spec, expected", [("kb_conv_bn_relu.py", {"conv", "reduction"}),
                                            ("mlp_softmax.py", {"matmul", "softmax"}),
                                            ("kb_argmax_logsumexp.py", {"reduction"})])
def test_every_group_is_claimed_by_exactly_one_family(spec: str, expected: set[str]) -> None:
    cap = capture(spec_module(SPECS / spec, None))
    graph = cap.graph
    rewrite_addmm(graph)
    groups = {id(g): g for g in partition(graph).values()}
    claimed = {}
    for g in groups.values():
        owners = [f.name for f in families.families() if f.claims(g)]
        assert len(owners) == 1, (g.members, owners)
        claimed[owners[0]] = claimed.get(owners[0], 0) + 1
    assert expected <= set(claimed), claimed


def test_the_lowering_imports_nothing_of_the_search() -> None:
    graph = _graph(("workbench",))
    up = sorted(f"{m} -> {d}" for m, deps in graph.items() if m.startswith("workbench.lowering")
                for d in deps if d.startswith("workbench.search"))
    assert not up, up
    assert "workbench.tunables" in graph["workbench.lowering.tune"]
