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
    # a scale factor: the output sizes go through math.trunc in the graph
    "resample": ("x", "torch.nn.functional.interpolate(x, scale_factor=1.7, mode='nearest'), "
                 "torch.nn.functional.interpolate(x, size=(11, 4), mode='nearest'), "
                 "torch.nn.functional.interpolate(x, size=(5, 9), mode='bilinear', align_corners=False), "
                 "torch.nn.functional.adaptive_avg_pool2d(x, (3, 4))", R.format("2, 3, 7, 6")),
}


@pytest.mark.parametrize("dt", (*FLOATS, "int32", "bool"))
def test_multi_index(tmp_path: Path, dt: str) -> None:
    cases = CASES
    if dt == "bool":
        cases = {k: (a, e, i.replace(R.format("5, 6, 7"), "torch.rand(5, 6, 7) > 0.5"))
                 for k, (a, e, i) in CASES.items()}
    elif dt == "int32":
        cases = {k: (a, e, i.replace(R.format("5, 6, 7"), "torch.randint(-9, 9, (5, 6, 7), dtype=DT)"))
                 for k, (a, e, i) in CASES.items()}
    _family(tmp_path, "index_multi", dt, cases)


@pytest.mark.parametrize("dt", FLOATS)
def test_resampling_through_multi_index(tmp_path: Path, dt: str) -> None:
    _family(tmp_path, "resample", dt, RESAMPLE)


# distinct indices where the write is a plain store (torch leaves duplicates unspecified), duplicates where it adds
PUT_INPUTS = ("torch.randperm(5)[:3] - 2, torch.randperm(6)[:3], {v}, torch.tensor([0, 0, 1, -1, 0])")
PUTS = {
    "index_put": ("x, i, j, v, z", "torch.index_put(x, (i, j), v[:3]), "
                  "torch.index_put(x, (i[:, None], j[None, :]), v[0, 0], accumulate=True), "
                  "torch.index_put(x, (z,), v[1], accumulate=True), torch.index_put(x, (i, j, j), v[0, :3]), "
                  "torch.index_put(x, (z[:0],), v[2])", None),
    "slice_scatter": ("x, s, t", "torch.slice_scatter(x, s, 1, 1, 6, 2), torch.slice_scatter(x, t, -1, -3), "
                      "torch.slice_scatter(x, x[:2] * 2, 0, None, 2)", None),
}


@pytest.mark.parametrize("dt", (*FLOATS, "int32"))
def test_index_put_and_slice_scatter(tmp_path: Path, dt: str) -> None:
    rnd = R if dt != "int32" else "torch.randint(-9, 9, ({},), dtype=DT)"
    cases = {
        "index_put": (*PUTS["index_put"][:2],
                      f"{rnd.format('5, 6, 7')}, {PUT_INPUTS.format(v=rnd.format('3, 7'))}"),
        "slice_scatter": (*PUTS["slice_scatter"][:2],
                          f"{rnd.format('4, 7, 5')}, {rnd.format('4, 3, 5')}, {rnd.format('4, 7, 3')}"),
    }
    _family(tmp_path, "index_put", dt, cases)
