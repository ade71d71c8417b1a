"""Integer-only ops against PyTorch in every integer dtype OpInfo gives them (int8, uint8, int16, int32, int64):
bitwise_left_shift / bitwise_right_shift (and `<<`, `>>`: shifts past the width and negative ones, a scalar
shifted by a tensor), gcd and lcm (pointwise.py: zeros, negative values, lcm wrapping as C++'s promoted int does)
and bincount (bincount.py: a max kernel sizing the output, atomics counting; weights, minlength, an empty input,
a strided one); sm_90 compile check."""
from __future__ import annotations

from pathlib import Path

import pytest
import torch

from tests.lowering.helpers import check_candidate, load_module
from tests.lowering.test_primitives import SPEC
from workbench.lowering import lower_spec
from workbench.lowering import sm90_check as sc

INTS = ("int8", "uint8", "int16", "int32", "int64")
EXPR = ("torch.bitwise_left_shift(a, s), torch.bitwise_right_shift(a, s), a << 3, a >> 2, "
        "torch.bitwise_left_shift(5, s), torch.bitwise_right_shift(a, s[0]), "
        "torch.gcd(a, b), torch.lcm(a, b), torch.gcd(a[0], b), torch.lcm(a, b.t().contiguous().t()), "
        "torch.bincount(c), torch.bincount(c, minlength=40), torch.bincount(c, w), torch.bincount(c, h), "
        "torch.bincount(c[:0], minlength=3), torch.bincount(c[::3], w[::3], minlength=5)")
# values over the dtype's range (zeros included); shift amounts inside and outside [0, width)
INPUTS = ("torch.randint(-128 if DT != torch.uint8 else 0, 128, (5, 7)).to(DT), "
          "torch.cat([torch.randint(0, 9, (5, 5)), torch.tensor([[0, 17]] * 5) + (DT == torch.uint8) * 190"
          " - (DT != torch.uint8) * torch.tensor([[3, 0]] * 5)], 1).to(DT), "
          "(torch.randint(-60 if DT != torch.uint8 else 0, 60, (5, 7)) * (torch.rand(5, 7) > 0.2)).to(DT), "
          "torch.randint(0, 23, (301,)).to(DT), torch.randn(301), torch.randn(301).half()")


def _spec(tmp_path: Path, dt: str, expr: str = EXPR) -> Path:
    spec = tmp_path / f"integer_ops_{dt}.py"
    spec.write_text(SPEC.format(dt=dt, init="        pass", args="a, s, b, c, w, h", expr=expr, inputs=INPUTS))
    return spec


@pytest.mark.parametrize("dt", INTS)
def test_integer_ops(tmp_path: Path, dt: str) -> None:
    spec = _spec(tmp_path, dt)
    res = lower_spec(spec)
    assert res.source is not None, res.diagnosis
    check_candidate(spec, res.source, tmp_path)


def test_lcm_wraps_as_cpp_int() -> None:
    """int8 lcm(91, -8): C++ computes |91 / 1 * -8| = 728 in int and stores -40; the same in int8 gives 40."""
    assert int(torch.lcm(torch.tensor([91], dtype=torch.int8), torch.tensor([-8], dtype=torch.int8))) == -40


def test_integer_ops_compile_for_sm90(tmp_path: Path) -> None:
    spec = _spec(tmp_path, "int16", "torch.bitwise_left_shift(a, s), torch.bitwise_right_shift(a, s), "
                 "torch.lcm(a, b), torch.bincount(c, w), torch.bincount(c, h), torch.bincount(c)")
    res = lower_spec(spec)
    assert res.source is not None, res.diagnosis
    path = tmp_path / "cand_integer_sm90.py"
    path.write_text(res.source)
    cand, ref = load_module(path, "cand_integer_sm90"), load_module(spec, "ref_integer_sm90")
    torch.manual_seed(0)
    launches = sc.record_launches(cand.ModelNew(), ref.get_inputs())
    bad = [f.why() for f in sc.compile_launches(res.source, launches) if not f.ok]
    assert launches and not bad, bad
