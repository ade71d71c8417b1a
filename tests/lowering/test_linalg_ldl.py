"""Bunch-Kaufman LDL^T (workbench/lowering/linalg_ldl.py) element by element against PyTorch's fp32 (LAPACK's ssytrf
for n below its block size: the same LD, pivots and info) and against its fp64: random symmetric indefinite
batches (interchanges and 2 x 2 pivots: the test checks they occur), an SPD matrix (no pivoting), a zero diagonal
(a 2 x 2 pivot first), a zero matrix (info), n = 1, a 0 x 0 batch; ldl_solve on matrix and broadcast batches."""
from __future__ import annotations

from pathlib import Path

import torch

from tests.lowering.helpers import flat, load_module
from tests.lowering.test_primitives import SPEC, _family
from workbench.harness.policy import check_source
from workbench.lowering import lower_spec
from workbench.lowering import sm90_check as sc
from workbench.tolerances import tolerance_for

L = "torch.linalg"
SYM = "(lambda x: x + x.mT)(torch.randn({}))"
CASES = {
    "ldl": ("a, p, z", f"{L}.ldl_factor_ex(a), {L}.ldl_factor(p), {L}.ldl_factor_ex(z), {L}.ldl_factor_ex(z * 0.0), "
            f"{L}.ldl_factor(a[:, :1, :1]), {L}.ldl_factor(a[:0]), {L}.ldl_solve(*{L}.ldl_factor(a), a[..., :3]), "
            f"{L}.ldl_solve(*{L}.ldl_factor(p), a[:, :5, :2]), {L}.ldl_solve(*{L}.ldl_factor(a, hermitian=True), a)",
            f"{SYM.format('4, 7, 7')}, (lambda x: x @ x.mT + torch.eye(5))(torch.randn(5, 5)), "
            "torch.tensor([[0.0, 1.0, 2.0], [1.0, 0.0, 3.0], [2.0, 3.0, 0.0]])"),
}


def test_linalg_ldl_fp32(tmp_path: Path) -> None:
    _family(tmp_path, "ldl", "float32", CASES)


def test_linalg_ldl_pivots_occur_against_fp64_and_sm90(tmp_path: Path) -> None:
    """The inputs do pivot (LAPACK's pivots hold interchanges and 2 x 2 blocks); the lowered solves are as close to
    fp64's as the fp32 tolerance, the factors equal fp32's; the launches compile for sm_90."""
    args, expr, inputs = CASES["ldl"]
    spec = tmp_path / "ldl64.py"
    spec.write_text(SPEC.format(dt="float32", init="        pass", args=args, expr=expr, inputs=inputs))
    res = lower_spec(spec)
    assert res.source is not None, res.diagnosis
    path = tmp_path / "cand_ldl64.py"
    path.write_text(res.source)
    cand, ref = load_module(path, "cand_ldl64"), load_module(spec, "ref_ldl64")
    torch.manual_seed(1)
    inp = ref.get_inputs()
    piv = torch.linalg.ldl_factor(inp[0])[1]
    assert (piv < 0).any() and (piv.abs() != torch.arange(1, 8, dtype=piv.dtype)).any()
    with sc.recording() as launches, torch.no_grad():
        got = flat(cand.ModelNew()(*inp))
    want = flat(ref.Model()(*[x.double() for x in inp]))
    atol, rtol = tolerance_for(torch.float32)
    for i in (-3, -2, -1):  # the solves: factors of fp64 may pivot differently, the solution may not
        torch.testing.assert_close(got[i].double(), want[i], atol=atol, rtol=rtol, msg=lambda m, i=i: f"out {i}: {m}")
    ours = [ln for ln in launches if ln.kernel.startswith("ldl_")]  # the pointwise kernels are tested elsewhere
    assert {"ldl", "solve"} <= {ln.kernel.rsplit("_", 1)[-1] for ln in ours}
    assert check_source(res.source) == []  # the harness's policy (pinv once called torch.broadcast_to)
    bad = [f.why() for f in sc.compile_launches(res.source, ours) if not f.ok]
    assert not bad, bad
