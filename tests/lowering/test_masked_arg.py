"""masked.argmax / masked.argmin (lowered from core ATen: where(mask, x, -inf or inf), then argmax/argmin, the
index cast to x's dtype) and the plain argmax/argmin/max.dim they share a kernel with (templates._red_arg_lines),
against PyTorch on odd shapes in fp32/fp16/bf16: ties (values rounded to integers, so many rows hold their
maximum several times), nan (torch returns the first nan's index, even where a larger finite value comes
before it in another lane of the block), -inf and +inf, fully masked rows (all fill values: index 0, as eager),
rows wider than a block, dim=None and keepdim. The indices must equal eager's exactly.

The OpInfo samples' mismatch (suite aten, masked.argmax output 22: row [3.61, nan, -0.57, 3.13, -3.03] gave 0,
eager 1): the kernel's cross-lane step took every lane holding the finite maximum *or* a nan, so a finite
maximum at a smaller index than the first nan won; it now takes only the nan lanes where the row has a nan."""
from __future__ import annotations

from pathlib import Path

import pytest
import torch

from tests.lowering.helpers import flat, load_module
from workbench.lowering import lower_spec
from workbench.lowering import sm90_check as sc

SPEC = '''import torch
import torch.nn as nn

DT = torch.{dt}


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x, m, y, my, w):
        A, B = torch.masked.argmax, torch.masked.argmin
        return (A(x, -1, mask=m), B(x, -1, mask=m), A(x, 0, keepdim=True, mask=m), B(x, 0, keepdim=True, mask=m),
                A(x, mask=m), B(x, mask=m), A(x, -1), B(x, 0, keepdim=True),
                A(y, 1, keepdim=True, mask=my), B(y, 1, keepdim=True, mask=my), A(y, 2, mask=my), A(y, mask=my),
                torch.argmax(x, 1), torch.argmin(x, 0, keepdim=True), torch.argmax(x), torch.argmin(y),
                torch.max(x, 1), torch.min(y, 1, keepdim=True), torch.argmax(w, 1), torch.argmin(w, 1),
                A(w, 1, mask=w > 0))


def _data():
    g = torch.Generator().manual_seed(7)
    x = (torch.randn(7, 37, generator=g) * 2).round()     # ties: integers in [-8, 8]
    x[1, 5] = float("nan")                                 # a nan after a larger value in an earlier lane
    x[1, 0] = 9.0
    x[2, 3] = float("nan")
    x[2, 30] = float("nan")                                # two nans: the first one's index
    x[3] = -float("inf")                                   # a row of -inf: argmax 0
    x[4, ::3] = float("inf")                               # several +inf: the first one
    x[5, 10] = -float("inf")
    x[6, 20] = float("nan")
    m = torch.rand(7, 37, generator=g) > 0.3
    m[0] = False                                           # a fully masked row: index 0
    m[2, 3] = False                                        # the first nan masked, the second one kept
    m[:, 36] = False
    m[5] = False
    m[5, 10] = True                                        # only -inf left: argmax 10, argmin 10
    y = (torch.randn(3, 11, 19, generator=g) * 3).round()
    y[1, 4, 2] = float("nan")
    y[2, :, 7] = -float("inf")
    my = torch.rand(3, 11, 19, generator=g) > 0.5
    my[0, :, 0] = False                                    # a fully masked column (dim 1)
    my[2, 6] = False                                       # a fully masked row (dim 2)
    w = (torch.randn(5, 1030, generator=g) * 4).round()    # wider than a block: lanes across iterations
    w[0, 700] = float("nan")
    w[0, 3] = 50.0
    w[1, 1029] = float("nan")
    w[2, 1000] = 50.0
    w[2, 4] = 50.0
    return [x.to(DT), m, y.to(DT), my, w.to(DT)]


def get_inputs():
    return _data()


def get_init_inputs():
    return []
'''


def _lowered(tmp_path: Path, dt: str):  # noqa: ANN202 - (ref module, candidate module, source)
    spec = tmp_path / f"masked_arg_{dt}.py"
    spec.write_text(SPEC.format(dt=dt))
    res = lower_spec(spec)
    assert res.source is not None, res.diagnosis
    assert "aten.argmax.default" in res.ops and "aten.argmin.default" in res.ops
    path = tmp_path / f"cand_masked_arg_{dt}.py"
    path.write_text(res.source)
    return load_module(spec, f"ref_masked_arg_{dt}"), load_module(path, f"cand_masked_arg_{dt}"), res.source


@pytest.mark.parametrize("dt", ("float32", "float16", "bfloat16"))
def test_masked_arg_matches_eager(tmp_path: Path, dt: str) -> None:
    ref, cand, _ = _lowered(tmp_path, dt)
    inputs = ref.get_inputs()
    want = flat(ref.Model()(*[t.clone() for t in inputs]))
    got = flat(cand.ModelNew()(*inputs))
    assert len(got) == len(want)
    bad = []
    for i, (w, g) in enumerate(zip(want, got)):
        assert g.shape == w.shape and g.dtype == w.dtype, f"output {i}: {g.shape} {g.dtype} vs {w.shape} {w.dtype}"
        if not torch.equal(torch.nan_to_num(g.float(), nan=1e30), torch.nan_to_num(w.float(), nan=1e30)):
            diff = (g.float() != w.float()) & ~(g.isnan() & w.isnan())
            bad.append(f"output {i}: {int(diff.sum())} differ, first at {diff.nonzero()[0].tolist()}: "
                       f"got {g[tuple(diff.nonzero()[0])].item()} expected {w[tuple(diff.nonzero()[0])].item()}")
    assert not bad, "\n".join(bad)


def test_masked_arg_compiles_for_sm90(tmp_path: Path) -> None:
    ref, cand, source = _lowered(tmp_path, "bfloat16")
    launches = sc.record_launches(cand.ModelNew(), ref.get_inputs())
    bad = [f.why() for f in sc.compile_launches(source, launches) if not f.ok]
    assert launches and not bad, bad
