"""Jacobi eigensolver and SVD (workbench/lowering/linalg_jacobi.py) in fp32, against PyTorch's fp32 and against its
fp64 (the same spec in float64, the referee): eigvalsh (lower and upper triangle of a non-symmetric input, so the
triangle read matters), eigh's values and the invariants of its vectors (V diag(W) V^T, V^T V: the vectors
themselves are unique only up to sign), svdvals of a tall batch, U diag(S) Vh and U^T U of a wide one, pinv (SVD and
hermitian, tall and wide, default, atol and rtol cutoffs, a rank-deficient input), pinverse, matrix_rank (SVD and
hermitian), matrix_norm nuc, cond; n = 1 and a 0 x 0 batch. n = 64 (a 64 x 64 eigvalsh, a 64 x 21 svdvals) is the
slow test: about 20 s of Triton's interpreter."""
from __future__ import annotations

from pathlib import Path

import pytest
import torch

from tests.lowering.helpers import flat, load_module
from tests.lowering.test_primitives import SPEC
from workbench.harness.policy import check_source
from workbench.lowering import lower_spec
from workbench.lowering import sm90_check as sc
from workbench.tolerances import tolerance_for

L = "torch.linalg"
SYM = "(lambda x: x + x.mT)(torch.randn({s}))"
CASES = {
    "eigh": ("a, s", f"{L}.eigvalsh(a), {L}.eigvalsh(a, UPLO='U'), "
             f"(lambda w, v: (w, v @ torch.diag_embed(w) @ v.mT, v.mT @ v))(*{L}.eigh(s, UPLO='U')), "
             f"{L}.eigvalsh(a[:, :1, :1]), {L}.eigvalsh(a[:0]), {L}.matrix_rank(s, hermitian=True), "
             f"{L}.pinv(s, hermitian=True), {L}.pinv(s[0], hermitian=True, atol=1.5)",
             f"torch.randn(2, 5, 5), {SYM.format(s='2, 1, 6, 6')}"),
    "svd": ("w", f"{L}.svdvals(w), {L}.svdvals(w[0, :1, :1]), "
            f"(lambda u, s, vh: (u @ torch.diag_embed(s) @ vh, u.mT @ u))(*{L}.svd(w.mT, full_matrices=False)), "
            f"{L}.pinv(w), {L}.pinv(w[0], rtol=0.3), {L}.pinv(w[1], atol=1.0), torch.pinverse(w[1].mT), "
            f"{L}.matrix_rank(w), {L}.matrix_norm(w, 'nuc'), {L}.cond(w[:, :4, :4])",
            "torch.randn(2, 7, 5)"),
    # rank 2 by construction, 6 x 5: its numerical rank and pinv depend on the dtype's eps (the default cutoff), so
    # this case is compared with PyTorch's fp32 only
    "deficient": ("d", f"{L}.matrix_rank(d), {L}.pinv(d)", "torch.randn(2, 6, 2) @ torch.randn(2, 2, 5)"),
}
BIG = {"big": ("g, t", f"{L}.eigvalsh(g), {L}.svdvals(t)", f"{SYM.format(s='64, 64')}, torch.randn(64, 21)")}


def _lowered(tmp_path: Path, stem: str, cases: dict[str, tuple[str, str, str]]) -> tuple[str, object, object]:
    args = ", ".join(a for a, _, _ in cases.values())
    expr = ", ".join(e for _, e, _ in cases.values())
    inputs = ", ".join(i for _, _, i in cases.values())
    spec = tmp_path / f"{stem}.py"
    spec.write_text(SPEC.format(dt="float32", init="        pass", args=args, expr=expr, inputs=inputs))
    res = lower_spec(spec)
    assert res.source is not None, res.diagnosis
    path = tmp_path / f"cand_{stem}.py"
    path.write_text(res.source)
    return res.source, load_module(path, f"cand_{stem}"), load_module(spec, f"ref_{stem}")


def _check(tmp_path: Path, stem: str, cases: dict[str, tuple[str, str, str]], fp32_only: int = 0) -> None:
    """One run of the lowered candidate, under the launch recorder: every output within the fp32 tolerance of
    PyTorch's fp32 (integers equal); the float outputs but the last `fp32_only` as close to PyTorch's fp64 answer
    as that tolerance too; then the kernels, as launched here, compile for sm_90 within its limits."""
    source, cand, ref = _lowered(tmp_path, stem, cases)
    torch.manual_seed(1)
    inp = ref.get_inputs()
    with sc.recording() as launches, torch.no_grad():
        got = flat(cand.ModelNew()(*inp))
    want32 = flat(ref.Model()(*inp))
    want64 = flat(ref.Model()(*[x.double() for x in inp]))
    assert len(got) == len(want32)
    atol, rtol = tolerance_for(torch.float32)
    for i, (g, w, w64) in enumerate(zip(got, want32, want64)):
        assert g.shape == w.shape and g.dtype == w.dtype, f"output {i}: {g.shape} {g.dtype} vs {w.shape} {w.dtype}"
        if not w.dtype.is_floating_point:
            assert torch.equal(g, w), f"output {i}"
            continue
        torch.testing.assert_close(g, w, atol=atol, rtol=rtol, msg=lambda m, i=i: f"output {i} (fp32): {m}")
        if i < len(got) - fp32_only:
            torch.testing.assert_close(g.double(), w64, atol=atol, rtol=rtol, msg=lambda m, i=i: f"output {i}: {m}")
    ours = [ln for ln in launches if ln.kernel.startswith("jacobi_")]  # the matmuls etc. are tested elsewhere
    assert ours
    assert check_source(source) == []  # the harness's policy (pinv once called torch.broadcast_to)
    bad = [f.why() for f in sc.compile_launches(source, ours) if not f.ok]
    assert not bad, bad


def test_linalg_jacobi(tmp_path: Path) -> None:
    _check(tmp_path, "jacobi", CASES, fp32_only=2)  # the rank-deficient case's two outputs, last


@pytest.mark.slow  # about 30 s of the interpreter at n = 64
def test_linalg_jacobi_n64(tmp_path: Path) -> None:
    """n = 64, the largest a program holds; the NP = 64 kernels compile for sm_90."""
    _check(tmp_path, "jacobi_big", BIG)
