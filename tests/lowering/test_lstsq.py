"""linalg.lstsq (capture.py's `_lstsq`: pinv(A) B over linalg_jacobi's SVD kernels, rank and singular values where
the driver computes them, residuals where m > n and the driver is not gelsy) against PyTorch in fp32, OpInfo's
only float dtype for it on the CPU besides fp64: over-, under- and exactly determined odd shapes, a batch, a vector
right-hand side, every driver (the interpreter runs Jacobi slowly: one spec, few small matrices)."""
from __future__ import annotations

from pathlib import Path

from tests.lowering.test_primitives import _family

CASES = {
    "lstsq": ("a, b, c, d", "torch.linalg.lstsq(a, b, driver='gelsd'), torch.linalg.lstsq(c, d), "
              "torch.linalg.lstsq(c.mT, d[:, :3], driver='gels'), torch.linalg.lstsq(a[0], b[0, :, 0], driver='gels'), "
              "torch.linalg.lstsq(c, d, driver='gelss')",
              "torch.randn(2, 5, 3).to(DT), torch.randn(2, 5, 2).to(DT), torch.randn(3, 3).to(DT), "
              "torch.randn(3, 3).to(DT)"),
}


def test_lstsq(tmp_path: Path) -> None:
    _family(tmp_path, "lstsq", "float32", CASES)
