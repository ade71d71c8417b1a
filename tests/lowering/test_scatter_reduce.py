"""scatter_reduce and index_reduce (workbench/lowering/scatter_reduce.py) against PyTorch in every float dtype:
each reduction with and without self, duplicate indices, an index smaller than the output in every dim, a
non-contiguous source, a 1-d and a 3-d case, scatter's legacy reduce="multiply"; one kernel compiled for sm_90."""
from __future__ import annotations

from pathlib import Path

import pytest
import torch

from tests.lowering.helpers import load_module
from tests.lowering.test_primitives import FLOATS, SPEC, _family
from workbench.lowering import lower_spec
from workbench.lowering import sm90_check as sc

# values near 1 so that products stay in range in fp16; indices with duplicates (randint into 4 or 5 slots)
V = "(torch.rand({}) + 0.5).to(DT)"
IDX3 = "torch.randint(0, 4, (3, 2, 3))"
REDS = ("sum", "prod", "mean", "amax", "amin")
CASES = {
    f"scatter_{r}": ("x, i, s", f"torch.scatter_reduce(x, 1, i, s, '{r}'), "
                     f"torch.scatter_reduce(x, 1, i, s, '{r}', include_self=False), "
                     f"torch.scatter_reduce(x[0, :, 0], 0, i[0, :, 0], s[0, :, 1], '{r}'), "
                     f"torch.scatter_reduce(x, -1, i[:, :, :2] % 2, s.transpose(0, 2)[:3, :2, :2], '{r}')",
                     f"{V.format('4, 5, 3')}, {IDX3}, {V.format('3, 4, 3')}")
    for r in REDS}
INDEX = {
    f"index_{r}": ("x, i, s", f"torch.index_reduce(x, 1, i, s, '{r}'), "
                   f"torch.index_reduce(x, 0, i[:3] % 4, s[:3, 1:], '{r}', include_self=False)",
                   f"{V.format('4, 5, 3')}, torch.tensor([0, 4, 2, 0, 4, 1]), {V.format('4, 6, 3')}")
    for r in ("prod", "mean", "amax", "amin")}
LEGACY = {"scatter_multiply": ("x, i, s", "torch.scatter(x, 0, i, s, reduce='multiply'), "
                               "torch.scatter(x, 1, i, 1.5, reduce='multiply'), "
                               "torch.scatter(x, 1, i, 2.0, reduce='add')",
                               f"{V.format('4, 5')}, torch.randint(0, 4, (3, 4)), {V.format('3, 4')}")}


@pytest.mark.parametrize("dt", FLOATS)
def test_scatter_reduce(tmp_path: Path, dt: str) -> None:
    _family(tmp_path, "scatter_reduce", dt, CASES)


@pytest.mark.parametrize("dt", FLOATS)
def test_index_reduce_and_scatter_multiply(tmp_path: Path, dt: str) -> None:
    _family(tmp_path, "index_reduce", dt, {**INDEX, **LEGACY})


PUTS = {"put": ("x, i, s", "torch.put(x, i, s), torch.put(x, i[:2] - 12, s[:2], accumulate=True), "
                "torch.put(x.t(), i % 7, s, accumulate=True), torch.put(x, i[:0], s[:0])",
                f"{V.format('4, 5')}, torch.tensor([3, 19, 0, 7, 3, 12]), {V.format('6')}")}


@pytest.mark.parametrize("dt", (*FLOATS, "int64"))
def test_put(tmp_path: Path, dt: str) -> None:
    _family(tmp_path, "put", dt, PUTS)


def test_nan_propagates_through_amax(tmp_path: Path) -> None:
    _family(tmp_path, "scatter_nan", "float32", {"nan": (
        "x, i, s", "torch.scatter_reduce(x, 0, i, s, 'amax'), torch.index_reduce(x, 0, i, s, 'amin')",
        "torch.tensor([1.0, float('nan'), 3.0]), torch.tensor([0, 0, 1, 2]), "
        "torch.tensor([float('nan'), 2.0, 0.5, 4.0])")})


def test_pull_kernel_compiles_for_sm90(tmp_path: Path) -> None:
    spec = tmp_path / "scatter_sm90.py"
    spec.write_text(SPEC.format(dt="bfloat16", init="        pass", args="x, i, s",
                                expr="torch.scatter_reduce(x, 1, i, s, 'mean', include_self=False)",
                                inputs=f"{V.format('4, 5, 3')}, {IDX3}, {V.format('3, 4, 3')}"))
    res = lower_spec(spec)
    assert res.source is not None, res.diagnosis
    path = tmp_path / "cand_scatter_sm90.py"
    path.write_text(res.source)
    cand, ref = load_module(path, "cand_scatter_sm90"), load_module(spec, "ref_scatter_sm90")
    torch.manual_seed(0)
    launches = sc.record_launches(cand.ModelNew(), ref.get_inputs())
    assert launches
    bad = [f.why() for f in sc.compile_launches(res.source, launches) if not f.ok]
    assert not bad, bad
