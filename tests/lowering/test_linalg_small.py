"""Batched small linear algebra (workbench/lowering/linalg_small.py) in fp32, checked against an fp64 reference
(the same ops in float64, rounded to fp32) and against PyTorch's fp32: inv, det, slogdet, logdet, solve (matrix and
vector right-hand sides, broadcast batches, left=False), cholesky (lower, upper, the deprecated torch.cholesky),
cholesky_solve and cholesky_inverse (lower and upper factors),
solve_triangular and triangular_solve (upper, lower, left, right, transposed, unit diagonal); odd sizes 5 and 7,
lu_factor, lu, lu_unpack and lu_solve (square, tall and wide; adjoint and right-hand solves); a 0 x 0 and an
empty batch."""
from __future__ import annotations

from pathlib import Path

import torch

from tests.lowering.helpers import flat, load_module
from tests.lowering.test_primitives import SPEC, _family
from workbench.lowering import lower_spec
from workbench.lowering import sm90_check as sc
from workbench.tolerances import tolerance_for

L = "torch.linalg"
# well conditioned: the identity times n plus noise (SPD for Cholesky)
WELL = "(torch.randn({s}) + {n} * torch.eye({n}))"
SPD = "(lambda a: a @ a.mT + {n} * torch.eye({n}))(torch.randn({s}))"
CASES = {
    "gauss": ("a, b, v", f"{L}.inv(a), {L}.det(a), {L}.slogdet(a), torch.logdet(a[0]), {L}.solve(a, b), "
           f"{L}.solve(a, v), {L}.solve(a[0], b), {L}.solve(a, b.mT, left=False), {L}.inv_ex(a[:, :0, :0]), "
           f"{L}.det(a[:0]), {L}.solve_ex(a[1], b[1, :, 0])",
           f"{WELL.format(s='2, 5, 5', n=5)}, torch.randn(2, 5, 3), torch.randn(2, 5)"),
    "chol": ("s", f"{L}.cholesky(s), {L}.cholesky(s, upper=True), {L}.cholesky_ex(s[0]), torch.cholesky(s[1]), "
             f"torch.cholesky(s, upper=True), {L}.cholesky(s[:, :0, :0]), "
             "torch.cholesky_solve(s[0, :, :3], torch.linalg.cholesky(s)), "
             "torch.cholesky_solve(s[:, :, :2], torch.linalg.cholesky(s, upper=True), upper=True), "
             "torch.cholesky_inverse(torch.linalg.cholesky(s[0])), "
             "torch.cholesky_inverse(torch.linalg.cholesky(s, upper=True), upper=True)", SPD.format(s="3, 7, 7", n=7)),
    "plu": ("w, e", f"{L}.lu_factor(w), {L}.lu_factor_ex(w[0, :3]), {L}.lu(w), {L}.lu(w.mT[1]), torch.lu(w), "
           f"torch.lu_unpack(*{L}.lu_factor(w[:, :4])), {L}.lu_solve(*{L}.lu_factor(w[:, :, :7]), e), "
           f"{L}.lu_solve(*{L}.lu_factor(w[0, :, :7]), e, adjoint=True), "
           f"{L}.lu_solve(*{L}.lu_factor(w[:, :, :7]), e.mT, left=False), "
           f"{L}.lu_solve(*{L}.lu_factor(w[:, :, :7]), e.mT, left=False, adjoint=True), "
           f"torch.lu_solve(e, *torch.linalg.lu_factor(w[:, :, :7]))",
           f"{WELL.format(s='2, 7, 9', n=7).replace('torch.eye(7)', 'torch.eye(7, 9)')}, torch.randn(2, 7, 3)"),
    "tri": ("t, c", f"{L}.solve_triangular(t, c, upper=True), {L}.solve_triangular(t, c, upper=False), "
            f"{L}.solve_triangular(t, c.mT, upper=True, left=False), "
            f"{L}.solve_triangular(t[0], c, upper=False, unitriangular=True), torch.triangular_solve(c, t), "
            "torch.triangular_solve(c, t, upper=False, transpose=True), "
            "torch.triangular_solve(c[0], t[1], unitriangular=True)",
            f"{WELL.format(s='2, 7, 7', n=7)}, torch.randn(2, 7, 4)"),
}
EXPR = ", ".join(e for _, e, _ in CASES.values())


def test_linalg_small_fp32(tmp_path: Path) -> None:
    _family(tmp_path, "linalg", "float32", CASES)


def test_linalg_small_against_fp64(tmp_path: Path) -> None:
    """The lowered fp32 results are as close to the fp64 answer as the fp32 tolerance: the same spec in float64
    is the referee (PyTorch's LAPACK in double precision)."""
    args = ", ".join(a for a, _, _ in CASES.values())
    inputs = ", ".join(i for _, _, i in CASES.values())
    spec = tmp_path / "linalg64.py"
    spec.write_text(SPEC.format(dt="float32", init="        pass", args=args, expr=EXPR, inputs=inputs))
    res = lower_spec(spec)
    assert res.source is not None, res.diagnosis
    path = tmp_path / "cand_linalg64.py"
    path.write_text(res.source)
    cand, ref = load_module(path, "cand_linalg64"), load_module(spec, "ref_linalg64")
    torch.manual_seed(1)
    inp = ref.get_inputs()
    got = flat(cand.ModelNew()(*inp))
    want = flat(ref.Model()(*[x.double() for x in inp]))
    atol, rtol = tolerance_for(torch.float32)
    for i, (g, w) in enumerate(zip(got, want)):
        if w.dtype.is_floating_point:
            torch.testing.assert_close(g.double(), w, atol=atol, rtol=rtol, msg=lambda m, i=i: f"output {i}: {m}")
        else:
            assert torch.equal(g.long(), w.long()), f"output {i}"


def test_linalg_kernels_compile_for_sm90(tmp_path: Path) -> None:
    args = ", ".join(a for a, _, _ in CASES.values())
    inputs = ", ".join(i for _, _, i in CASES.values())
    spec = tmp_path / "linalg_sm90.py"
    spec.write_text(SPEC.format(dt="float32", init="        pass", args=args, expr=EXPR, inputs=inputs))
    res = lower_spec(spec)
    assert res.source is not None, res.diagnosis
    path = tmp_path / "cand_linalg_sm90.py"
    path.write_text(res.source)
    cand, ref = load_module(path, "cand_linalg_sm90"), load_module(spec, "ref_linalg_sm90")
    launches = sc.record_launches(cand.ModelNew(), ref.get_inputs())
    assert len(launches) >= 5
    bad = [f.why() for f in sc.compile_launches(res.source, launches) if not f.ok]
    assert not bad, bad
