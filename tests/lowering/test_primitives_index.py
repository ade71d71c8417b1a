"""Advanced indexing with several index tensors (aten.index.Tensor), against PyTorch in every dtype: adjacent
indexed dims (the broadcast shape in their place), separated ones (it goes first), broadcasting between the
index tensors, negative and empty indices, three index tensors; and the ops that decompose to it
(interpolate, adaptive average pooling)."""
from __future__ import annotations

from pathlib import Path

import pytest

from tests.lowering.test_primitives import FLOATS, R, _family

IDX = "torch.randint(-5, 5, (3,)), torch.randint(0, 5, (3,)), torch.randint(1, 6, (2, 3)), torch.randint(0, 4, (0,))"
CASES = {
    "multi_index": ("x, i, j, k, e", "x[i, j], x[:, i, j], x[i, :, j], x[i[:, None], j[None, :]], x[0][i, j[:1]], "
                    "x[:, j, -k], x[e, e], x[i, j, k[1]]", f"{R.format('5, 6, 7')}, {IDX}"),
}
RESAMPLE = {
    "resample": ("x", "torch.nn.functional.interpolate(x, size=(11, 4), mode='nearest'), "
                 "torch.nn.functional.interpolate(x, size=(5, 9), mode='bilinear', align_corners=False), "
                 "torch.nn.functional.adaptive_avg_pool2d(x, (3, 4))", R.format("2, 3, 7, 6")),
}


@pytest.mark.parametrize("dt", (*FLOATS, "int32", "bool"))
def test_multi_index(tmp_path: Path, dt: str) -> None:
    cases = CASES
    if dt == "bool":
        cases = {k: (a, e, i.replace(R.format("5, 6, 7"), "torch.rand(5, 6, 7) > 0.5")) for k, (a, e, i) in CASES.items()}
    elif dt == "int32":
        cases = {k: (a, e, i.replace(R.format("5, 6, 7"), "torch.randint(-9, 9, (5, 6, 7), dtype=DT)"))
                 for k, (a, e, i) in CASES.items()}
    _family(tmp_path, "index_multi", dt, cases)


@pytest.mark.parametrize("dt", FLOATS)
def test_resampling_through_multi_index(tmp_path: Path, dt: str) -> None:
    _family(tmp_path, "resample", dt, RESAMPLE)
