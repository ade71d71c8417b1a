"""polygamma(n, x) (workbench/lowering/polygamma.py) for n = 0..4 and 7 against PyTorch on odd shapes in every
dtype its OpInfo gives (fp32, fp16, bf16; PyTorch's CPU computes n >= 2 in the input dtype, so fp16 and bf16 take
n <= 1 only here), with the reflection half-line (x < 1/2), poles, inf and nan; against PyTorch's fp64 in fp32 at
the harness's fp32 tolerance; and its kernels compiled for sm_90 on the CPU."""
from __future__ import annotations

from pathlib import Path

import pytest
import torch

from tests.lowering.helpers import load_module
from tests.lowering.test_primitives import SPEC, _family
from workbench.harness.policy import check_source
from workbench.lowering import lower_spec
from workbench.lowering import sm90_check as sc
from workbench.tolerances import tolerance_for

X = ("torch.cat([torch.rand({n}) * 12 - 4, torch.tensor([0.0, -1.0, -2.0, 1.0, 0.5, 0.25, -0.5, -2.5, 1e-3, 30.0, "
     "float('inf'), float('nan')])]).to(DT)")


@pytest.mark.parametrize("dt", ["float32", "float16", "bfloat16"])
def test_polygamma(tmp_path: Path, dt: str) -> None:
    ns = range(0, 2) if dt != "float32" else (0, 1, 2, 3, 4, 7)
    expr = ", ".join(f"torch.polygamma({n}, x)" for n in ns) + ", torch.polygamma(1, x[3:8, None, None] + 2)"
    _family(tmp_path, "polygamma", dt, {"x": ("x", expr, X.format(n=37))})


def test_polygamma_bf16_high_orders_match_fp64(tmp_path: Path) -> None:
    """fp16/bf16 for n >= 2: PyTorch rounds every step to the input dtype, we round once; both near fp32."""
    spec = tmp_path / "pg_bf16.py"
    spec.write_text(SPEC.format(dt="bfloat16", init="        pass", args="x",
                                expr="torch.polygamma(2, x), torch.polygamma(3, x)",
                                inputs="(torch.rand(45) * 6 + 0.5).to(DT)"))
    res = lower_spec(spec)
    assert res.source is not None, res.diagnosis
    path = tmp_path / "cand_pg_bf16.py"
    path.write_text(res.source)
    cand = load_module(path, "cand_pg_bf16")
    torch.manual_seed(0)
    x = (torch.rand(45) * 6 + 0.5).to(torch.bfloat16)
    got = cand.ModelNew()(x)
    for n, g in zip((2, 3), got):
        want = torch.polygamma(n, x.double()).to(torch.bfloat16)
        torch.testing.assert_close(g.double(), want.double(), atol=2e-2, rtol=2e-2)


def test_polygamma_matches_fp64(tmp_path: Path) -> None:
    """fp32 results against PyTorch's fp64 rounded to fp32, at the harness's fp32 tolerance, away from the
    poles (where fp32's input rounding alone moves the value by more)."""
    xs = "torch.cat([torch.rand(61) * 20 + 0.05, -torch.rand(31) * 3 - 0.1, torch.tensor([-0.5, -1.5, -2.5])])"
    spec = tmp_path / "pg_fp64.py"
    ns = (0, 1, 2, 3, 4)
    spec.write_text(SPEC.format(dt="float32", init="        pass", args="x",
                                expr=", ".join(f"torch.polygamma({n}, x)" for n in ns), inputs=xs))
    res = lower_spec(spec)
    assert res.source is not None, res.diagnosis
    path = tmp_path / "cand_pg_fp64.py"
    path.write_text(res.source)
    cand = load_module(path, "cand_pg_fp64")
    torch.manual_seed(0)
    x = eval(xs)  # noqa: S307 - the test's own literal
    x = x[(x - x.round()).abs() > 0.05]  # 0.05 from a pole: polygamma(4) there is ~1e7, fp32-representable
    atol, rtol = tolerance_for(torch.float32)
    for n, g in zip(ns, cand.ModelNew()(x)):
        want = torch.polygamma(n, x.double()).float()
        torch.testing.assert_close(g, want, atol=atol, rtol=rtol, msg=lambda m, n=n: f"n={n}: {m}")


def test_polygamma_kernels_compile_for_sm90(tmp_path: Path) -> None:
    spec = tmp_path / "pg_sm90.py"
    spec.write_text(SPEC.format(dt="bfloat16", init="        pass", args="x",
                                expr="torch.polygamma(0, x), torch.polygamma(1, x), torch.polygamma(3, x)",
                                inputs=X.format(n=9)))
    res = lower_spec(spec)
    assert res.source is not None, res.diagnosis
    assert check_source(res.source) == []  # the harness's policy (a kernel once rebound `id`, helpers unbound)
    path = tmp_path / "cand_pg_sm90.py"
    path.write_text(res.source)
    cand, ref = load_module(path, "cand_pg_sm90"), load_module(spec, "ref_pg_sm90")
    torch.manual_seed(0)
    launches = sc.record_launches(cand.ModelNew(), ref.get_inputs())
    assert len(launches) == 3
    bad = [f.why() for f in sc.compile_launches(res.source, launches) if not f.ok]
    assert not bad, bad
