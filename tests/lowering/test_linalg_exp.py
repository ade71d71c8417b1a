"""matrix_exp (workbench/lowering/linalg_exp.py) against PyTorch's fp32 and against its fp64 in fp32, fp16 and bf16
(the dtypes OpInfo gives it): norms below and far above the scaling threshold (no squaring, about 6 squarings), a batch,
1 x 1, a 0 x 0 batch and a 64 x 64 matrix; the launches compile for sm_90. fp16 and bf16 are judged against fp64
only: PyTorch's CPU kernel computes them in half precision (on OpInfo's 5 x 5 samples it is off by 2e4, or NaN),
this one in fp32, rounded once."""
from __future__ import annotations

from pathlib import Path

import pytest
import torch

from tests.lowering.helpers import flat, load_module
from tests.lowering.test_primitives import SPEC, _family
from workbench.harness.policy import check_source
from workbench.lowering import lower_spec
from workbench.lowering import sm90_check as sc
from workbench.tolerances import tolerance_for

# the fp32 case squares about 6 times (||8 a||_1 is about 50); in fp16 exp of it would overflow, so halves stop at `a`
SMALL = ("torch.linalg.matrix_exp(a * 0.05), torch.linalg.matrix_exp(a), torch.linalg.matrix_exp(a[:, :1, :1]), "
         "torch.linalg.matrix_exp(a[:, :0, :0]), torch.linalg.matrix_exp(b * 0.1)")
CASES = {"expm": ("a, b", SMALL + ", torch.matrix_exp(a[0] * 8.0)",
                  "torch.randn(3, 5, 5, dtype=DT), torch.randn(64, 64, dtype=DT)")}


def test_matrix_exp_fp32(tmp_path: Path) -> None:
    _family(tmp_path, "expm", "float32", CASES)


@pytest.mark.parametrize("dt", ["float32", "float16", "bfloat16"])
def test_matrix_exp_against_fp64_and_sm90(tmp_path: Path, dt: str) -> None:
    args, expr, inputs = CASES["expm"]
    expr = expr if dt == "float32" else SMALL
    spec = tmp_path / f"expm64_{dt}.py"
    spec.write_text(SPEC.format(dt=dt, init="        pass", args=args, expr=expr, inputs=inputs))
    res = lower_spec(spec)
    assert res.source is not None, res.diagnosis
    path = tmp_path / f"cand_expm64_{dt}.py"
    path.write_text(res.source)
    cand, ref = load_module(path, f"cand_expm64_{dt}"), load_module(spec, f"ref_expm64_{dt}")
    torch.manual_seed(1)
    inp = ref.get_inputs()
    with sc.recording() as launches, torch.no_grad():
        got = flat(cand.ModelNew()(*inp))
    want = flat(ref.Model()(*[x.double() for x in inp]))
    atol, rtol = tolerance_for(getattr(torch, dt))
    for i, (g, w) in enumerate(zip(got, want)):
        assert g.dtype == getattr(torch, dt)
        torch.testing.assert_close(g.double(), w, atol=atol, rtol=rtol, msg=lambda m, i=i: f"output {i}: {m}")
    if dt != "float32":
        return
    assert check_source(res.source) == []  # the harness's policy (pinv once called torch.broadcast_to)
    bad = [f.why() for f in sc.compile_launches(res.source, launches) if not f.ok]
    assert launches and not bad, bad
