"""histc (workbench/lowering/histc.py) against PyTorch in every float dtype: a given range (values outside it,
values on its edges and on inner bin edges), the range from the data (min == max), a constant input (the data's
range widened by 1), one bin, a 0-d input, nan and inf (never counted)."""
from __future__ import annotations

from pathlib import Path

import pytest
import torch

from tests.lowering.helpers import load_module
from tests.lowering.test_primitives import FLOATS, SPEC, _family
from workbench.lowering import lower_spec
from workbench.lowering import sm90_check as sc

EDGY = "(torch.randint(-24, 25, ({},)) / 4).to(DT)"  # quarters: many values exactly on bin edges
CASES = {
    "given": ("x", "torch.histc(x, bins=7, min=-3, max=4), torch.histc(x, bins=1, min=0, max=10), "
              "torch.histc(x[0, 0], bins=12, min=-6, max=6), torch.histc(x * 0 + 2, bins=3, min=2, max=2)",
              EDGY.format("3, 5, 7")),
    "data": ("y", "torch.histc(y), torch.histc(y, bins=5), torch.histc(y[0, 0], bins=4, min=1, max=1)",
             "torch.randn(4, 37).to(DT)"),
}


@pytest.mark.parametrize("dt", FLOATS)
def test_histc(tmp_path: Path, dt: str) -> None:
    _family(tmp_path, "histc", dt, CASES)


def test_histc_nan_inf(tmp_path: Path) -> None:
    _family(tmp_path, "histc_nan", "float32", {"nan": (
        "x", "torch.histc(x, bins=4, min=-2, max=2)",
        "torch.tensor([float('nan'), float('inf'), -float('inf'), -2.0, 2.0, 0.0, 1.9999])")})


def test_histc_kernels_compile_for_sm90(tmp_path: Path) -> None:
    spec = tmp_path / "histc_sm90.py"
    spec.write_text(SPEC.format(dt="bfloat16", init="        pass", args="x",
                                expr="torch.histc(x, bins=7, min=-3, max=4), torch.histc(x, bins=5)",
                                inputs=EDGY.format("5, 7")))
    res = lower_spec(spec)
    assert res.source is not None, res.diagnosis
    path = tmp_path / "cand_histc_sm90.py"
    path.write_text(res.source)
    cand, ref = load_module(path, "cand_histc_sm90"), load_module(spec, "ref_histc_sm90")
    torch.manual_seed(0)
    launches = sc.record_launches(cand.ModelNew(), ref.get_inputs())
    assert len(launches) >= 3
    bad = [f.why() for f in sc.compile_launches(res.source, launches) if not f.ok]
    assert not bad, bad
