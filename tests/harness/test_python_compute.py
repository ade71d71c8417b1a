"""Per-element Python compute on values a forward takes out of its tensors (issue 32): one candidate per
spelling in python_compute/ (`item`, `float(x[i])`, `int()` of the bits, iteration, the printed text,
`tolist`, `numpy`, a pickle's bytes), each computing vector_add correctly in Python floats and handing the
result to a Triton copy, so that only the rule on values read into Python per call
(`opcheck.MAX_VALUES_PER_CALL`) stops it.

Each runs with the static policy on, with it off (the run-time allow-list alone), and with both off
(`WB_GUARDS=off`): the recorder's count must hold on its own, whatever spelling reached the values.
"""
from __future__ import annotations

import re
from pathlib import Path

import pytest
import torch

from tests.harness.devices import DEVICES, sized
from workbench.harness import Harness, opcheck
from workbench.result import Status

HERE = Path(__file__).parent
SPEC = HERE.parents[1] / "examples" / "vector_add" / "spec.py"
CASES = sorted((HERE / "python_compute").glob("*.py"))
# Spellings the policy and the run-time allow-list refuse by name before the count is reached (banned Tensor
# methods, a file written): the rule they break there; with both off the count catches them too.
REFUSED_BY_NAME = {"tolist": "forbidden_torch_op", "numpy": "forbidden_torch_op", "pickles": "file_write"}


def _expectation(path: Path) -> tuple[str, str | None]:
    m = re.search(r"EXPECT status=(\w+)(?: violation=(\S+))?", path.read_text())
    assert m, f"{path.name} states no expectation"
    return m.group(1), m.group(2)


@pytest.fixture(scope="module", params=DEVICES)
def harness(request):
    with Harness(device=request.param) as h:
        yield h


@pytest.fixture(scope="module", params=DEVICES)
def unguarded(request):
    mp = pytest.MonkeyPatch()
    mp.setenv("WB_GUARDS", "off")  # read when the server starts
    try:
        with Harness(device=request.param) as h:
            yield h
    finally:
        mp.undo()


def _check(res, violation: str) -> None:
    assert res.status == Status.REJECTED and res.fitness == 0.0, (res.status, res.error[:400], res.violations)
    assert any(v.startswith(violation) for v in res.violations), res.violations


@pytest.mark.parametrize("path", CASES, ids=[p.stem for p in CASES])
def test_python_compute_is_refused_under_the_policy(harness: Harness, path: Path) -> None:
    res = harness.evaluate(SPEC, path, **sized(harness.device, 1))
    if path.stem in REFUSED_BY_NAME:
        assert res.status == Status.REJECTED and res.error.startswith("static policy:"), (res.status, res.error)
    else:
        _check(res, "python_compute")


@pytest.mark.parametrize("path", CASES, ids=[p.stem for p in CASES])
def test_python_compute_is_refused_at_run_time(harness: Harness, path: Path) -> None:
    status, violation = _expectation(path)
    res = harness.evaluate(SPEC, path, **sized(harness.device, 1), policy=False)
    _check(res, REFUSED_BY_NAME.get(path.stem, violation or ""))
    assert status == "rejected"


@pytest.mark.parametrize("path", CASES, ids=[p.stem for p in CASES])
def test_python_compute_is_counted_with_every_other_line_off(unguarded: Harness, path: Path) -> None:
    """No policy, no run-time allow-list: `tolist` and `numpy` reach the values too, and are counted."""
    res = unguarded.evaluate(SPEC, path, **sized(unguarded.device, 1), policy=False)
    _check(res, "python_compute")


# -- the count itself, in this process --------------------------------------------------------------------
def test_values_read_into_python_are_counted_per_call_and_only_in_the_forward() -> None:
    opcheck.install_host_read_counters()
    x = torch.arange(100, dtype=torch.float32)
    bound = opcheck.MAX_VALUES_PER_CALL
    rec = opcheck.OpRecorder()
    with rec:
        for i in range(bound):  # exactly the bound in each of three calls: allowed
            float(x[i])
        for _ in range(2):
            opcheck.next_call()
            [int(v) for v in x[:bound]]
    assert rec.most_values == bound and rec.python_compute() == []
    for spelling in (lambda: x.tolist(), lambda: str(x), lambda: x.numpy(), lambda: f"{x[:bound + 1]}",
                     lambda: [x[i].item() for i in range(bound + 1)], lambda: [bool(v) for v in x]):
        rec = opcheck.OpRecorder()
        with rec:
            spelling()
        assert rec.python_compute(), rec.most_values
    rec = opcheck.OpRecorder()
    with rec:
        opcheck.STATE.depth += 1  # inside Triton's launch: the interpreter's own reads are not the forward's
        try:
            x.tolist()
            [float(v) for v in x]
        finally:
            opcheck.STATE.depth -= 1
    assert rec.most_values == 0
    assert x.tolist()[:2] == [0.0, 1.0] and opcheck.STATE.recorder is None  # no recorder: nothing counted


def test_each_output_may_be_sized_by_one_value_read() -> None:
    """The bound grows by `VALUES_PER_OUTPUT` per output tensor (an ATen spec of 528 `unique` calls sizes each
    of its outputs by one count), never by the values themselves."""
    opcheck.install_host_read_counters()
    x = torch.arange(200, dtype=torch.float32)
    outputs = 100
    allowed = opcheck.MAX_VALUES_PER_CALL + opcheck.VALUES_PER_OUTPUT * outputs
    rec = opcheck.OpRecorder()
    with rec:
        for i in range(allowed):
            int(x[i])
    assert rec.python_compute(outputs) == [] and rec.python_compute(0)
    with rec:
        int(x[0])
    assert rec.python_compute(outputs) == [f"python_compute:{allowed + 1}"]


def test_a_forward_of_many_outputs_sized_by_counts_passes(harness: Harness) -> None:
    """40 outputs, each sized by one count read on the host (past the constant alone): honest, as the
    lowering's data-dependent ops are; `pads_outputs` (python_compute/) is the attack on this allowance."""
    specs = HERE / "specs"
    res = harness.evaluate(specs / "rows_by_count_spec.py", specs / "rows_by_count_candidate.py",
                           **sized(harness.device, 1))
    assert res.status == Status.PASSED, (res.status, res.error[:400], res.violations)
