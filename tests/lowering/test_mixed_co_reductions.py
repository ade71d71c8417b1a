"""Sums over the same rows of different accumulator dtypes are one kernel (norm_stats.pair_row_reductions,
templates._ws_code): an int64 count of bools beside a float sum, each its own accumulator; split, their partials
share one int64 workspace (a float partial as its bits). A cross-entropy loss's count of non-ignored targets and
its sum of picked log-probabilities were two kernels. Results against PyTorch on odd shapes in fp32, fp16 and
bf16, split and whole; the sm_90 compile of the paired kernel."""
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
import torch.nn.functional as F

DT = torch.{dt}


class Model(nn.Module):
    def forward(self, {args}):
        return {expr}


def get_inputs():
    return [{inputs}]


def get_init_inputs():
    return []
'''

# name -> (args, expression, inputs, launches); the float sum first and the count second, the count first, by row
CASES = {
    "sum_then_count": ("x", "(x * 2.0).sum(), (x > 0.25).sum()", "torch.randn({b}, {n}, dtype=DT)", 1),
    "count_then_sum": ("x", "(x > 0.25).sum(dim=1), (x * x).sum(dim=1)", "torch.randn({b}, {n}, dtype=DT)", 1),
    # targets with ignored rows (-100): the mean over the others (their count an int64 sum); fp32: the picked logit
    # gathered in the log-sum-exp's epilogue (partition._gather_group), its index chain with it
    # (norm_stats.sink_index_views): 2 launches
    "cross_entropy": ("p, t", "F.cross_entropy(p, t)",
                      "torch.randn({b}, {n}, dtype=DT) * 3.0, torch.where(torch.arange({b}) % 3 == 1, -100, "
                      "torch.randint(0, {n}, ({b},)))", 2),
}
SHAPES = ({"b": 37, "n": 301}, {"b": 5, "n": 19})


def _run(tmp: Path, case: str, dt: str, shape: dict, block_n: int | None):  # noqa: ANN202
    args, expr, inputs, _ = CASES[case]
    spec = tmp / f"mc_{case}_{dt}_{shape['b']}.py"
    spec.write_text(SPEC.format(dt=dt, args=args, expr=expr, inputs=inputs.format(**shape)))
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
        if not w.dtype.is_floating_point:
            assert torch.equal(g, w), f"{i}: count {g} vs {w}"
            continue
        atol, rtol = tolerance_for(w.dtype)
        torch.testing.assert_close(g.float(), w.float(), atol=atol, rtol=rtol, msg=lambda m, i=i: f"{i}: {m}")
    return res.source, launches


@pytest.mark.parametrize("dt", ("float32", "float16", "bfloat16"))
@pytest.mark.parametrize("case", sorted(CASES))
def test_a_count_and_a_float_sum_are_one_kernel(tmp_path: Path, case: str, dt: str) -> None:
    for shape in SHAPES:
        for block_n in (16, 256):
            _, launches = _run(tmp_path, case, dt, shape, block_n)
            # fp16/bf16 cross entropy writes its log-softmax (softmax_match folds the gather in fp32 only): that
            # kernel, the index, the gather and the paired sums
            extra = 2 if case == "cross_entropy" and dt != "float32" else 0
            assert len(launches) <= CASES[case][3] + extra, [ln.kernel for ln in launches]
            if case == "sum_then_count" and block_n == 16 and shape is SHAPES[0]:
                assert any(ln.constexprs.get("PHASE") == 1 for ln in launches), "the split did not happen"


def test_paired_kernel_compiles_for_sm90_without_spills(tmp_path: Path) -> None:
    """The paired count and sum at the default config: whole (a cross entropy's 37 rows), split (a batch of 20000:
    95_CrossEntropyLoss's final sums over its 32768 rows, RED_BLOCK_N 1024 and a split), and both orders."""
    source, launches = _run(tmp_path, "cross_entropy", "float32", SHAPES[0], None)
    fits = sc.compile_launches(source, [ln for ln in launches if "sum" in ln.kernel])
    for case, shape in (("cross_entropy", {"b": 20000, "n": 7}), ("sum_then_count", {"b": 37, "n": 20000})):
        source, launches = _run(tmp_path, case, "float32", shape, None)
        split = [ln for ln in launches if ln.constexprs.get("PHASE") == 1]
        assert split, "the split did not happen"
        fits += sc.compile_launches(source, split)
    bad = [f.why() for f in fits if not f.ok]
    assert not bad, bad
    assert all(f.spills == 0 for f in fits), [(f.kernel, f.spills) for f in fits]
