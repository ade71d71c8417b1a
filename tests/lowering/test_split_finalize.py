"""A split reduction is one launch: the last program of each row block to store its partial combines them
(templates._TICKET, _finalize_lines). Its ticket counters are zero again after every launch, the combine's
text is the phase-2 code with the static branches resolved, and the result equals the unsplit one."""
from __future__ import annotations

from pathlib import Path

import pytest
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


CO_SPEC = '''import torch
import torch.nn as nn
import torch.nn.functional as F

DT = torch.{dt}


class Model(nn.Module):
    def forward(self, a, p, n):
        return (F.triplet_margin_loss(a, p, n, margin=1.0), F.cosine_similarity(a, p, dim=1),
                ((a - p) ** 2).mean(dim=(0, 2)), (a * n).sum(dim=(0, 2)))


def get_inputs():
    return [torch.randn(2, 3, 1031, dtype=DT), torch.randn(2, 3, 1031, dtype=DT), torch.randn(2, 3, 1031, dtype=DT)]


def get_init_inputs():
    return []
'''


@pytest.mark.parametrize("dt", ("float32", "float16", "bfloat16"))
def test_co_reductions_split_and_whole(tmp_path: Path, dt: str) -> None:
    """Sums over the same rows of different prologues are one kernel (norm_stats.pair_row_reductions): the
    triplet loss's two distances, the cosine similarity's dot and norms, a mean and a sum over dims (0, 2)
    (columns in two groups); split (RED_BLOCK_N 16) and whole rows match PyTorch."""
    from workbench.tolerances import tolerance_for

    spec = tmp_path / f"co_{dt}.py"
    spec.write_text(CO_SPEC.format(dt=dt))
    res = lower_spec(spec)
    assert res.source is not None, res.diagnosis
    ref = load_module(spec, f"ref_co_{dt}")
    path = tmp_path / f"cand_co_{dt}.py"
    path.write_text(res.source)
    torch.manual_seed(0)
    ins = ref.get_inputs()
    with torch.no_grad():
        want = ref.Model()(*ins)
    for block_n in (16, 256):
        cand = load_module(path, f"cand_co_{dt}_{block_n}")
        cand.RED_BLOCK_N, cand.RED_BLOCK_M = block_n, 1
        with torch.no_grad(), sc.recording() as launches:
            got = cand.ModelNew()(*ins)
        if block_n == 16:
            assert any(ln.constexprs.get("PHASE") == 1 for ln in launches), "the split did not happen"
        for i, (w, g) in enumerate(zip(want, got)):
            atol, rtol = tolerance_for(w.dtype)
            torch.testing.assert_close(g.float(), w.float(), atol=atol, rtol=rtol, msg=lambda m, i=i: f"{i}: {m}")
    # the triplet's two row sums share a kernel, and so do the cosine's three, the mean and the sum
    assert res.source.count("with sum_") + res.source.count("with mean") >= 2, res.source


def test_swizzle_predicate() -> None:
    """`_swizzle`: rows walked fastest only for an operand broadcast along dim 0 that is 2**20 elements or more
    (40_LayerNorm's weight and bias) and rows of whole blocks; a per-channel statistic (a BatchNorm) keeps the
    linear order."""
    from workbench.lowering.codegen import RUNTIME_HELPERS

    ns: dict = {}
    exec(RUNTIME_HELPERS, ns)  # noqa: S102 - the candidate's own runtime helpers
    sw = ns["_swizzle"]
    big = 64 * 256 * 256
    assert sw([16, big, 1, 1], [(big, 1, 0, 0), (0, 1, 0, 0), (1, 0, 0, 0)], 1024) == (16, True)
    assert sw([16, big, 1, 1], [(big, 1, 0, 0), (1, 0, 0, 0)], 1024) == (1, False)
    assert sw([16, big + 1, 1, 1], [(big + 1, 1, 0, 0), (0, 1, 0, 0)], 1024) == (1, False)
    assert sw([64, 64, 4096, 1], [(64 * 4096, 4096, 1, 0), (0, 1, 0, 0)], 1024) == (1, False)


@pytest.mark.parametrize("dt", ("float32", "bfloat16"))
def test_layernorm_apply_walks_rows_fastest(tmp_path: Path, dt: str) -> None:
    """The apply of a LayerNorm with its row order swizzled (forced at a small size) matches PyTorch."""
    from workbench.tolerances import tolerance_for

    spec = tmp_path / f"ln_swz_{dt}.py"
    spec.write_text(f'''import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln = nn.LayerNorm((4, 8, 32), dtype=torch.{dt})

    def forward(self, x):
        return self.ln(x)


def get_inputs():
    return [torch.randn(3, 4, 8, 32, dtype=torch.{dt}) * 2.0 + 0.5]


def get_init_inputs():
    return []
''')
    res = lower_spec(spec)
    assert res.source is not None, res.diagnosis
    ref = load_module(spec, f"ref_ln_swz_{dt}")
    path = tmp_path / f"cand_ln_swz_{dt}.py"
    path.write_text(res.source)
    cand = load_module(path, f"cand_ln_swz_{dt}")
    cand.BLOCK = 256
    cand._swizzle = lambda sizes, strides, block: (sizes[0], True) if _rest(sizes) % block == 0 else (1, False)
    torch.manual_seed(0)
    (x,) = ref.get_inputs()
    torch.manual_seed(1)
    model = ref.Model()
    torch.manual_seed(1)
    new = cand.ModelNew()
    with torch.no_grad():
        model.ln.weight.normal_()
        model.ln.bias.normal_()
        new.load_state_dict(model.state_dict())
        want = model(x)
        with sc.recording() as launches:
            got = new(x)
    assert any(ln.constexprs.get("SWZ") for ln in launches), "the apply did not swizzle"
    atol, rtol = tolerance_for(want.dtype)
    torch.testing.assert_close(got.float(), want.float(), atol=atol, rtol=rtol)


def _rest(sizes: list[int]) -> int:
    out = 1
    for s in sizes[1:]:
        out *= s
    return out
