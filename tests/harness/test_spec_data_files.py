"""A spec whose `get_inputs()` reads a data file beside it (the ATen suite's OpInfo samples): the confined
candidate process cannot see that file (on the GPU, when the candidate made its inputs from seeds, every ATen
problem once failed). The reference makes every input now (`inbox.py`), in its own process, where the file
is in sight: such a spec's inputs are made on the device and shared like any other's."""
from __future__ import annotations

from pathlib import Path

import torch

from workbench.harness import Harness
from workbench.result import Status

ROOT = Path(__file__).resolve().parents[2]
CANDIDATE = ROOT / "examples" / "vector_add" / "candidate.py"

_SPEC = '''
from pathlib import Path

import torch
import torch.nn as nn

N = 4099
_DATA = Path(__file__).with_name("a.pt")


class Model(nn.Module):
    def __init__(self, scale):
        super().__init__()
        self.scale = scale

    def forward(self, a, b):
        return a + b * self.scale


def get_inputs():
    return [torch.load(_DATA), torch.randn(N)]


def get_init_inputs():
    return [0.5]
'''


def test_inputs_read_from_a_file_beside_the_spec_are_made_by_the_reference(tmp_path: Path, monkeypatch) -> None:
    spec = tmp_path / "spec.py"
    spec.write_text(_SPEC)
    torch.save(torch.randn(4099), tmp_path / "a.pt")
    monkeypatch.setenv("WB_DEVICE_INPUTS", "on")  # the GPU's default, on the CPU
    with Harness(device="cpu") as h:
        res = h.evaluate(spec, CANDIDATE, trials=2)
    assert res.status == Status.PASSED, (res.status, res.error)
    assert res.details.get("inputs") == "made on the device", res.details
    assert "inputs_staged" not in res.details, res.details
