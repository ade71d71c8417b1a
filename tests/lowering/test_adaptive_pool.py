"""adaptive_max_pool1d/2d/3d (values and indices) and adaptive_avg_pool3d (workbench/lowering/adaptive_pool.py)
against PyTorch in every float dtype: windows that overlap and differ in length (odd sizes 7 -> 3, 5 -> 4),
output larger than input, one output per dim, unbatched inputs, a nan in a window."""
from __future__ import annotations

from pathlib import Path

import pytest
import torch

from tests.lowering.helpers import load_module
from tests.lowering.test_primitives import FLOATS, SPEC, R, _family
from workbench.lowering import lower_spec
from workbench.lowering import sm90_check as sc

F = "torch.nn.functional"
CASES = {
    "max1d": ("x", f"{F}.adaptive_max_pool1d(x, 3, True), {F}.adaptive_max_pool1d(x[0], 9, True), "
              f"{F}.adaptive_max_pool1d(x, 1)", R.format("2, 3, 7")),
    "max2d": ("x", f"{F}.adaptive_max_pool2d(x, (3, 4), True), {F}.adaptive_max_pool2d(x[0], (2, 1), True), "
              f"{F}.adaptive_max_pool2d(x, (None, 2)), {F}.adaptive_max_pool2d(x.transpose(2, 3), 6, True)",
              R.format("2, 3, 7, 5")),
    "max3d": ("x", f"{F}.adaptive_max_pool3d(x, (2, 3, 2), True), {F}.adaptive_max_pool3d(x[0], 1, True)",
              R.format("2, 2, 5, 4, 3")),
    "avg3d": ("x", f"{F}.adaptive_avg_pool3d(x, (2, 3, 2)), {F}.adaptive_avg_pool3d(x[0], (4, 1, None)), "
              f"{F}.adaptive_avg_pool3d(x, 1), {F}.interpolate(x, size=(3, 2, 2), mode='area')",
              R.format("2, 2, 5, 4, 3")),
}


@pytest.mark.parametrize("dt", FLOATS)
def test_adaptive_pool(tmp_path: Path, dt: str) -> None:
    _family(tmp_path, "adaptive_pool", dt, CASES)


def test_adaptive_max_nan(tmp_path: Path) -> None:
    """A nan in a window wins, with its index (PyTorch: `val > max || isnan(val)`)."""
    _family(tmp_path, "adaptive_nan", "float32", {"nan": (
        "x", f"{F}.adaptive_max_pool2d(x.masked_fill(x > 1.0, float('nan')), (3, 2), True)", R.format("2, 7, 5"))})


def test_adaptive_pool_kernels_compile_for_sm90(tmp_path: Path) -> None:
    spec = tmp_path / "apool_sm90.py"
    spec.write_text(SPEC.format(dt="bfloat16", init="        pass", args="x",
                                expr=f"{F}.adaptive_max_pool2d(x[0], (3, 2), True), "
                                f"{F}.adaptive_max_pool3d(x, 2, True), {F}.adaptive_avg_pool3d(x, (2, 3, 1))",
                                inputs=R.format("2, 2, 5, 4, 3")))
    res = lower_spec(spec)
    assert res.source is not None, res.diagnosis
    path = tmp_path / "cand_apool_sm90.py"
    path.write_text(res.source)
    cand, ref = load_module(path, "cand_apool_sm90"), load_module(spec, "ref_apool_sm90")
    torch.manual_seed(0)
    launches = sc.record_launches(cand.ModelNew(), ref.get_inputs())
    assert len(launches) >= 3
    bad = [f.why() for f in sc.compile_launches(res.source, launches) if not f.ok]
    assert not bad, bad
