"""ctc_loss (workbench/lowering/ctc.py: the CTC alpha recursion, one Triton program per batch element) against
PyTorch in fp32, the only float dtype OpInfo's CPU ctc_loss has besides fp64: padded [N, S] and concatenated 1-D
targets, lengths as lists and tensors, repeated labels (a blank between them is required), an infeasible target
(inf, or 0 with zero_infinity), an empty target, every reduction, an unbatched input, blank != 0."""
from __future__ import annotations

from pathlib import Path

from tests.lowering.test_primitives import _family

LP = "torch.randn(7, 3, 5).log_softmax(2).to(DT)"
CASES = {
    "padded": ("lp, tg, il, tl", "torch.nn.functional.ctc_loss(lp, tg, il, tl, reduction='none'), "
               "torch.nn.functional.ctc_loss(lp, tg, il, tl), "
               "torch.nn.functional.ctc_loss(lp, tg, [7, 2, 6], [3, 3, 0], reduction='sum', zero_infinity=True), "
               "torch.nn.functional.ctc_loss(lp, tg, [7, 2, 6], [3, 3, 0], reduction='none')",
               f"{LP}, torch.tensor([[1, 1, 2, 4], [3, 2, 1, 1], [4, 4, 4, 4]]), torch.tensor([7, 5, 6]), "
               "torch.tensor([4, 3, 2])"),
    "concat": ("lq, cat, ql, cl", "torch.nn.functional.ctc_loss(lq, cat, ql, cl, blank=2, reduction='none'), "
               "torch.ctc_loss(lq, cat, [7, 6, 4], [3, 1, 2], 2, 1, False)",
               f"{LP}, torch.tensor([1, 1, 3, 4, 0, 0]), torch.tensor([7, 6, 4]), torch.tensor([3, 1, 2])"),
    "unbatched": ("lu, tu", "torch.nn.functional.ctc_loss(lu, tu, [9], [3], reduction='none'), "
                  "torch.nn.functional.ctc_loss(lu, tu, torch.tensor(9), torch.tensor(3), reduction='sum')",
                  "torch.randn(9, 4).log_softmax(1).to(DT), torch.tensor([3, 3, 1])"),
}


def test_ctc_loss(tmp_path: Path) -> None:
    _family(tmp_path, "ctc", "float32", CASES)


def test_ctc_kernel_compiles_for_sm90(tmp_path: Path) -> None:
    from tests.lowering.helpers import load_module
    from tests.lowering.test_primitives import SPEC
    from workbench.lowering import lower_spec
    from workbench.lowering import sm90_check as sc

    spec = tmp_path / "ctc_sm90.py"
    spec.write_text(SPEC.format(dt="float32", init="        pass", args="lp, tg, il, tl",
                                expr="torch.nn.functional.ctc_loss(lp, tg, il, tl, reduction='none')",
                                inputs="torch.randn(50, 16, 20).log_softmax(2).to(DT), torch.randint(1, 20, (16, 30)), "
                                       "torch.full((16,), 50), torch.randint(10, 30, (16,))"))
    res = lower_spec(spec)
    assert res.source is not None, res.diagnosis
    path = tmp_path / "cand_ctc_sm90.py"
    path.write_text(res.source)
    cand, ref = load_module(path, "cand_ctc_sm90"), load_module(spec, "ref_ctc_sm90")
    launches = [la for la in sc.record_launches(cand.ModelNew(), ref.get_inputs()) if la.kernel.startswith("ctc")]
    assert len(launches) == 1
    fits = sc.compile_launches(res.source, launches)
    assert fits and all(f.ok and not f.spills for f in fits), [(f.why(), f.n_regs, f.spills) for f in fits]
