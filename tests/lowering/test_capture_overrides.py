"""Ops whose ATen forms read tensor values into Python during the trace (capture.py's `_CaptureOverrides`), lowered
and checked against PyTorch on odd shapes in every float dtype OpInfo defines for them: cov (weights, correction)
and corrcoef (`.item()` value checks), narrow with a tensor start (an unbacked offset), combinations (a
data-dependent count of a shape-only result), tensor_split with tensor split points (specialized to their values)."""
from __future__ import annotations

from pathlib import Path

import pytest

from tests.lowering.test_primitives import FLOATS, _family

CASES = {
    "cov": ("x, fw, aw", "torch.cov(x), torch.cov(x, correction=0), torch.cov(x, fweights=fw, aweights=aw), "
            "x[0].cov(correction=1, fweights=fw), torch.cov(x[:, :1], correction=2)",
            "torch.randn(5, 7).to(DT), torch.randint(0, 4, (7,), dtype=torch.int32), torch.rand(7).to(DT) + 0.1"),
    "corrcoef": ("c", "torch.corrcoef(c), c[1].corrcoef(), torch.corrcoef(c[:1])", "torch.randn(3, 9).to(DT)"),
    "narrow": ("n, s, t", "torch.narrow(n, 1, s, 3), n.narrow(-1, t, 2), torch.narrow(n, 0, s, 0)",
               "torch.randn(5, 7, 3).to(DT), torch.tensor(2), torch.tensor(-3)"),
    "combinations": ("v", "torch.combinations(v), torch.combinations(v, r=3, with_replacement=True), "
                     "torch.combinations(v, r=1), torch.combinations(v[:2], r=3), torch.combinations(v, r=0)",
                     "torch.randn(5).to(DT)"),
}


@pytest.mark.parametrize("dt", FLOATS)
def test_value_reading_ops(tmp_path: Path, dt: str) -> None:
    _family(tmp_path, "overrides", dt, CASES)


@pytest.mark.parametrize("dt", FLOATS)
def test_tensor_split_with_tensor_points(tmp_path: Path, dt: str) -> None:
    _family(tmp_path, "tensor_split", dt, {
        "split": ("x, i, k", "torch.tensor_split(x, i, 1), x.tensor_split(k, dim=0), torch.tensor_split(x, (1, 3))",
                  "torch.randn(5, 7).to(DT), torch.tensor([1, 4, 4]), torch.tensor(3)")})
