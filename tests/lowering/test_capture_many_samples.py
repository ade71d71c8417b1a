"""A forward over many samples (an ATen-suite spec: `forward(*tensors)` calling the op on each OpInfo sample):
capture traces it static at once (the per-input dynamic_shapes spec cannot match a `*tensors` signature) and
decomposes it without torch's guard function (guards x inputs string rewrites: 41 s of max_pool1d's 864-sample
lowering under cProfile), and the draft still equals eager on every sample."""
from __future__ import annotations

from pathlib import Path

import pytest
import torch

from tests.lowering.helpers import check_candidate
from workbench.lowering import lower_spec
from workbench.lowering.capture import capture, spec_module

SPEC = '''import torch
import torch.nn as nn

SIZES = [(2, 3, 9), (1, 4, 8), (3, 2, 7), (2, 5, 12), (1, 1, 5), (4, 3, 10)] * 4
CALLS = [dict(kernel_size=k, stride=s, padding=p, ceil_mode=c)
         for k, s, p, c in [(2, 1, 0, False), (3, 2, 1, True), (2, 2, 1, False), (3, 1, 1, True)] * 6]


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, *tensors):
        return tuple(torch.nn.functional.max_pool1d(x, **kw) for x, kw in zip(tensors, CALLS))


def get_inputs():
    return [torch.randn(s) for s in SIZES]


def get_init_inputs():
    return []
'''


@pytest.fixture()
def spec(tmp_path: Path) -> Path:
    path = tmp_path / "many_max_pool1d.py"
    path.write_text(SPEC)
    return path


def test_a_varargs_forward_is_traced_static_once(spec: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls = []
    real = torch.export.export

    def counted(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
        calls.append(kwargs.get("dynamic_shapes"))
        return real(*args, **kwargs)

    monkeypatch.setattr(torch.export, "export", counted)
    cap = capture(spec_module(spec, None))
    assert calls == [None] and cap.dynamic_dims == "none"


def test_decomposition_builds_no_guard_function(spec: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import torch.export._unlift as unlift

    def refuse(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
        raise AssertionError("a guard function was built")

    monkeypatch.setattr(unlift, "_convert_guards_code_to_fn", refuse)
    cap = capture(spec_module(spec, None))
    assert not any(n.op == "call_module" for n in cap.graph.nodes)


def test_the_draft_matches_eager_on_every_sample(spec: Path, tmp_path: Path) -> None:
    res = lower_spec(spec)
    assert res.source is not None, res.diagnosis
    check_candidate(spec, res.source, tmp_path)
