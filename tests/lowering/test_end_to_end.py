"""A dozen KernelBench-like references (tests/lowering/specs/kb_*.py, written here) lowered and judged by
the real harness on the CPU: its static policy, its op recorder (only glue aten ops in the forward), its
poisoned allocations (every output written) and its comparison with `Model`."""
from __future__ import annotations

from pathlib import Path

import pytest

from workbench.harness import Harness
from workbench.lowering import lower_spec

SPECS = sorted((Path(__file__).parent / "specs").glob("kb_*.py"))


@pytest.fixture(scope="module")
def harness():
    with Harness(device="cpu") as h:
        yield h


@pytest.mark.parametrize("spec", SPECS, ids=[p.stem for p in SPECS])
def test_lowered_candidate_passes_the_harness(harness: Harness, spec: Path) -> None:
    res = lower_spec(spec)
    assert res.source is not None, res.diagnosis
    out = harness.evaluate(spec, res.source, trials=1, timeout_s=300)
    assert out.correct, f"{out.status.value}: {out.error} {out.violations}"
    assert out.triton_launches > 0


def test_dozen_references() -> None:
    assert len(SPECS) >= 12
