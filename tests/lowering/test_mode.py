"""mode (workbench/lowering/mode.py) against PyTorch, values and indices, in every float dtype plus int32 and
bool: repeated values (ties in count go to the smaller value, equal values to the last index), every dim, keepdim,
a 0-d input, a row longer than one tile, all elements distinct (the smallest wins)."""
from __future__ import annotations

from pathlib import Path

import pytest
import torch

from tests.lowering.helpers import load_module
from tests.lowering.test_primitives import FLOATS, SPEC, _family

# rows shorter than 16: PyTorch's CPU sort is then stable, so the index among equal values is defined
CASES = {
    "small": ("x", "torch.mode(x), torch.mode(x, 0), torch.mode(x, 1, True), torch.mode(x[0, 0, 0]), "
              "torch.mode(x.transpose(0, 2), -2)", "torch.randint(-2, 3, (3, 5, 7)).to(DT)"),
    "distinct": ("y", "torch.mode(y), torch.mode(y, 0, keepdim=True)", "torch.randperm(150).reshape(10, 15).to(DT)"),
}


@pytest.mark.parametrize("dt", (*FLOATS, "int32", "bool"))
def test_mode(tmp_path: Path, dt: str) -> None:
    cases = dict(CASES)
    if dt == "bool":  # 150 distinct values do not fit a bool
        cases.pop("distinct")
    _family(tmp_path, "mode", dt, cases)


def test_mode_kernels_compile_for_sm90(tmp_path: Path) -> None:
    from workbench.lowering import lower_spec
    from workbench.lowering import sm90_check as sc

    spec = tmp_path / "mode_sm90.py"
    spec.write_text(SPEC.format(dt="float16", init="        pass", args="x", expr="torch.mode(x, 1)",
                                inputs="torch.randint(-2, 3, (3, 70)).to(DT)"))
    res = lower_spec(spec)
    assert res.source is not None, res.diagnosis
    path = tmp_path / "cand_mode_sm90.py"
    path.write_text(res.source)
    cand, ref = load_module(path, "cand_mode_sm90"), load_module(spec, "ref_mode_sm90")
    torch.manual_seed(0)
    launches = sc.record_launches(cand.ModelNew(), ref.get_inputs())
    assert len(launches) == 2
    bad = [f.why() for f in sc.compile_launches(res.source, launches) if not f.ok]
    assert not bad, bad
