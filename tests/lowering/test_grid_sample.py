"""grid_sample / grid_sampler_2d / grid_sampler_3d (workbench/lowering/grid_sample.py) against PyTorch in fp32,
fp16 and bf16 (OpInfo's dtypes): every mode (bilinear, nearest, bicubic in 2-d) x padding (zeros, border,
reflection) x align_corners, on odd sizes, a size-1 dim, grid points outside [-1, 1] (reflected several times)
and exactly on pixel centres and halfway between them (nearest's ties); and the kernels compiled for sm_90.
fp16 and bf16 are checked against PyTorch's fp32 result on the same inputs, rounded once: PyTorch's CPU kernel
computes weights in the low dtype (bf16 results up to 0.08 from the rounded fp32 one, beyond the harness's
2e-2), so it is not the reference there."""
from __future__ import annotations

from pathlib import Path

import pytest
import torch

from tests.lowering.helpers import load_module
from tests.lowering.test_primitives import FLOATS, SPEC, _family
from workbench.harness.policy import check_source
from workbench.lowering import lower_spec
from workbench.lowering import sm90_check as sc
from workbench.tolerances import tolerance_for

GS = "nn.functional.grid_sample"
# grid points: wide (outside [-1, 1] too) and on the lattice of pixel centres and half-pixels of a size-7 dim
GRID2 = ("torch.cat([torch.rand(2, 5, 3, 2) * 5 - 2.5, (torch.randint(-14, 15, (2, 5, 2, 2)) / 7)], 2).to(DT)")
GRID3 = "(torch.rand(2, 3, 4, 5, 3) * 3 - 1.5).to(DT)"


def _calls(grid: str, modes: tuple[str, ...]) -> str:
    return ", ".join(f"{GS}(x, {grid}, mode='{m}', padding_mode='{p}', align_corners={a})"
                     for m in modes for p in ("zeros", "border", "reflection") for a in (False, True))


def _some(grid: str, combos: tuple[tuple[str, str, bool], ...]) -> str:
    return ", ".join(f"{GS}(x, {grid}, mode='{m}', padding_mode='{p}', align_corners={a})" for m, p, a in combos)


CASES = {
    "2d": ("x, g", _calls("g", ("bilinear", "nearest", "bicubic")), f"torch.randn(2, 3, 7, 6).to(DT), {GRID2}"),
    # a size-1 height (reflection over a zero span with align_corners) and a grid that is a strided view
    "2d_thin": ("x, g", _some("g.transpose(1, 2)", (("bilinear", "reflection", True), ("bicubic", "reflection", True),
                                                    ("bicubic", "zeros", False))),
                f"torch.randn(2, 2, 1, 5).to(DT), {GRID2}"),
    "3d": ("x, g", _some("g", (("bilinear", "zeros", False), ("bilinear", "border", True),
                              ("bilinear", "reflection", False), ("nearest", "reflection", True))),
           f"torch.randn(2, 3, 5, 4, 3).to(DT), {GRID3}")}


def test_grid_sample_fp32(tmp_path: Path) -> None:
    _family(tmp_path, "grid_sample", "float32", CASES)


@pytest.mark.slow  # 11-15 s each in the interpreter; the fp32 test covers every mode and padding
@pytest.mark.parametrize("dt", [d for d in FLOATS if d != "float32"])
def test_grid_sample_low_precision(tmp_path: Path, dt: str) -> None:
    spec = tmp_path / f"gs_{dt}.py"
    a, expr, inputs = CASES["2d"]
    spec.write_text(SPEC.format(dt=dt, init="        pass", args=a, expr=expr, inputs=inputs))
    res = lower_spec(spec)
    assert res.source is not None, res.diagnosis
    path = tmp_path / f"cand_gs_{dt}.py"
    path.write_text(res.source)
    cand, ref = load_module(path, f"cand_gs_{dt}"), load_module(spec, f"ref_gs_{dt}")
    torch.manual_seed(0)
    x, g = ref.get_inputs()
    want = ref.Model()(x.float(), g.float())
    atol, rtol = tolerance_for(getattr(torch, dt))
    for i, (got, w) in enumerate(zip(cand.ModelNew()(x, g), want)):
        assert got.dtype == getattr(torch, dt)
        torch.testing.assert_close(got.float(), w.to(got.dtype).float(), atol=atol, rtol=rtol,
                                   msg=lambda m, i=i: f"output {i}: {m}")


def test_grid_sampler_kernels_compile_for_sm90(tmp_path: Path) -> None:
    spec = tmp_path / "gs_sm90.py"
    spec.write_text(SPEC.format(dt="bfloat16", init="        pass", args="x, g, y, h",
                                expr=f"{GS}(x, g, mode='bicubic', padding_mode='reflection'), "
                                     f"{GS}(y, h, mode='nearest', padding_mode='border')",
                                inputs=f"torch.randn(2, 3, 7, 6).to(DT), {GRID2}, torch.randn(2, 3, 5, 4, 3).to(DT), "
                                       f"{GRID3}"))
    res = lower_spec(spec)
    assert res.source is not None, res.diagnosis
    assert check_source(res.source) == []  # the harness's policy (a kernel once rebound `id`, helpers unbound)
    path = tmp_path / "cand_gs_sm90.py"
    path.write_text(res.source)
    cand, ref = load_module(path, "cand_gs_sm90"), load_module(spec, "ref_gs_sm90")
    torch.manual_seed(0)
    launches = sc.record_launches(cand.ModelNew(), ref.get_inputs())
    assert len(launches) == 2
    bad = [f.why() for f in sc.compile_launches(res.source, launches) if not f.ok]
    assert not bad, bad
