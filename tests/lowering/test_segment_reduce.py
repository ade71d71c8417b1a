"""segment_reduce (workbench/lowering/segment_reduce.py) against PyTorch in fp32, fp16 and bf16: every reduction
by lengths and by offsets, along the last and an inner axis, empty segments with and without `initial`, nan in a
segment (max and min keep it); and its kernel compiled for sm_90 on the CPU."""
from __future__ import annotations

from pathlib import Path

import pytest
import torch

from tests.lowering.helpers import load_module
from tests.lowering.test_primitives import FLOATS, SPEC, _family
from workbench.harness.policy import check_source
from workbench.lowering import lower_spec
from workbench.lowering import sm90_check as sc

SR = "torch.segment_reduce"
# data [2, 9, 3]: the segments lie along axis 1 (lengths [2, 4] sum to 9 per row, one empty segment)
DATA = "torch.cat([torch.randn(2, 8, 3), torch.tensor([float('nan'), 1.0, 2.0]).expand(2, 1, 3)], 1).to(DT)"
LENGTHS = "torch.tensor([[3, 0, 4, 2], [1, 5, 0, 3]])"
OFFSETS = "torch.tensor([[0, 3, 3, 7, 9], [0, 1, 6, 6, 9]])"


def _calls(kind: str) -> str:
    out = []
    for r in ("sum", "mean", "max", "min", "prod"):
        out.append(f"{SR}(x, '{r}', {kind}=g, axis=1)")
        out.append(f"{SR}(x, '{r}', {kind}=g, axis=1, initial=0.5)")
        out.append(f"{SR}(x[0, :, 0], '{r}', {kind}=g[0])")
    return ", ".join(out)


@pytest.mark.parametrize("dt", FLOATS)
def test_segment_reduce(tmp_path: Path, dt: str) -> None:
    _family(tmp_path, "segment_reduce", dt, {"lengths": ("x, g", _calls("lengths"), f"{DATA}, {LENGTHS}"),
                                              "offsets": ("x, g", _calls("offsets"), f"{DATA}, {OFFSETS}"),
                                              # long sums: fp16/bf16 round after every add, as ATen's kernel
                                              "long": ("y", f"{SR}(y, 'sum', lengths=torch.tensor([150, 50])), "
                                                       f"{SR}(y, 'mean', offsets=torch.tensor([0, 3, 200]))",
                                                       "(torch.rand(200) + 1).to(DT)")})


def test_segment_reduce_kernel_compiles_for_sm90(tmp_path: Path) -> None:
    spec = tmp_path / "sr_sm90.py"
    spec.write_text(SPEC.format(dt="bfloat16", init="        pass", args="x, g, o",
                                expr=f"{SR}(x, 'mean', lengths=g, axis=1), {SR}(x, 'max', offsets=o, axis=1)",
                                inputs=f"{DATA}, {LENGTHS}, {OFFSETS}"))
    res = lower_spec(spec)
    assert res.source is not None, res.diagnosis
    assert check_source(res.source) == []
    path = tmp_path / "cand_sr_sm90.py"
    path.write_text(res.source)
    cand, ref = load_module(path, "cand_sr_sm90"), load_module(spec, "ref_sr_sm90")
    torch.manual_seed(0)
    launches = sc.record_launches(cand.ModelNew(), ref.get_inputs())
    assert len(launches) == 2
    bad = [f.why() for f in sc.compile_launches(res.source, launches) if not f.ok]
    assert not bad, bad
