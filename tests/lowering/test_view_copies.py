"""The *_copy view ops and as_strided_scatter (workbench/lowering/view_copies.py) against PyTorch in every dtype:
non-contiguous inputs, negative dims, 0-d results, a storage offset, a list result (unbind_copy)."""
from __future__ import annotations

from pathlib import Path

import pytest

from tests.lowering.test_primitives import FLOATS, _family

V = "(torch.randn({}) * 3).round().to(DT)"
CASES = {
    "views": ("x", "torch.view_copy(x, [5, 21]), torch.view_copy(x, [-1]), torch.permute_copy(x, (2, 0, 1)), "
              "torch.permute_copy(x.transpose(0, 2), (1, 0, 2)), torch.narrow_copy(x, -1, 2, 4), "
              "torch.narrow_copy(x.transpose(1, 2), 1, 0, 3), torch.as_strided_copy(x, (4, 3), (5, 2), 3), "
              "torch.as_strided_copy(x, (), (), 7), torch.view_copy(x[0, 0, 1], [1, 1])", V.format("3, 5, 7")),
    "unbind_scatter": ("x, s", "torch.unbind_copy(x, 1), torch.unbind_copy(x[0, 0]), "
                       "torch.as_strided_scatter(x, s, (3, 4), (7, 2), 1), "
                       "torch.as_strided_scatter(x.transpose(0, 1), s[:2, :2], (2, 2), (1, 3))",
                       f"{V.format('3, 5, 7')}, {V.format('3, 4')}"),
}


@pytest.mark.parametrize("dt", (*FLOATS, "int64", "bool"))
def test_view_copies(tmp_path: Path, dt: str) -> None:
    _family(tmp_path, "view_copies", dt, CASES)
