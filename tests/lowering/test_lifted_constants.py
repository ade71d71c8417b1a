"""Tensor constants of the forward (export's lifted constants) become ModelNew's non-persistent buffers:
values exact (inf and nan included), on the inputs' device, out of the state dict; too large ones refused."""
from __future__ import annotations

from pathlib import Path

from tests.lowering.helpers import check_candidate
from workbench.lowering import lower_spec

SPEC = '''import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        c = torch.tensor({values})
        return torch.where(x > 0, x * c, x)


def get_inputs():
    return [torch.randn(3, {n})]


def get_init_inputs():
    return []
'''


def test_constants_without_an_init(tmp_path: Path) -> None:
    spec = tmp_path / "const_no_init.py"
    spec.write_text(SPEC.format(values="[1.5, float('inf'), -float('inf'), float('nan'), -0.0]", n=5))
    res = lower_spec(spec)
    assert res.source is not None, res.diagnosis
    assert "persistent=False" in res.source
    check_candidate(spec, res.source, tmp_path)


def test_a_large_constant_is_refused(tmp_path: Path) -> None:
    spec = tmp_path / "const_large.py"
    spec.write_text(SPEC.format(values="[0.5] * 5000", n=5000))
    res = lower_spec(spec)
    assert res.source is None
    assert res.diagnosis == "unsupported: the forward's tensor constant lifted_tensor_0 has 5000 elements (at most " \
        "4096 are written into the candidate)"
