"""repeat_interleave with tensor repeats (workbench/lowering/repeat_interleave.py) against PyTorch in every float
dtype plus int64: zero repeats, one repeat broadcast along a dim, output_size given, repeats alone (the indices),
more runs than one block."""
from __future__ import annotations

from pathlib import Path

import pytest
import torch

from tests.lowering.helpers import load_module
from tests.lowering.test_primitives import FLOATS, SPEC, _family

CASES = {
    "ri": ("x, r", "torch.repeat_interleave(x, r, dim=1), torch.repeat_interleave(x, torch.tensor([3]), dim=2), "
           "torch.repeat_interleave(x[0, 0], torch.tensor([1, 0, 4, 2, 0, 1, 3]), dim=0, output_size=11), "
           "torch.repeat_interleave(r), torch.repeat_interleave(x, 2, dim=0), torch.repeat_interleave(r * 0)",
           "torch.randn(2, 5, 7).to(DT), torch.tensor([2, 0, 1, 3, 1])"),
    "long": ("s", "torch.repeat_interleave(s)", "torch.randint(0, 4, (3000,))"),
}


@pytest.mark.parametrize("dt", (*FLOATS, "int64"))
def test_repeat_interleave(tmp_path: Path, dt: str) -> None:
    _family(tmp_path, "repeat_interleave", dt, CASES)


def test_repeat_interleave_kernels_compile_for_sm90(tmp_path: Path) -> None:
    from workbench.lowering import lower_spec
    from workbench.lowering import sm90_check as sc

    spec = tmp_path / "repint_sm90.py"
    spec.write_text(SPEC.format(dt="float16", init="        pass", args="x, r",
                                expr="torch.repeat_interleave(x, r, dim=0)",
                                inputs="torch.randn(5, 3).to(DT), torch.tensor([2, 0, 1, 3, 1])"))
    res = lower_spec(spec)
    assert res.source is not None, res.diagnosis
    path = tmp_path / "cand_repint_sm90.py"
    path.write_text(res.source)
    cand, ref = load_module(path, "cand_repint_sm90"), load_module(spec, "ref_repint_sm90")
    torch.manual_seed(0)
    launches = sc.record_launches(cand.ModelNew(), ref.get_inputs())
    assert len(launches) >= 4
    bad = [f.why() for f in sc.compile_launches(res.source, launches) if not f.ok]
    assert not bad, bad
