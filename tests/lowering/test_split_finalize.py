"""A split reduction is one launch: the last program of each row block to store its partial combines them
(templates._TICKET, _finalize_lines). Its ticket counters are zero again after every launch, the combine's
text is the phase-2 code with the static branches resolved, and the result equals the unsplit one."""
from __future__ import annotations

from pathlib import Path

import torch

from tests.lowering.helpers import load_module
from workbench.lowering import lower_spec
from workbench.lowering import sm90_check as sc
from workbench.lowering.templates import _finalize_lines, _static_ifs

SPEC = '''import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x, y):
        return x.var(dim=(0, 2)), torch.mean(torch.clamp(1 - x * y, min=0)), x.sum(dim=1).amax()


def get_inputs():
    return [torch.randn(3, 37, 41), torch.randn(3, 37, 41)]


def get_init_inputs():
    return []
'''


def test_static_ifs_keep_the_branch_taken() -> None:
    lines = ["a = 1", "if 0 == 3:", "    b = x", "elif 0:", "    b = y", "else:", "    b = z",
             "    if 2 == 2:", "        c = 1", "if N:", "    d = 2"]
    assert _static_ifs(lines) == ["a = 1", "b = z", "c = 1", "if N:", "    d = 2"]


def test_finalize_reads_the_partials_under_new_names() -> None:
    out = _finalize_lines(["acc = tl.zeros([4], tl.float32)", "if PHASE == 2:",
                           "    v = tl.load(x_ptr + roff[:, None] + coff[None, :], mask=m, other=0)",
                           "else:", "    v = tl.load(pin0_ptr, mask=m, other=0)", "acc = acc + v",
                           "rv = tl.sum(acc, axis=1) / DIVN"])
    assert out == ["f_acc = tl.zeros([4], tl.float32)",
                   'f_v = tl.load(ws_ptr + (rows * SPLIT)[:, None] + coff[None, :], mask=m, '
                   'cache_modifier=".cg", other=0)',
                   "f_acc = f_acc + f_v", "f_rv = tl.sum(f_acc, axis=1) / NTOT"]


def test_split_is_one_launch_and_resets_its_tickets(tmp_path: Path) -> None:
    spec = tmp_path / "fin_spec.py"
    spec.write_text(SPEC)
    res = lower_spec(spec)
    assert res.source is not None, res.diagnosis
    ref = load_module(spec, "ref_fin_spec")
    path = tmp_path / "cand_fin_spec.py"
    path.write_text(res.source)
    cand = load_module(path, "cand_fin_spec")
    torch.manual_seed(0)
    x, y = ref.get_inputs()
    with torch.no_grad():
        want = ref.Model()(x, y)
        whole = cand.ModelNew()(x, y)
        cand.RED_BLOCK_N, cand.RED_BLOCK_M = 16, 1
        with sc.recording() as launches:
            got = cand.ModelNew()(x, y)
    assert any(ln.constexprs.get("PHASE") == 1 for ln in launches), "the split did not happen"
    assert not any(ln.constexprs.get("PHASE") == 2 for ln in launches)
    assert all(int(t.abs().sum()) == 0 for t in cand._TICKETS.values()), "a ticket counter was left set"
    for w, g, h in zip(want, got, whole):
        torch.testing.assert_close(g, w, atol=1e-5, rtol=1e-5)
        torch.testing.assert_close(g, h, atol=1e-5, rtol=1e-5)
