"""The primitives added for the ATen suite's unsupported ops, against PyTorch on odd shapes in every dtype
they support (tolerances: workbench/tolerances.py): asin/acos/i0/copysign/ldexp, frexp, diagonal views,
diagonal_scatter, index_select, addmv/addbmm (rewritten to mm), sort/argsort/topk/kthvalue/median/
nanmedian (stable bitonic sort of (value, column) keys) and cummax/cummin, ties and nans included."""
from __future__ import annotations

from pathlib import Path

import pytest

from tests.lowering.test_primitives import FLOATS, R, _family
from workbench.lowering import lower_spec

TIES = "torch.randint(0, 3, ({}), dtype=DT)"
# distinct values (exact in bf16): torch leaves the order of ties unspecified outside a stable sort
DISTINCT = "((torch.randperm({0} * {1}).reshape({0}, {1}) - {0} * {1} // 2) / 4).to(DT)"
NAN = "torch.where(torch.rand({0}) > 0.7, float('nan'), torch.randn({0})).to(DT)"

MATH_AND_COPIES = {
    "inverse_trig": ("a", "torch.asin(a) + torch.acos(a) * 0.5", "torch.rand(5, 7, dtype=DT) * 2.2 - 1.1"),
    "i0": ("a", "torch.special.i0(a * 20)", R.format("3, 11")),   # both the series (|x| <= 30) and the asymptote
    "copysign_ldexp": ("a, b", "torch.copysign(a, b) + torch.copysign(b, -0.0) + "
                       "torch.ldexp(a, (b * 5).round().to(torch.int32))", f"{R.format('5, 7')}, {R.format('7')}"),
    "addmv": ("c, a, v", "torch.addmv(c, a, v) + torch.addmv(c[:1], a, v, beta=0.5, alpha=2.0)",
              f"{R.format('5')}, {R.format('5, 7')}, {R.format('7')}"),
    "addbmm": ("c, a, b", "torch.addbmm(c, a, b, beta=0.0, alpha=0.7) + torch.addbmm(c, a, b)",
               f"{R.format('5, 3')}, {R.format('4, 5, 6')}, {R.format('4, 6, 3')}"),
    "diagonal": ("x", "torch.diagonal(x, 1) * 2 + torch.diagonal(x.transpose(0, 1), -1)", R.format("5, 6")),
    "diagonal_3d": ("x", "torch.diagonal(x, -1, 2, 0).sum(-1) + torch.diag_embed(x[0, 0]).sum()", R.format("4, 3, 6")),
    "diagonal_scatter": ("x, s", "torch.diagonal_scatter(x, s, 1) + 1", f"{R.format('4, 6')}, {R.format('4')}"),
    # no dim argument: the schema's default 0 (the lowering once passed dim=None)
    "split_default_dim": ("x", "torch.split_with_sizes_copy(x, [1, 3, 1]), torch.split(x, 2)[1] * 3, "
                          "torch.unbind(x)[2] + 1", R.format("5, 4")),
    # a 0-d x or index is read as 1-d of size 1, in every mix torch allows
    "gather_scatter_0d": ("x, i, j, k", "torch.gather(x[0, 0], 0, i), torch.gather(x[1], 0, j), "
                          "torch.gather(x[0, 0], 0, k), torch.scatter_add(x[0, 0], 0, k, x[2, :1]), "
                          "torch.scatter_add(x[0], 0, j, x[1, 1]), torch.scatter_add(x[0, 0], 0, i, x[1, :2])",
                          f"{R.format('3, 4')}, torch.tensor([0, 0]), torch.tensor(2), torch.tensor(0)"),
    "repeat": ("x", "x.repeat(2, 1, 3), torch.tile(x[0], (3,)), x.repeat(1, 1)", R.format("2, 3")),
    "index_select": ("x, i", "torch.index_select(x, 1, i) + torch.index_select(x, 0, i[2]).sum()",
                     f"{R.format('6, 7')}, torch.randint(0, 6, (4,))"),
}


@pytest.mark.parametrize("dt", FLOATS)
def test_math_and_copies(tmp_path: Path, dt: str) -> None:
    _family(tmp_path, "math_copies", dt, MATH_AND_COPIES)


# 0, inf, nan, fp32 subnormals (1e-40, 6e-39), values that are normal in fp32 but not in fp16
SPECIAL = ("torch.tensor([0., -0., float('inf'), -float('inf'), float('nan'), 1e-40, -3.5, 1.0, 0.75, 6e-39, 1e-6, "
           "-7e4]).to(DT)")


@pytest.mark.parametrize("dt", (*FLOATS, "float64"))
def test_frexp(tmp_path: Path, dt: str) -> None:
    # bf16 subnormals are left out: the interpreter flushes them to 0 when it widens bf16 to fp32
    special = SPECIAL.replace("1e-40", "1e-30").replace("6e-39", "-2e-37") if dt == "bfloat16" else SPECIAL
    _family(tmp_path, "frexp", dt, {"frexp": ("x, y", "torch.frexp(x * 100), torch.frexp(y.t())",
                                              f"{R.format('5, 7')}, {special}.reshape(2, 6) * 1")})


SORTS = {
    "sort": ("x", "torch.sort(x, dim=1)[0] * 2, torch.sort(x, dim=0, descending=True)[1]", DISTINCT.format(5, 7)),
    "topk": ("x", "torch.topk(x, 3, dim=1)[0] + 1, torch.topk(x, 2, dim=0, largest=False)[1]", DISTINCT.format(4, 11)),
    "kthvalue": ("x", "torch.kthvalue(x, 2, dim=1)[0], torch.kthvalue(x, 3, 0, keepdim=True)[1]",
                 DISTINCT.format(5, 6)),
    "median": ("x", "torch.median(x, 1)[0], torch.median(x, 0, keepdim=True)[1], torch.median(x), "
               "torch.nanmedian(x, 1)[0], torch.nanmedian(x)", DISTINCT.format(5, 6)),
    "nan": ("x", "torch.sort(x, dim=1, stable=True), torch.sort(x, dim=1, descending=True, stable=True), "
            "torch.median(x, 1), torch.nanmedian(x, 1)", NAN.format("6, 13")),
    "cum": ("x", "torch.cummax(x, 1)[0] * 2, torch.cummax(x, 0)[1], torch.cummin(x, -1)", R.format("5, 300")),
    "cum_nan": ("x", "torch.cummax(x, 1), torch.cummin(x, 1)", NAN.format("6, 13")),
}
TIED = {  # integer-valued keys: many ties, which a stable sort and torch's cummax/cummin order by index
    "sort_ties": ("x", "torch.sort(x, dim=-1, stable=True)[1], torch.sort(x, descending=True, stable=True)[1], "
                  "torch.argsort(x[0], stable=True)", TIES.format("3, 9")),
    "cum_ties": ("x", "torch.cummax(x, 1), torch.cummin(x, 0)", TIES.format("4, 9")),
}


@pytest.mark.parametrize("dt", FLOATS)
def test_sort_family(tmp_path: Path, dt: str) -> None:
    _family(tmp_path, "sorts", dt, {**SORTS, **TIED})


@pytest.mark.parametrize("dt", ("int32", "uint8"))
def test_sort_family_integer(tmp_path: Path, dt: str) -> None:
    _family(tmp_path, "sorts_int", dt, {**TIED, "median": ("x", "torch.median(x, 1), torch.kthvalue(x, 4, 0)",
                                                           "torch.randperm(35).reshape(5, 7).to(DT)")})


def _lower_one(spec: Path, args: str, expr: str, inputs: str):  # noqa: ANN202 - a LoweringResult
    spec.write_text(f"import torch\nimport torch.nn as nn\n\n\nclass Model(nn.Module):\n"
                    f"    def forward(self, {args}):\n        return {expr}\n\n\n"
                    f"def get_inputs():\n    return [{inputs}]\n\n\ndef get_init_inputs():\n    return []\n")
    return lower_spec(spec)


def test_sort_limits_are_diagnosed(tmp_path: Path) -> None:
    """Dtypes without keys are named, not run through torch (64-bit values sort since 2026-12-07:
    tests/lowering/test_sort_wide.py)."""
    res = _lower_one(tmp_path / "sort_f8.py", "x", "torch.sort(x, dim=1)[0]",
                     "torch.randn(3, 5).to(torch.float8_e4m3fn)")
    assert res.source is None and res.diagnosis.startswith("unsupported: aten.sort.default on torch.float8_e4m3fn"), \
        res.diagnosis


SORTED = "torch.sort(torch.randint(-4, 5, ({},)).to(DT), dim=-1).values"   # ties: equal boundaries and values
SEARCHES = {
    "searchsorted_1d": ("b, x", "torch.searchsorted(b, x), torch.searchsorted(b, x, right=True, out_int32=True), "
                        "torch.searchsorted(b, x[0], side='right')", f"{SORTED.format('9')}, "
                        "torch.randint(-5, 6, (7, 5)).to(DT)"),
    "searchsorted_rows": ("b, x", "torch.searchsorted(b, x, side='right'), torch.searchsorted(b, x)",
                          f"{SORTED.format('3, 4, 6')}, torch.randint(-5, 6, (3, 4, 5)).to(DT)"),
    "bucketize": ("x, b", "torch.bucketize(x, b), torch.bucketize(x[1:, 2:], b, right=True)",
                  f"torch.randint(-6, 7, (6, 7)).to(DT), {SORTED.format('13')}"),
    "empty_boundaries": ("x, b", "torch.bucketize(x, b[:0]), torch.searchsorted(b[:1], x)",
                         f"torch.randint(-6, 7, (5,)).to(DT), {SORTED.format('3')}"),
}
# a NaN value goes past every boundary; a NaN boundary (sorted last) steers the search as in PyTorch's loop
NAN_SEARCHES = {
    "nan": ("x, b", "torch.bucketize(x, b), torch.searchsorted(b, x, right=True), torch.bucketize(x, b[:4])",
            f"{NAN.format('5, 3')}, torch.tensor([-1., 0., 0., 1., float('nan')]).to(DT)"),
    "fractions": ("b, x", "torch.searchsorted(b, x), torch.bucketize(x, b[1], right=True)",
                  f"torch.sort({R.format('2, 17')}, dim=-1).values, {R.format('2, 9')}"),
}


@pytest.mark.parametrize("dt", (*FLOATS, "float64", "int64", "int32", "uint8"))
def test_searchsorted_bucketize(tmp_path: Path, dt: str) -> None:
    cases = {**SEARCHES, **(NAN_SEARCHES if dt.startswith(("float", "bfloat")) else {})}
    if dt == "uint8":  # no negatives
        cases = {k: (a, e, i.replace("-4, 5", "0, 9").replace("-5, 6", "0, 11").replace("-6, 7", "0, 13"))
                 for k, (a, e, i) in cases.items()}
    _family(tmp_path, "searches", dt, cases)


def test_searchsorted_mixed_dtypes(tmp_path: Path) -> None:
    """Boundaries and values of different dtypes are compared in their common dtype, as torch does."""
    _family(tmp_path, "searches_mixed", "float32", {
        "mixed": ("b, x, y", "torch.searchsorted(b, x), torch.bucketize(y, b.half(), right=True)",
                  f"torch.sort({R.format('11')}).values * 4, torch.randint(-5, 6, (4, 3)), {R.format('6')} * 4")})


@pytest.mark.parametrize("dt", FLOATS)
def test_searchsorted_sorter(tmp_path: Path, dt: str) -> None:
    """Unsorted boundaries searched through their sorter (1-d and per row), both sides, ties among them; a Python
    scalar value (searchsorted.Scalar)."""
    _family(tmp_path, "sorter", dt, {"sorter": (
        "b, x, c", "torch.searchsorted(b, x, sorter=torch.argsort(b)), "
        "torch.searchsorted(b, x, side='right', sorter=torch.argsort(b)), "
        "torch.searchsorted(c, x, sorter=torch.argsort(c, dim=-1), out_int32=True), "
        "torch.searchsorted(torch.sort(b).values, 1), "
        "torch.searchsorted(b, 2.5, side='right', sorter=torch.argsort(b))",
        "torch.randint(-4, 5, (9,)).to(DT), torch.randint(-5, 6, (7, 5)).to(DT), torch.randint(-4, 5, (7, 6)).to(DT)")})


def test_isin_through_sort_and_searchsorted(tmp_path: Path) -> None:
    """Above ~10 elements per test element torch's isin decomposes to sort + searchsorted + index."""
    _family(tmp_path, "isin", "int32", {
        "isin": ("x, t", "torch.isin(x, t), torch.isin(x, t, invert=True)",
                 "torch.randint(0, 500, (37, 50), dtype=DT), torch.randint(0, 500, (300,), dtype=DT)")})


@pytest.mark.parametrize("dt", (*FLOATS, "float64"))
def test_round_decimals(tmp_path: Path, dt: str) -> None:
    """decimals > 0, < 0 and 0, near-halfway values (k / 200), a 0-d operand; decimals were once dropped."""
    _family(tmp_path, "round", dt, {"round": (
        "x", "torch.round(x, decimals=2), torch.round(x * 37, decimals=-1), torch.round(x, decimals=0), "
        "torch.round(x[0, 0] * 7.7, decimals=3)", "(torch.randint(-2000, 2000, (5, 7)) / 200).to(DT)")})


LGAMMA_SPECIAL = ("torch.tensor([0., -0., 1., 2., 0.5, -0.5, -2., -3.0001, -7.5, 1e-3, 30.5, 170., 1e4, -1e3 - 0.3, "
                  "float('inf'), -float('inf'), float('nan')]).to(DT)")


@pytest.mark.parametrize("dt", (*FLOATS, "float64"))
def test_lgamma(tmp_path: Path, dt: str) -> None:
    """Both branches (Lanczos, reflection), the zeros at 1 and 2, poles, large |x|, inf and nan; mvlgamma."""
    special = LGAMMA_SPECIAL.replace("1e4, -1e3 - 0.3", "1e3, -99.3") if dt in ("float16", "bfloat16") else \
        LGAMMA_SPECIAL
    _family(tmp_path, "lgamma", dt, {"lgamma": (
        "x, y", "torch.lgamma(x * 10), torch.lgamma(y), torch.mvlgamma(x.abs() * 5 + 3, 3)",
        f"{R.format('6, 7')}, {special}")})


def test_searchsorted_sorter_compiles_for_sm90(tmp_path: Path) -> None:

    from tests.lowering.helpers import load_module
    from tests.lowering.test_primitives import SPEC
    from workbench.lowering import sm90_check as sc

    spec = tmp_path / "sorter_sm90.py"
    spec.write_text(SPEC.format(dt="float16", init="        pass", args="b, x",
                                expr="torch.searchsorted(b, x, sorter=torch.argsort(b)), torch.searchsorted(b, x)",
                                inputs="torch.randn(9).to(DT), torch.randn(7, 5).to(DT)"))
    res = lower_spec(spec)
    assert res.source is not None, res.diagnosis
    path = tmp_path / "cand_sorter_sm90.py"
    path.write_text(res.source)
    cand, ref = load_module(path, "cand_sorter_sm90"), load_module(spec, "ref_sorter_sm90")
    launches = sc.record_launches(cand.ModelNew(), ref.get_inputs())
    assert len(launches) == 3
    bad = [f.why() for f in sc.compile_launches(res.source, launches) if not f.ok]
    assert not bad, bad
