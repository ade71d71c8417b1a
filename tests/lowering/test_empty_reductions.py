"""Reductions over a tensor with no elements (OpInfo's empty samples): the block sizes and the grid stay
defined (a row group of 0 once divided by zero in every lowered softmax), and the outputs match PyTorch."""
from __future__ import annotations

from pathlib import Path

import torch

from tests.lowering.helpers import flat, load_module
from workbench.lowering import lower_spec

SPEC = '''import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x, e, f):
        return (torch.softmax(x, dim=1), torch.softmax(e, dim=1), e.amax(dim=1), x.sum(dim=1),
                torch.softmax(f, dim=-1), torch.softmax(f, dim=0))


def get_inputs():
    return [torch.randn(2, 3, 5), torch.randn(0, 3, 5), torch.randn(5, 0, 0)]


def get_init_inputs():
    return []
'''


def test_softmax_and_reductions_of_an_empty_tensor(tmp_path: Path) -> None:
    spec = tmp_path / "empty_red.py"
    spec.write_text(SPEC)
    res = lower_spec(spec)
    assert res.source is not None, res.diagnosis
    ref = load_module(spec, "ref_empty_red")
    path = tmp_path / "cand_empty_red.py"
    path.write_text(res.source)
    cand = load_module(path, "cand_empty_red")
    torch.manual_seed(0)
    inputs = ref.get_inputs()
    with torch.no_grad():
        want = flat(ref.Model()(*inputs))
        got = flat(cand.ModelNew()(*inputs))
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.shape == w.shape and g.dtype == w.dtype
        torch.testing.assert_close(g, w, atol=1e-5, rtol=1e-5)
