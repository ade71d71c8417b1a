"""Honest candidates pass, with a positive fitness equal to baseline / candidate median time."""
from __future__ import annotations

from pathlib import Path

import pytest

from workbench.harness import Harness
from workbench.result import Status

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = sorted(p.parent.name for p in (ROOT / "examples").glob("*/candidate.py"))


@pytest.fixture(scope="module")
def harness():
    with Harness(device="cpu") as h:
        yield h


@pytest.mark.parametrize("name", EXAMPLES)
def test_bundled_example_passes(harness: Harness, name: str) -> None:
    res = harness.evaluate(ROOT / "examples" / name / "spec.py", ROOT / "examples" / name / "candidate.py")
    assert res.status == Status.PASSED, res.error
    assert res.correct and res.violations == []
    assert res.triton_launches > 0
    assert res.runtime_us and res.baseline_runtime_us
    assert res.fitness == pytest.approx(res.baseline_runtime_us / res.runtime_us)
    assert res.max_abs_err is not None and res.max_abs_err < 1e-3
    assert res.timings_s["harness_overhead"] < 30


def test_named_shapes_are_checked(harness: Harness) -> None:
    spec = ROOT / "examples" / "vector_add" / "spec.py"
    res = harness.evaluate(spec, ROOT / "examples" / "vector_add" / "candidate.py", trials=2)
    assert res.shapes == ["default", "small_odd"]


def test_overrides_change_the_problem(harness: Harness) -> None:
    spec = ROOT / "examples" / "row_softmax" / "spec.py"
    res = harness.evaluate(spec, ROOT / "examples" / "row_softmax" / "candidate.py", trials=1,
                           overrides={"M": 3, "N": 5})
    assert res.passed, res.error


def test_wrong_tolerance_kernel_is_incorrect(harness: Harness, tmp_path: Path) -> None:
    """A kernel off by a small but real amount is caught with a useful mismatch report."""
    src = (ROOT / "examples" / "vector_add" / "candidate.py").read_text()
    bad = tmp_path / "off_by_eps.py"
    bad.write_text(src.replace("a + b * scale", "a + b * scale + 1e-3"))
    res = harness.evaluate(ROOT / "examples" / "vector_add" / "spec.py", bad, trials=1)
    assert res.status == Status.INCORRECT
    assert "elements differ" in res.error and "first at index" in res.error
    # the fp64 referee beside the verdict: eager is exact here, the candidate 1e-3 off, so not as good
    ref = res.details["referee"]
    assert ref["eager_fp64_err"] < 1e-5 and ref["candidate_fp64_err"] == pytest.approx(1e-3, rel=0.01)
    assert ref["as_good_as_eager"] is False


def test_candidate_stdout_is_not_the_verdict(harness: Harness) -> None:
    res = harness.evaluate(ROOT / "examples" / "vector_add" / "spec.py",
                           Path(__file__).parent / "exploits" / "prints_verdict.py", trials=1)
    assert "FITNESS_SCORE: 999" in res.stdout_tail
    assert res.fitness == 0.0


def test_data_dependent_input_sizes(harness: Harness) -> None:
    """Inputs whose size depends on the random draw cannot be refilled in place: fresh sets are used."""
    specs = Path(__file__).parent / "specs"
    res = harness.evaluate(specs / "jagged_spec.py", specs / "jagged_candidate.py")
    assert res.passed, res.error


def test_stdlib_helpers_are_outside_the_allow_list_in_the_text_and_at_run_time(harness: Harness) -> None:
    """enum, logging, warnings and namedtuple are routes to frames and module attributes the allow-list does
    not admit (a second red team used logging's and typing's): the static policy refuses them, and with it
    off the run-time allow-list (`restrict.py`) refuses the first import, before the module runs."""
    spec = ROOT / "examples" / "vector_add" / "spec.py"
    cand = Path(__file__).parent / "specs" / "stdlib_candidate.py"
    res = harness.evaluate(spec, cand, trials=2)
    assert res.status == Status.REJECTED and res.error.startswith("static policy:"), res.error
    assert any(v.startswith(("import:import enum", "forbidden_introspection:import logging")) for v in res.violations)
    res = harness.evaluate(spec, cand, trials=2, policy=False)
    assert res.status == Status.REJECTED and res.violations == ["import:enum"], \
        (res.status, res.error, res.violations)


CASE_STUDIES = ["conv1d", "event_truncate", "mapid", "mbdt", "optimized_fm", "pffn"]


@pytest.mark.parametrize("case", CASE_STUDIES)
def test_case_study_kernel_passes(harness: Harness, case: str) -> None:
    """The hand-written case-study kernels pass the static policy and the sandbox (no false positive)."""
    d = ROOT / "case_studies" / case
    res = harness.evaluate(d / "spec.py", d / "kernel.py", trials=1, timeout_s=600)
    assert res.status == Status.PASSED, (res.error[:800], res.violations)
    assert res.triton_launches > 0 and res.isolation.get("enforced") is not False
