"""Kernel counts of simple level-1 drafts, and their results against PyTorch on odd shapes, every float dtype.

ELU, SELU and Softplus decompose into two or three independent pointwise chains joined by a `where`; each
chain used to be its own kernel (ELU: 3 launches, 3.9x slower than eager on the H200). Softmax and
LogSoftmax decompose into amax, sub, exp, sum, div/log/sub: four kernels, the row read four times. The
specs are written here (CI has no ../shared/kernelbench); their forwards are the KernelBench ones.
"""
from __future__ import annotations

import re
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


class Model(nn.Module):
    def __init__(self, alpha: float = 1.0):
        super().__init__()
        self.alpha = alpha

    def forward(self, x):
        return {expr}


def get_inputs():
    return [torch.randn({shape}, dtype=torch.{dt}) * 4.0]


def get_init_inputs():
    return [0.7]
'''

# name -> (forward expression, kernels the draft may launch)
CASES = {
    "elu": ("F.elu(x, alpha=self.alpha)", 1),
    "selu": ("torch.selu(x)", 1),
    "softplus": ("F.softplus(x)", 1),
    "softmax": ("torch.softmax(x, dim=1)", 1),
    "log_softmax": ("torch.log_softmax(x, dim=1)", 1),
    # the dim first, an epilogue reading x again, a rank-3 input with the dim inside (rows in two groups)
    "softmax_dim0_epilogue": ("torch.softmax(x, dim=0) * 2.0 + x", 1),
    "log_softmax_last": ("torch.log_softmax(x, dim=-1)", 1),
    # x ** 2 is the sum's prologue (loaded and squared in the reduction kernel), the division a second kernel
    "l2norm": ("x / torch.norm(x, p=2, dim=1, keepdim=True)", 2),
    "frobenius": ("x / torch.norm(x, p='fro')", 2),
    "mean_sq_dev": ("((x - 0.25) ** 2).mean(dim=-1)", 1),
    # 47/48/49/53: one dim reduced, on a rank-3 input the middle one (rows in two groups, K2)
    "sum_dim1": ("torch.sum(x, dim=1, keepdim=True)", 1),
    "mean_dim1": ("torch.mean(x, dim=1)", 1),
    "max_dim1": ("torch.max(x, dim=1)[0]", 1),
    "min_dim1": ("torch.min(x, dim=1)[0]", 1),
}
DTYPES = ("float32", "float16", "bfloat16")


def _kernel_names(source: str) -> list[str]:
    """The @triton.jit kernels of a draft (helpers such as _expm1 are not kernels)."""
    return re.findall(r"@triton\.jit\ndef (\w+_kernel_\d+)\(", source)


def _run(tmp_path: Path, case: str, dt: str, shape: str):  # noqa: ANN202 - (source, launch count, want, got)
    expr, _ = CASES[case]
    tag = f"{case}_{dt}_{abs(hash(shape))}"
    spec = tmp_path / f"fc_{tag}.py"
    spec.write_text(SPEC.format(expr=expr, shape=shape, dt=dt))
    res = lower_spec(spec)
    assert res.source is not None, res.diagnosis
    ref = load_module(spec, f"ref_fc_{tag}")
    path = tmp_path / f"cand_fc_{tag}.py"
    path.write_text(res.source)
    cand = load_module(path, f"cand_fc_{tag}")
    torch.manual_seed(1)
    (x,) = ref.get_inputs()
    calls = []
    from triton.runtime.interpreter import InterpretedFunction

    orig = InterpretedFunction.run

    def counting(self, *args, **kwargs):  # noqa: ANN001, ANN202 - Triton's own signature
        calls.append(self.fn.__name__)
        return orig(self, *args, **kwargs)
    with torch.no_grad():
        want = flat(ref.Model(*ref.get_init_inputs())(x.clone()))
        InterpretedFunction.run = counting
        try:
            got = flat(cand.ModelNew(*ref.get_init_inputs())(x))
        finally:
            InterpretedFunction.run = orig
    return res.source, len(calls), want, got


def _close(want: list[torch.Tensor], got: list[torch.Tensor]) -> None:
    for i, (w, g) in enumerate(zip(want, got)):
        assert g.shape == w.shape and g.dtype == w.dtype, f"output {i}: {g.shape} {g.dtype} vs {w.shape} {w.dtype}"
        atol, rtol = tolerance_for(w.dtype)
        torch.testing.assert_close(g.float(), w.float(), atol=atol, rtol=rtol, msg=lambda m, i=i: f"{i}: {m}")


@pytest.mark.parametrize("case", sorted(CASES))
def test_draft_kernel_count(tmp_path: Path, case: str) -> None:
    source, launches, want, got = _run(tmp_path, case, "float32", "64, 48")
    limit = CASES[case][1]
    assert len(_kernel_names(source)) <= limit, _kernel_names(source)
    assert launches <= limit, launches  # no split at 64 x 48: one launch per kernel
    _close(want, got)


@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("case", sorted(CASES))
def test_draft_matches_torch_on_odd_shapes(tmp_path: Path, case: str, dt: str) -> None:
    for shape in ("5, 123", "3, 7, 127", "1, 5"):
        _, _, want, got = _run(tmp_path, case, dt, shape)
        _close(want, got)


def test_fused_drafts_compile_for_sm90(tmp_path: Path) -> None:
    for case in sorted(CASES):
        spec = tmp_path / f"sm90_{case}.py"
        spec.write_text(SPEC.format(expr=CASES[case][0], shape="5, 123", dt="float32"))
        res = lower_spec(spec)
        assert res.source is not None, res.diagnosis
        path = tmp_path / f"cand_sm90_{case}.py"
        path.write_text(res.source)
        cand = load_module(path, f"cand_sm90_fc_{case}")
        ref = load_module(spec, f"ref_sm90_fc_{case}")
        launches = sc.record_launches(cand.ModelNew(*ref.get_init_inputs()), ref.get_inputs())
        bad = [f.why() for f in sc.compile_launches(res.source, launches) if not f.ok]
        assert not bad, bad


@pytest.mark.parametrize("case", ["sum_dim1", "max_dim1", "softmax"])
def test_middle_dim_rows_are_read_as_wide_contiguous_blocks(tmp_path: Path, case: str) -> None:
    """[B, N, M2] reduced over N: a program takes up to 128 consecutive rows of one group along the contiguous
    M2 (was RED_BLOCK_M = 4 rows split by // and %, strided loads); results checked on 3 x 7 x 127."""
    spec = tmp_path / f"mid_{case}.py"
    spec.write_text(SPEC.format(expr=CASES[case][0], shape="3, 7, 127", dt="float32"))
    res = lower_spec(spec)
    assert res.source is not None, res.diagnosis
    path = tmp_path / f"cand_mid_{case}.py"
    path.write_text(res.source)
    cand = load_module(path, f"cand_mid_{case}")
    ref = load_module(spec, f"ref_mid_{case}")
    torch.manual_seed(1)
    (x,) = ref.get_inputs()
    with torch.no_grad(), sc.recording() as launches:
        got = flat(cand.ModelNew(*ref.get_init_inputs())(x))
    want = flat(ref.Model(*ref.get_init_inputs())(x.clone()))
    _close(want, got)
    assert [(ln.constexprs["K2"], ln.constexprs["RED_BLOCK_M"]) for ln in launches] == [(True, 128)], launches
    bad = [f.why() for f in sc.compile_launches(res.source, launches) if not f.ok]
    assert not bad, bad
