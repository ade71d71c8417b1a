"""Householder QR (workbench/lowering/linalg_qr.py) in fp32, element by element against PyTorch's fp32 (LAPACK's
sgeqrf / sorgqr / sormqr conventions: R's diagonal signs, the packed reflectors and tau) and against its fp64:
geqrf, linalg.qr (reduced, complete, r) and torch.qr of tall, wide and square batches, a 1 x 1, a column of
zeros below the diagonal (tau = 0), a 0-column input (complete Q is the identity), a 64 x 40 matrix;
householder_product and ormqr (left and right, transposed or not, one column)."""
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
GQ = "torch.geqrf"
CASES = {
    "qr": ("a, z, g", f"{GQ}(a), {L}.qr(a), {L}.qr(a.mT), {L}.qr(a, mode='complete'), {L}.qr(a.mT, mode='r'), "
           f"torch.qr(a[0]), {L}.qr(a[:, :1, :1]), {L}.qr(z), {L}.qr(a[:, :, :0], mode='complete'), {L}.qr(g)",
           # z: its first column is zero below the diagonal, so H_1 = I (tau = 0, R's diagonal keeps the sign)
           "torch.randn(2, 7, 4), torch.tensor([[-2.0, 1.0, 3.0], [0.0, 2.0, -1.0], [0.0, 4.0, 0.5]]), "
           "torch.randn(64, 40)"),
    "orm": ("f, c", f"{L}.householder_product(*{GQ}(f)), {L}.householder_product(*{GQ}(f.mT[:, :, :3])), "
            f"torch.ormqr(*{GQ}(f), c), torch.ormqr(*{GQ}(f), c, transpose=True), "
            f"torch.ormqr(*{GQ}(f), c.mT, left=False), torch.ormqr(*{GQ}(f), c.mT, left=False, transpose=True), "
            f"torch.ormqr(*{GQ}(f[0]), c[0, :, :1])",
            "torch.randn(2, 6, 6), torch.randn(2, 6, 3)"),
}
EXPR = ", ".join(e for _, e, _ in CASES.values())


def test_linalg_qr_fp32(tmp_path: Path) -> None:
    _family(tmp_path, "qr", "float32", CASES)


def test_linalg_qr_against_fp64_and_sm90(tmp_path: Path) -> None:
    """As close to PyTorch's fp64 answer as the fp32 tolerance; the launches compile for sm_90."""
    args = ", ".join(a for a, _, _ in CASES.values())
    inputs = ", ".join(i for _, _, i in CASES.values())
    spec = tmp_path / "qr64.py"
    spec.write_text(SPEC.format(dt="float32", init="        pass", args=args, expr=EXPR, inputs=inputs))
    res = lower_spec(spec)
    assert res.source is not None, res.diagnosis
    path = tmp_path / "cand_qr64.py"
    path.write_text(res.source)
    cand, ref = load_module(path, "cand_qr64"), load_module(spec, "ref_qr64")
    torch.manual_seed(1)
    inp = ref.get_inputs()
    with sc.recording() as launches, torch.no_grad():
        got = flat(cand.ModelNew()(*inp))
    want = flat(ref.Model()(*[x.double() for x in inp]))
    atol, rtol = tolerance_for(torch.float32)
    for i, (g, w) in enumerate(zip(got, want)):
        torch.testing.assert_close(g.double(), w, atol=atol, rtol=rtol, msg=lambda m, i=i: f"output {i}: {m}")
    assert {ln.kernel.rsplit("_", 1)[-1] for ln in launches} == {"qr", "orm"}
    assert check_source(res.source) == []  # the harness's policy (pinv once called torch.broadcast_to)
    bad = [f.why() for f in sc.compile_launches(res.source, launches) if not f.ok]
    assert not bad, bad
