"""Inverse real FFTs of real input (workbench/lowering/fft_real.py) against PyTorch in fp32: irfft / hfft with odd
and even lengths, inputs shortened (slice) and lengthened (zero pad) to n // 2 + 1, every norm, a middle dim;
irfft2 / irfftn / hfft2 / hfftn (their c2c and conj folded into the signs). fp32 only: PyTorch's CPU FFT has no
fp16/bf16 (checked below). A complex input is not this chain and stays unsupported."""
from __future__ import annotations

from pathlib import Path

import pytest
import torch

from tests.lowering.helpers import load_module
from tests.lowering.test_primitives import SPEC, _family
from workbench.lowering import lower_spec
from workbench.lowering import sm90_check as sc

CASES = {
    "one_d": ("x", "torch.fft.irfft(x), torch.fft.irfft(x, n=9, dim=1, norm='ortho'), "
              "torch.fft.irfft(x, n=3, norm='forward'), torch.fft.hfft(x, n=11), torch.fft.hfft(x, dim=0), "
              "torch.fft.hfft(x[:, :2], n=6, norm='ortho')",
              "torch.randn(3, 5, 6, dtype=DT)"),
    "n_d": ("y", "torch.fft.irfft2(y), torch.fft.irfftn(y, s=(4, 7), dim=(0, 2), norm='forward'), "
            "torch.fft.irfftn(y, s=(2, 3, 5)), torch.fft.hfft2(y, s=(3, 8)), "
            "torch.fft.hfftn(y, norm='ortho'), torch.fft.hfftn(y, s=(6, 4), dim=(0, 1), norm='forward')",
            "torch.randn(4, 3, 5, dtype=DT)"),
}


def test_fft_real(tmp_path: Path) -> None:
    _family(tmp_path, "fft_real", "float32", CASES)


def test_fft_low_precision_is_not_an_eager_op() -> None:
    for dt in (torch.float16, torch.bfloat16):
        with pytest.raises(RuntimeError):
            torch.fft.irfft(torch.ones(3, 5, dtype=dt))


def test_complex_input_stays_unsupported(tmp_path: Path) -> None:
    spec = tmp_path / "fft_complex.py"
    spec.write_text(SPEC.format(dt="float32", init="        pass", args="x",
                                expr="torch.fft.irfft(torch.fft.rfft(x))", inputs="torch.randn(3, 8)"))
    res = lower_spec(spec)
    assert res.source is None and res.diagnosis.startswith("unsupported: aten._fft_r2c"), res.diagnosis


def test_fft_real_kernels_compile_for_sm90(tmp_path: Path) -> None:
    spec = tmp_path / "fft_real_sm90.py"
    spec.write_text(SPEC.format(dt="float32", init="        pass", args="x",
                                expr="torch.fft.irfft(x, n=7), torch.fft.hfftn(x, norm='ortho')",
                                inputs="torch.randn(2, 3, 4)"))
    res = lower_spec(spec)
    assert res.source is not None, res.diagnosis
    path = tmp_path / "cand_fft_real_sm90.py"
    path.write_text(res.source)
    cand, ref = load_module(path, "cand_fft_real_sm90"), load_module(spec, "ref_fft_real_sm90")
    torch.manual_seed(0)
    launches = sc.record_launches(cand.ModelNew(), ref.get_inputs())
    assert len(launches) >= 2
    bad = [f.why() for f in sc.compile_launches(res.source, launches) if not f.ok]
    assert not bad, bad
