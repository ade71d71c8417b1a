"""The special functions (workbench/lowering/special.py) against PyTorch on odd shapes, in every dtype PyTorch's
CPU kernels take (fp32 for all; fp16 and bf16 for digamma, erfinv, i0e, i1, i1e), each argument's domain covered
with its special points (0, +-1, poles, inf, nan), broadcasting, a Python-scalar argument and an integer input;
and their kernels compiled for sm_90 on the CPU (workbench/lowering/sm90_check.py)."""
from __future__ import annotations

from pathlib import Path

import pytest
import torch

from tests.lowering.helpers import load_module
from tests.lowering.test_primitives import SPEC, _family
from workbench.lowering import lower_spec
from workbench.lowering import sm90_check as sc

# wide values with the special points of most functions appended (as the input's dtype)
WIDE = ("torch.cat([torch.randn({n}) * 3, torch.rand({n}) * 40 - 20, torch.tensor([0.0, -0.0, 1.0, -1.0, 2.0, "
        "-2.0, 5.0, 8.0, 0.5, 1e-3, -3.0, 2.09, -2.09, float('inf'), -float('inf'), float('nan')])]).to(DT)")
UNIT = "torch.cat([torch.rand({n}), torch.tensor([0.0, 1.0, 1e-3, 0.5, 0.9, -0.1, 1.1, float('nan')])]).to(DT)"
SIGNED_UNIT = ("torch.cat([torch.rand({n}) * 2 - 1, torch.tensor([0.0, 1.0, -1.0, 0.7, -0.7, -1.1, "
               "float('nan')])]).to(DT)")

HALF_OK = {  # PyTorch's CPU kernels take fp16/bf16 for these (it computes them in fp32)
    "digamma": ("x", "torch.digamma(x), torch.digamma(x[5:9, None] - 2.5)", WIDE.format(n="37")),
    "erfinv": ("x", "torch.erfinv(x)", SIGNED_UNIT.format(n="41")),
    # nextafter on the output dtype's own bits: 0 (to the smallest subnormal), equal pairs, nan, -inf
    "bits": ("x, y", "torch.nextafter(x, y), torch.nextafter(x, x), torch.nextafter(x[:7, None], y[None, :5]), "
             "torch.hypot(x, y), torch.hypot(x[:3, None], y), torch.angle(x)", f"{WIDE.format(n='13')}, "
             f"{WIDE.format(n='13')}.flip(0)"),
    "bessel_i": ("x", "torch.special.i0e(x), torch.special.i1(x.clamp(-80, 80)), torch.special.i1e(x)",
                 WIDE.format(n="23")),
}
FLOAT_ONLY = {
    "ndtri_erfcx": ("x, u", "torch.special.ndtri(u), torch.special.erfcx(x), torch.special.log_ndtr(x)",
                    f"{WIDE.format(n='29')}, {UNIT.format(n='29')}"),
    "bessel_jy": ("x", "torch.special.bessel_j0(x), torch.special.bessel_j1(x), torch.special.bessel_y0(x), "
                  "torch.special.bessel_y1(x), torch.special.spherical_bessel_j0(x), torch.special.airy_ai(x)",
                  WIDE.format(n="31")),
    "modified_bessel": ("x", "torch.special.modified_bessel_i0(x), torch.special.modified_bessel_i1(x), "
                        "torch.special.modified_bessel_k0(x), torch.special.modified_bessel_k1(x), "
                        "torch.special.scaled_modified_bessel_k0(x), torch.special.scaled_modified_bessel_k1(x)",
                        WIDE.format(n="19")),
    # q below zero and non-integer (the slow direct sum) and at the poles
    "zeta": ("x, q", "torch.special.zeta(x, q), torch.special.zeta(x[:4, None], q[None, :6]), "
             "torch.special.zeta(x, 2.5), torch.special.zeta(3.0, q)",
             "(torch.rand(13) * 8 + 0.9).to(DT), torch.cat([torch.rand(9) * 12 - 4, torch.tensor([0.0, -2.0, 1.0, "
             "0.5])]).to(DT)"),
}
POLYS = ["chebyshev_polynomial_t", "chebyshev_polynomial_u", "chebyshev_polynomial_v", "chebyshev_polynomial_w",
         "shifted_chebyshev_polynomial_t", "shifted_chebyshev_polynomial_u", "shifted_chebyshev_polynomial_v",
         "shifted_chebyshev_polynomial_w", "hermite_polynomial_h", "hermite_polynomial_he", "laguerre_polynomial_l",
         "legendre_polynomial_p"]
# x over [-2, 2] with the special points 0, 1, -1; n from -2 to 13 (the trig forms start at 5, 7 or 9), degrees
# torch casts to int64 on the way in (truncated: 2.7, -1.5, 7.9; nan and +-inf, which x86's cast makes INT64_MIN)
POLY_IN = ("torch.cat([torch.rand(29) * 4 - 2, torch.tensor([0.0, 1.0, -1.0, 0.5, 1.0, -1.0, 0.3, 0.4, -0.6, 0.2, "
           "-1.0, 0.9])]).to(DT), "
           "torch.cat([torch.randint(-2, 14, (29,)).float(), torch.tensor([12.0, 11.0, 10.0, 3.0, 0.0, 1.0, "
           "float('nan'), float('inf'), -float('inf'), 2.7, -1.5, 7.9])]).to(DT)")
POLY_CASES = {p: ("x, n", f"torch.special.{p}(x, n), torch.special.{p}(x[:3, None], n[None, :5]), "
                  f"torch.special.{p}(x, 4)", POLY_IN) for p in POLYS}


@pytest.mark.parametrize("dt", ("float32", "float16", "bfloat16"))
def test_special_unary_every_dtype(tmp_path: Path, dt: str) -> None:
    _family(tmp_path, "special_half", dt, HALF_OK)


def test_special_unary_fp32(tmp_path: Path) -> None:
    _family(tmp_path, "special_f32", "float32", FLOAT_ONLY)


def test_polynomials(tmp_path: Path) -> None:
    _family(tmp_path, "special_poly", "float32", POLY_CASES)


def test_integer_inputs_give_float(tmp_path: Path) -> None:
    """An int64 input promotes to the default float dtype, as torch does."""
    _family(tmp_path, "special_int", "int64", {
        "ints": ("x", "torch.digamma(x), torch.special.bessel_j0(x), torch.special.i1e(x), "
                 "torch.special.chebyshev_polynomial_t(x.float() * 0.1, x)", "torch.arange(-4, 9).to(DT)")})


def test_special_kernels_compile_for_sm90(tmp_path: Path) -> None:
    """One kernel of each helper family compiles for sm_90 and fits: a Chebyshev series, a rational form calling
    another helper, the loops bounded by a block maximum (zeta's sum, a recurrence). Every special kernel was
    compiled so by hand (about 45 s on 2 cores, too long for CI: docs/lowering.md)."""
    spec = tmp_path / "special_sm90.py"
    expr = ("torch.special.zeta(x.abs() + 1.5, x), torch.special.bessel_y1(x), "
            "torch.special.scaled_modified_bessel_k1(x), torch.special.hermite_polynomial_h(x, n)")
    spec.write_text(SPEC.format(dt="float32", init="        pass", args="x, n", expr=expr,
                                inputs="torch.randn(37, dtype=DT), torch.randint(0, 12, (37,)).to(DT)"))
    res = lower_spec(spec)
    assert res.source is not None, res.diagnosis
    ref = load_module(spec, "ref_special_sm90")
    path = tmp_path / "cand_special_sm90.py"
    path.write_text(res.source)
    cand = load_module(path, "cand_special_sm90")
    torch.manual_seed(0)
    launches = sc.record_launches(cand.ModelNew(), ref.get_inputs())
    assert len([ln for ln in launches if ln.kernel.startswith("special")]) == 4
    fits = sc.compile_launches(res.source, launches)
    bad = [f.why() for f in fits if not f.ok]
    assert not bad, bad
