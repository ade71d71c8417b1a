"""unique (flat and along a dim), unique_consecutive (workbench/lowering/uniques.py) against PyTorch, values,
inverse and counts, in every float dtype plus int32 and bool: repeated values (small integers), a nan, -0.0, a
0-d input, an empty slice dim, more rows than one rank tile."""
from __future__ import annotations

from pathlib import Path

import pytest
import torch

from tests.lowering.helpers import load_module
from tests.lowering.test_primitives import FLOATS, SPEC, _family
from workbench.lowering import lower_spec
from workbench.lowering import sm90_check as sc

SMALL = "torch.randint(-2, 3, ({},)).to(DT)"  # few distinct values: long groups
U = "return_inverse=True, return_counts=True"
CASES = {
    "flat": ("x, z", f"torch.unique(x, {U}), torch.unique(x[0], sorted=False), torch.unique(z, {U}), "
             f"torch.unique(x[0, 0, 0], {U}), torch.unique_consecutive(x, {U}), torch.unique_consecutive(z)",
             f"{SMALL.format('3, 5, 7')}, {SMALL.format('77')}"),
    "dims": ("y", f"torch.unique(y, dim=0, {U}), torch.unique(y, dim=1, {U}), torch.unique(y, dim=-1), "
             f"torch.unique(y[:, :0], dim=1, {U}), torch.unique_consecutive(y, dim=0, {U}), "
             f"torch.unique_consecutive(y.transpose(0, 2), dim=2, {U})",
             "torch.randint(0, 2, (7, 3, 2)).to(DT)"),
}


@pytest.mark.parametrize("dt", (*FLOATS, "int32", "bool"))
def test_uniques(tmp_path: Path, dt: str) -> None:
    _family(tmp_path, "uniques", dt, CASES)


def test_unique_nan_and_signed_zero(tmp_path: Path) -> None:
    """Each nan its own group, after every number; -0.0 equal to 0.0."""
    _family(tmp_path, "unique_nan", "float32", {"nan": (
        "x", f"torch.unique(x, {U}), torch.unique_consecutive(x, {U})",
        "torch.tensor([1.0, float('nan'), -0.0, 0.0, float('nan'), 1.0, -2.0])")})


def test_unique_kernels_compile_for_sm90(tmp_path: Path) -> None:
    spec = tmp_path / "unique_sm90.py"
    spec.write_text(SPEC.format(dt="float16", init="        pass", args="x",
                                expr=f"torch.unique(x, {U}), torch.unique(x, dim=1, {U}), "
                                f"torch.unique_consecutive(x, {U})",
                                inputs=SMALL.format("5, 7")))
    res = lower_spec(spec)
    assert res.source is not None, res.diagnosis
    path = tmp_path / "cand_unique_sm90.py"
    path.write_text(res.source)
    cand, ref = load_module(path, "cand_unique_sm90"), load_module(spec, "ref_unique_sm90")
    torch.manual_seed(0)
    launches = sc.record_launches(cand.ModelNew(), ref.get_inputs())
    assert len(launches) >= 10
    bad = [f.why() for f in sc.compile_launches(res.source, launches) if not f.ok]
    assert not bad, bad
