"""Achieved shares of the H200's ceilings (workbench/lowering/roofline.py): bytes and flops from the captured
graph, checked by hand on small specs."""
from __future__ import annotations

from pathlib import Path

import pytest

from workbench.lowering.roofline import Work, achieved_share, estimate_work

SPEC = '''import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
{init}

    def forward(self, x):
        return {expr}


def get_inputs():
    return [torch.randn({shape})]


def get_init_inputs():
    return []
'''


def _spec(tmp_path: Path, name: str, expr: str, shape: str, init: str = "pass") -> Path:
    p = tmp_path / f"{name}.py"
    p.write_text(SPEC.format(init="        " + init, expr=expr, shape=shape))
    return p


def test_a_pointwise_forward_is_its_input_and_output_bytes(tmp_path: Path) -> None:
    w = estimate_work(_spec(tmp_path, "relu", "torch.relu(x) * 2", "64, 1000"))
    assert w.bytes == 2 * 64 * 1000 * 4 and w.dtype == "float32"
    assert w.flops == 2 * 64 * 1000          # one per output element of relu and of mul
    s = achieved_share(w, time_us=w.bytes / 4300e9 * 1e6)   # exactly the copy bandwidth's time
    assert s.bound == "memory" and s.share == pytest.approx(1.0)


def test_a_linear_layer_counts_its_macs_and_its_weights(tmp_path: Path) -> None:
    w = estimate_work(_spec(tmp_path, "lin", "self.l(x)", "128, 256", "self.l = nn.Linear(256, 512)"))
    assert w.flops >= 2 * 128 * 256 * 512
    assert w.bytes == 4 * (128 * 256 + 512 * 256 + 512 + 128 * 512)


def test_a_convolution_counts_channels_a_group_times_taps(tmp_path: Path) -> None:
    w = estimate_work(_spec(tmp_path, "conv", "self.c(x)", "2, 4, 10, 10",
                            "self.c = nn.Conv2d(4, 6, 3, groups=2, bias=False)"))
    assert w.flops == 2 * (2 * 6 * 8 * 8) * 2 * 9
    s = achieved_share(Work(flops=67e12 * 1e-3, bytes=1.0, dtype="float32"), time_us=1000.0)
    assert s.bound == "compute" and s.share == pytest.approx(1.0)       # fp32, TF32 off: the FMA peak
    assert achieved_share(Work(67e12 * 1e-3, 1.0, "float32"), 1000.0, tf32=True).flop_share < 0.2


def test_time_must_be_positive() -> None:
    with pytest.raises(ValueError):
        achieved_share(Work(1.0, 1.0, "float32"), 0.0)
