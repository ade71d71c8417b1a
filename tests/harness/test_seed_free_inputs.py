"""A spec whose `get_inputs()` ignores the seed (the ATen suite's fixed OpInfo samples) still gets fresh
values in every timed set (`harness/vary.py`): a candidate that computes once and skips its work while its
inputs have not changed, in Python or inside its kernel (on the GPU: on each replay of the captured graph),
is judged on sets it never computed and fails; an honest one passes, on sets whose domains (acosh's y >= 1, a
valid gather index) the variation kept. On the CPU always, on the GPU under `pytest -m gpu`."""
from __future__ import annotations

from pathlib import Path

import pytest
import torch

from tests.harness.devices import DEVICES
from workbench.harness import Harness
from workbench.harness import vary as _vary
from workbench.result import Status

HERE = Path(__file__).parent / "seed_free"
SPEC = HERE / "spec.py"
SKIPPERS = ["caches_first_output", "skips_in_the_kernel"]


@pytest.fixture(scope="module", params=DEVICES)
def harness(request):
    with Harness(device=request.param) as h:
        yield h


def test_an_honest_candidate_passes_on_varied_sets(harness: Harness) -> None:
    res = harness.evaluate(SPEC, HERE / "honest.py", trials=2, timeout_s=120)
    assert res.status == Status.PASSED, (res.status, res.error[:600], res.violations)
    assert res.fitness > 0


@pytest.mark.parametrize("name", SKIPPERS)
def test_a_candidate_that_skips_work_on_unchanged_inputs_fails(harness: Harness, name: str) -> None:
    res = harness.evaluate(SPEC, HERE / f"{name}.py", trials=2, timeout_s=120)
    assert res.status == Status.INCORRECT, (name, res.status, res.error[:600], res.violations)
    assert res.fitness == 0.0 and "timed round" in res.error, res.error[:600]


def test_the_variation_keeps_domains_and_is_the_same_from_the_same_seed() -> None:
    x = torch.linspace(-2.0, 2.0, 100)
    y = 1.0 + torch.rand(100)
    idx = torch.arange(100)
    half = torch.tensor([0.5, -0.25, 0.0], dtype=torch.bfloat16)
    sets = [x, y, idx, half, 3]
    dirs = _vary.directions(sets)
    assert dirs == [-1, 1, 0, -1, 0]
    a, b, c = _vary.vary(sets, 11, dirs), _vary.vary(sets, 11, dirs), _vary.vary(sets, 12, dirs)
    assert all(torch.equal(p, q) if isinstance(p, torch.Tensor) else p == q for p, q in zip(a, b))
    assert not torch.equal(a[0], c[0]) and not torch.equal(a[1], c[1])
    assert a[2] is idx and a[4] == 3 and a[3].dtype == torch.bfloat16
    for v in (a, c):
        assert (v[0].abs() <= x.abs()).all() and (torch.sign(v[0]) == torch.sign(x)).all()  # toward zero
        assert (v[1] >= y).all() and (v[1] >= 1).all()  # away from zero, acosh's domain kept
        assert v[3][2] == 0
    assert _vary.fingerprint(sets) == _vary.fingerprint([x.clone(), y.clone(), idx.clone(), half.clone(), 3])
    assert _vary.fingerprint(sets) != _vary.fingerprint(a)
