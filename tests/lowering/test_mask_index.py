"""Boolean mask indices (workbench/lowering/mask_index.py: rewritten to nonzero's columns, then gather.py's
multi-index kernel and compaction.py's nonzero) against PyTorch in fp32, fp16, bf16 and int64: a full-shape mask,
a mask over trailing and leading dims next to a slice and an integer index, an all-false mask (empty result),
index_put with a mask, a broadcast value and accumulation."""
from __future__ import annotations

from pathlib import Path

import pytest

from tests.lowering.test_primitives import FLOATS, _family

CASES = {
    "get": ("x, m", "x[m > 0], x[:, m[0] > 0], x[m[:, :, 0] > 0], x[1, m[0, :, 0] > 0], x[m > 9]",
            "(torch.randn(3, 5, 7) * 4).to(DT), torch.randn(3, 5, 7)"),
    "put": ("x, m, v", "torch.index_put(x, (m > 0,), v[0]), x.index_put((m[:, 0, 0] > 0,), v[:7]), "
            "torch.ops.aten.index_put(x, [None, m[0, :, 0] > 0], x[0, :1, :1] * 2, True)",
            "(torch.randn(3, 5, 7) * 4).to(DT), torch.randn(3, 5, 7), (torch.randn(105) * 4).to(DT)"),
}


# fp16 and bf16 add nothing the index kernels do not already test in their own files: slow
@pytest.mark.parametrize("dt", [pytest.param(d, marks=pytest.mark.slow) if d in ("float16", "bfloat16") else d
                                for d in [*FLOATS, "int64"]])
def test_mask_index(tmp_path: Path, dt: str) -> None:
    _family(tmp_path, "mask_index", dt, CASES)
