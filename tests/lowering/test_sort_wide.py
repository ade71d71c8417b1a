"""sort, argsort, msort, topk, kthvalue, median and isin of 64-bit values (workbench/lowering/sort.py `_wide_keys`:
two stable passes of 32-bit keys, low halves then high halves) against PyTorch in int64 and float64: values that
differ only in their low or only in their high 32 bits, +-2**62, ties (stable sorts, both directions), nan,
+-inf and -0.0 in float64, an empty row set; sm_90 compile check."""
from __future__ import annotations

from pathlib import Path

import pytest
import torch

from tests.lowering.helpers import check_candidate, load_module
from tests.lowering.test_primitives import SPEC
from workbench.lowering import lower_spec
from workbench.lowering import sm90_check as sc

EXPR = ("torch.sort(x, stable=True, dim=1), torch.sort(x, stable=True, dim=0, descending=True), "
        "torch.sort(t, stable=True, dim=-1), torch.sort(t, stable=True, dim=1, descending=True), "
        "torch.argsort(y, descending=True, stable=True), torch.topk(x, 3, 1), torch.topk(x, 2, 0, largest=False), "
        "torch.kthvalue(x, 2, 1), torch.median(x, 1), torch.median(y), torch.msort(x), torch.isin(t, z), "
        "torch.sort(y[:0])")
# x and y: distinct values (topk, kthvalue and median name any of tied values; the non-stable sort orders ties
# its own way); t: ties, and in float64 nan, -inf, -0.0 and 0.0
BIG = "torch.tensor([2**40, -2**40, 2**33 + 1, 2**33, -2**33, -2**33 + 1, 2**32 - 1, 2**32, -2**62, 2**62])"
INPUTS = (f"torch.cat([torch.randperm(35).reshape(5, 7) - 17, {BIG}.reshape(5, 2)], 1).to(DT), "
          f"torch.cat([{BIG}, {BIG}[:3] + 1]).to(DT), torch.tensor([5, 2**40, -1, 3]).to(DT), "
          f"torch.cat([torch.randint(-4, 4, (3, 7)), {BIG}[torch.randint(0, 10, (3, 6))]], 1).to(DT)"
          ".index_put_((torch.tensor([0, 2, 1, 1, 0]), torch.tensor([3, 1, 2, 4, 5])), "
          "torch.tensor([float('nan'), -float('inf'), -0.0, 0.0, float('nan')]).to(DT) if DT.is_floating_point "
          "else torch.tensor([9, -9, 0, 0, 9]).to(DT))")


def _spec(tmp_path: Path, dt: str, expr: str = EXPR) -> Path:
    spec = tmp_path / f"sort_wide_{dt}.py"
    spec.write_text(SPEC.format(dt=dt, init="        pass", args="x, y, z, t", expr=expr, inputs=INPUTS))
    return spec


@pytest.mark.parametrize("dt", ("int64", "float64"))
def test_sort_wide(tmp_path: Path, dt: str) -> None:
    spec = _spec(tmp_path, dt)
    res = lower_spec(spec)
    assert res.source is not None, res.diagnosis
    check_candidate(spec, res.source, tmp_path)


def test_sort_wide_compiles_for_sm90(tmp_path: Path) -> None:
    spec = _spec(tmp_path, "int64", "torch.sort(t, stable=True, dim=1), torch.median(x, 1)")
    res = lower_spec(spec)
    assert res.source is not None, res.diagnosis
    path = tmp_path / "cand_sort_wide_sm90.py"
    path.write_text(res.source)
    cand, ref = load_module(path, "cand_sort_wide_sm90"), load_module(spec, "ref_sort_wide_sm90")
    torch.manual_seed(0)
    launches = sc.record_launches(cand.ModelNew(), ref.get_inputs())
    bad = [f.why() for f in sc.compile_launches(res.source, launches) if not f.ok]
    assert launches and not bad, bad
