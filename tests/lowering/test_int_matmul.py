"""Integer matmul (int_matmul.py) against PyTorch in every integer dtype ATen's CPU mm takes (int8, uint8, int16,
int32, int64): mm, bmm, addmm (beta, alpha), matmul with batch dims and broadcast batches, tensordot; K not a
multiple of the block (37, 123), K = 0, a matrix-vector product, transposed operands, values over the dtype's whole
range (the products wrap as eager's do: compared exactly), an epilogue that reads the wrapped product (floor
division), addmv / baddbmm / addbmm with float alpha and beta (truncated to the dtype, as ATen reads them);
sm_90 compile check (registers, shared memory, no spill) of the int64 kernels."""
from __future__ import annotations

from pathlib import Path

import pytest
import torch

from tests.lowering.helpers import check_candidate, load_module
from tests.lowering.test_primitives import SPEC
from workbench.lowering import lower_spec
from workbench.lowering import sm90_check as sc

INTS = ("int8", "uint8", "int16", "int32", "int64")
EXPR = ("a @ b, torch.bmm(c, c.transpose(1, 2)), torch.addmm(bias, a, b, beta=3, alpha=-2), "
        "torch.addmm(bias, a, b, beta=0), torch.matmul(x, y), torch.matmul(x[:, :1], z), "
        "torch.tensordot(x, y, dims=1), a[:, :0] @ b[:0], a @ b[:, :1], a.t().contiguous().t() @ b, "
        "torch.div(a @ b, 7, rounding_mode='floor'), (a @ b) * 3 + bias, "
        # float alpha and beta are read in the integer dtype (truncated) as ATen does: 0.2 -> 0, 2.9 -> 2
        "torch.addmv(b[:5, 0], a, b[:, 0], beta=0.2, alpha=0.6), torch.addmv(b[:5, 0], a, b[:, 0], beta=2, alpha=3), "
        "torch.baddbmm(c[:, :, :7], c, c.transpose(1, 2), beta=0.6, alpha=2.7), "
        "torch.addbmm(c[0, :, :7], c, c.transpose(1, 2), beta=1.5, alpha=2.9)")
# the whole range of the dtype: most products and sums wrap
WIDE = "torch.randint(torch.iinfo(DT).min, torch.iinfo(DT).max, {shape}, dtype=DT)"
INPUTS = ", ".join([WIDE.format(shape="(5, 37)"), WIDE.format(shape="(37, 9)"), WIDE.format(shape="(3, 7, 19)"),
                    WIDE.format(shape="(9,)"), WIDE.format(shape="(2, 3, 5, 123)"), WIDE.format(shape="(123, 6)"),
                    WIDE.format(shape="(3, 123, 4)")])


def _spec(tmp_path: Path, dt: str, expr: str = EXPR) -> Path:
    spec = tmp_path / f"int_matmul_{dt}.py"
    spec.write_text(SPEC.format(dt=dt, init="        pass", args="a, b, c, bias, x, y, z", expr=expr, inputs=INPUTS))
    return spec


@pytest.mark.parametrize("dt", INTS)
def test_int_matmul(tmp_path: Path, dt: str) -> None:
    spec = _spec(tmp_path, dt)
    res = lower_spec(spec)
    assert res.source is not None, res.diagnosis
    assert "int_matmul_kernel" in res.source and "tl.dot" not in res.source
    check_candidate(spec, res.source, tmp_path)


def test_int64_products_wrap_as_eager() -> None:
    """The premise of the int64 accumulator: eager wraps modulo 2**64 (and a narrow dtype modulo its width)."""
    a = torch.tensor([[2 ** 62, 2 ** 62]], dtype=torch.int64)
    assert int((a @ torch.tensor([[4], [1]], dtype=torch.int64))[0, 0]) == 2 ** 62  # 5 * 2**62 mod 2**64
    b = torch.tensor([[100, 100]], dtype=torch.int8)
    assert int((b @ torch.tensor([[100], [100]], dtype=torch.int8))[0, 0]) == (20000 + 128) % 256 - 128


def test_int_matmul_compiles_for_sm90(tmp_path: Path) -> None:
    spec = _spec(tmp_path, "int64", "a @ b, torch.bmm(c, c.transpose(1, 2)), torch.addmm(bias, a, b, beta=3, alpha=-2)")
    res = lower_spec(spec)
    assert res.source is not None, res.diagnosis
    path = tmp_path / "cand_int_matmul_sm90.py"
    path.write_text(res.source)
    cand, ref = load_module(path, "cand_int_matmul_sm90"), load_module(spec, "ref_int_matmul_sm90")
    torch.manual_seed(0)
    launches = sc.record_launches(cand.ModelNew(), ref.get_inputs())
    fits = sc.compile_launches(res.source, launches)
    bad = [f.why() for f in fits if not f.ok]
    assert launches and not bad, bad
