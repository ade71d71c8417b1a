"""A small pointwise node over a reduction's keepdim statistics, wider than them along reduced dims (a
GroupNorm's per-channel scale `rsqrt * weight` and shift on [B, G, C/G, 1] from its [B, G, 1, 1] statistics),
runs in the reduction's epilogue on a [rows, K] tile (partition.wide_dims, templates._red_wide): a GroupNorm
is its statistics and its apply, 2 launches, split or not. Results against PyTorch on odd shapes (C/G = 3,
odd spatial sizes) in fp32, fp16 and bf16; the sm_90 compile of the statistics kernel at its default config.
"""
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
    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.randn({c}, dtype=DT))
        self.b = nn.Parameter(torch.randn({c}, dtype=DT))
        self.gn = nn.GroupNorm({g}, {c}, dtype=DT)

    def forward(self, x):
        {body}


def get_inputs():
    return [torch.randn({shape}, dtype=DT) * 2.0 + 0.5]


def get_init_inputs():
    return []
'''

# name -> (forward body, launches): a GroupNorm; a GroupNorm after a pointwise op and before one; a per-group sum
# times a per-channel weight, read back through views by the apply (not a norm: the same shape class)
CASES = {
    "groupnorm": ("return self.gn(x)", 2),
    # the op before the norm is a kernel of its own (the apply reads its output too: no prologue of the var)
    "groupnorm_between": ("return torch.tanh(self.gn(torch.sigmoid(x) * 2.0))", 3),
    "group_sum_scale": ("v = x.reshape(x.shape[0], {g}, {c} // {g}, -1)\n"
                        "        s = v.sum(dim=(2, 3), keepdim=True)\n"
                        "        t = s * self.w.reshape(1, {g}, -1, 1) + self.b.reshape(1, {g}, -1, 1)\n"
                        "        return x * t.reshape(x.shape[0], {c}, 1, 1)", 2),
}
SHAPES = ((3, 12, 4, 17, 19), (2, 6, 3, 9, 11))  # b, c, g, h, w (rows of 969: split at RED_BLOCK_N 16)


def _run(tmp: Path, case: str, dt: str, shape: tuple, block_n: int | None = 16):  # noqa: ANN202
    b, c, g, h, w = shape
    body = CASES[case][0].format(c=c, g=g)
    spec = tmp / f"we_{case}_{dt}_{b}_{c}.py"
    spec.write_text(SPEC.format(dt=dt, c=c, g=g, body=body, shape=f"{b}, {c}, {h}, {w}"))
    res = lower_spec(spec)
    assert res.source is not None, res.diagnosis
    ref = load_module(spec, f"ref_{spec.stem}")
    path = tmp / f"cand_{spec.stem}.py"
    path.write_text(res.source)
    cand = load_module(path, f"cand_{spec.stem}_{block_n}")
    if block_n is not None:
        cand.RED_BLOCK_N, cand.RED_BLOCK_M = block_n, 1
    torch.manual_seed(0)
    model = ref.Model()
    torch.manual_seed(0)
    model_new = cand.ModelNew()
    torch.manual_seed(1)
    inputs = ref.get_inputs()
    with torch.no_grad():
        want = flat(model(*[x.clone() for x in inputs]))
        with sc.recording() as launches:
            got = flat(model_new(*inputs))
    for i, (wv, gv) in enumerate(zip(want, got)):
        assert gv.shape == wv.shape and gv.dtype == wv.dtype
        atol, rtol = tolerance_for(wv.dtype)
        torch.testing.assert_close(gv.float(), wv.float(), atol=atol, rtol=rtol, msg=lambda m, i=i: f"{i}: {m}")
    return res.source, launches


@pytest.mark.parametrize("dt", ("float32", "float16", "bfloat16"))
@pytest.mark.parametrize("case", sorted(CASES))
def test_wide_epilogue_matches_torch_in_two_launches(tmp_path: Path, case: str, dt: str) -> None:
    for shape in SHAPES:
        for block_n in (16, 256):  # split (the wide tile in the last program's combine) and whole rows
            source, launches = _run(tmp_path, case, dt, shape, block_n)
            # fp16/bf16: the norm's upcast of x to fp32 is its own kernel (the apply reads it too, so it is no
            # prologue of the var), as before the wide epilogue
            extra = 1 if case == "groupnorm" and dt != "float32" else 0
            assert len(launches) <= CASES[case][1] + extra, [ln.kernel for ln in launches]
            if block_n == 16 and dt == "float32" and shape is SHAPES[0]:
                assert any(ln.constexprs.get("PHASE") == 1 for ln in launches), "the split did not happen"
    assert "wout0_ptr" in source


def test_an_apply_of_x_size_stays_out_of_the_epilogue(tmp_path: Path) -> None:
    """An InstanceNorm's apply puts back every reduced dim at x's size: not a wide epilogue (still 2 launches)."""
    spec = tmp_path / "we_instnorm.py"
    spec.write_text(SPEC.format(dt="float32", c=6, g=3, body="return torch.nn.functional.instance_norm(x)",
                                shape="2, 6, 9, 11"))
    res = lower_spec(spec)
    assert res.source is not None, res.diagnosis
    assert "wout0_ptr" not in res.source


def test_groupnorm_statistics_compile_for_sm90_without_spills(tmp_path: Path) -> None:
    """35_GroupNorm_'s block config (rows of 8 channels x H x W, split at the default RED_BLOCK_M/N), both with
    the split and without: no failure, no spill."""
    fits = []
    for shape in ((2, 64, 8, 32, 32), (2, 64, 8, 4, 4)):
        source, launches = _run(tmp_path, "groupnorm", "float32", shape, None)
        fits += sc.compile_launches(source, [ln for ln in launches if ln.kernel.startswith("reduce")])
    assert len(fits) == 2
    bad = [f.why() for f in fits if not f.ok]
    assert not bad, bad
    assert all(f.spills == 0 for f in fits), [(f.kernel, f.spills) for f in fits]
