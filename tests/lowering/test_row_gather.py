"""A gather of one element per row joins the row reduction that reads those rows (partition._gather_group,
templates._red_gathers): the picked element is loaded in the reduction's epilogue at the row's index, the index
chain (`where(t != -100, t, 0)` through an unsqueeze, norm_stats.sink_index_views) computed there too. Results
against PyTorch on odd shapes in fp32, fp16 and bf16, split (RED_BLOCK_N 16, rows of 301) and whole."""
from __future__ import annotations

from pathlib import Path

import pytest
import torch

from tests.lowering.helpers import flat, load_module
from workbench.lowering import lower_spec
from workbench.lowering import sm90_check as sc
from workbench.tolerances import tolerance_for

SPEC = '''import torch
import torch.nn as nn

DT = torch.{dt}


class Model(nn.Module):
    def forward(self, x, t):
        {body}


def get_inputs():
    return [torch.randn({b}, {n}, dtype=DT), {t}]


def get_init_inputs():
    return []
'''

# name -> (forward body, index input, launches)
CASES = {
    # an index computed from the targets (one kernel: its chain in the epilogue)
    # (the gather after the reduction in the graph: one before it makes its own kernel, as before)
    "margin_to_max": ("m = x.amax(dim=1, keepdim=True)\n"
                      "        i = torch.where(t != -1, t, 0).unsqueeze(1)\n"
                      "        return x.gather(1, i) - m",
                      "torch.where(torch.arange({b}) % 4 == 2, -1, torch.randint(0, {n}, ({b},)))", 1),
    # an index from outside (loaded by the epilogue)
    "picked_share": ("return x.gather(1, t) / x.abs().sum(dim=1, keepdim=True)",
                     "torch.randint(0, {n}, ({b}, 1))", 1),
}
SHAPES = ({"b": 7, "n": 301}, {"b": 13, "n": 5})


def _run(tmp: Path, case: str, dt: str, shape: dict, block_n: int | None):  # noqa: ANN202
    body, t, _ = CASES[case]
    spec = tmp / f"rg_{case}_{dt}_{shape['b']}.py"
    spec.write_text(SPEC.format(dt=dt, body=body, t=t.format(**shape), **shape))
    res = lower_spec(spec)
    assert res.source is not None, res.diagnosis
    ref = load_module(spec, f"ref_{spec.stem}")
    path = tmp / f"cand_{spec.stem}.py"
    path.write_text(res.source)
    cand = load_module(path, f"cand_{spec.stem}_{block_n}")
    if block_n is not None:
        cand.RED_BLOCK_N, cand.RED_BLOCK_M = block_n, 1
    torch.manual_seed(1)
    inputs = ref.get_inputs()
    with torch.no_grad():
        want = flat(ref.Model()(*[x.clone() for x in inputs]))
        with sc.recording() as launches:
            got = flat(cand.ModelNew()(*inputs))
    for i, (w, g) in enumerate(zip(want, got)):
        assert g.shape == w.shape and g.dtype == w.dtype, f"{i}: {g.shape} {g.dtype} vs {w.shape} {w.dtype}"
        atol, rtol = tolerance_for(w.dtype)
        torch.testing.assert_close(g.float(), w.float(), atol=atol, rtol=rtol, msg=lambda m, i=i: f"{i}: {m}")
    return res.source, launches


@pytest.mark.parametrize("dt", ("float32", "float16", "bfloat16"))
@pytest.mark.parametrize("case", sorted(CASES))
def test_row_gather_joins_the_row_reduction(tmp_path: Path, case: str, dt: str) -> None:
    for shape in SHAPES:
        for block_n in (16, 256):
            _, launches = _run(tmp_path, case, dt, shape, block_n)
            assert len(launches) <= CASES[case][2], [ln.kernel for ln in launches]
            if block_n == 16 and shape is SHAPES[0]:
                assert any(ln.constexprs.get("PHASE") == 1 for ln in launches), "the split did not happen"


def test_cross_entropy_statistics_compile_for_sm90_without_spills(tmp_path: Path) -> None:
    """95_CrossEntropyLoss's row kernel (log-sum-exp, the gather and its index in the epilogue) at the default
    config on rows of 4095 (unsplit, as its 32768 rows of 4096 are), and the gather's kernels here split: no
    failure, no spill."""
    spec = tmp_path / "rg_ce.py"
    spec.write_text(SPEC.format(dt="float32", body="return torch.nn.functional.cross_entropy(x, t)", b=3, n=4095,
                                t="torch.randint(0, 4095, (3,))"))
    res = lower_spec(spec)
    assert res.source is not None, res.diagnosis
    cand = load_module(_write(tmp_path, res.source), "cand_rg_ce")
    ref = load_module(spec, "ref_rg_ce")
    torch.manual_seed(0)
    launches = sc.record_launches(cand.ModelNew(), ref.get_inputs())
    fits = sc.compile_launches(res.source, launches)
    source, launches = _run(tmp_path, "margin_to_max", "float32", {"b": 3, "n": 40000}, None)
    assert any(ln.constexprs.get("PHASE") == 1 for ln in launches), "the split did not happen"
    fits += sc.compile_launches(source, launches)
    bad = [f.why() for f in fits if not f.ok]
    assert not bad, bad
    assert all(f.spills == 0 for f in fits), [(f.kernel, f.spills) for f in fits]


def _write(tmp: Path, source: str) -> Path:
    path = tmp / "cand_rg_ce.py"
    path.write_text(source)
    return path
