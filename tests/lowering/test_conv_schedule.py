"""The implicit-GEMM convolution's schedule: the Hopper default tile (128 x 64 on 8 warps, 2 stages), the depth
CONV_NUM_STAGES, the output-channel block clamped to a thin group, and the tuner's conv points (tile, warps,
stages, precision), each against PyTorch on odd shapes in fp32/fp16/bf16.

The sm_90 compile of every tuner point at the published KernelBench sizes takes minutes (ptxas per point):
`python -m workbench.lowering.conv_sm90 <spec>` runs it; here one small conv checks the point most at risk
(tf32x3 128 x 64, which spilled on 4 warps) and the FMA path's point, under `slow`."""
from __future__ import annotations

import re
from pathlib import Path

import pytest
import torch

from tests.lowering.helpers import check_candidate, load_module
from tests.lowering.test_primitives import SPEC, R
from workbench.lowering import conv, lower_spec, tune
from workbench.tunables import apply_config, parse_tunables

# tap-major (>= 16 channels a group) and flat (fewer, transposed) cases: batch 1, non-square, stride, padding,
# dilation, groups with 3 or 5 output channels a group (the clamped block), a strided transposed 3-D
CASES = {
    "tap2d": ("nn.Conv2d(32, 10, (3, 2), stride=(2, 1), padding=(1, 0), dilation=(1, 2), groups=2)", "1, 32, 7, 6"),
    "tap1d": ("nn.Conv1d(32, 5, 3, padding=2, dilation=2)", "2, 32, 9"),
    "tapt3d": ("nn.ConvTranspose3d(32, 6, (2, 3, 2), stride=(2, 1, 2), padding=(0, 1, 1), groups=2)",
               "1, 32, 2, 3, 3"),
    "flatt2d": ("nn.ConvTranspose2d(4, 3, 3, stride=2, padding=1, output_padding=1)", "1, 4, 3, 5"),
    # few channels, not transposed: the direct form, and the flat GEMM under CONV_DIRECT 0 (padded and
    # unpadded dims: the flat loop tests bounds only where a dim is padded)
    "flat2d": ("nn.Conv2d(6, 6, (3, 2), stride=(2, 1), padding=(0, 1), dilation=(2, 1), groups=2)", "1, 6, 9, 7"),
    "flat3d": ("nn.Conv3d(3, 4, 2, stride=(1, 1, 2), padding=(1, 0, 0), bias=False)", "2, 3, 3, 4, 5"),
}


def _spec(tmp_path: Path, dt: str) -> Path:
    cases = sorted(CASES.items())
    init = "\n".join(f"        self.m{k} = {mod}.to(DT)" for k, (_, (mod, _)) in enumerate(cases))
    args = ", ".join(f"x{k}" for k in range(len(cases)))
    expr = ", ".join(f"torch.relu(self.m{k}(x{k}) + 0.25)" for k in range(len(cases)))
    spec = tmp_path / f"conv_sched_{dt}.py"
    spec.write_text(SPEC.format(dt=dt, args=args, expr=expr, init=init,
                                inputs=", ".join(R.format(shp) for _, (_, shp) in cases)))
    return spec


def _with(source: str, cfg: dict) -> str:
    return apply_config(source, parse_tunables(source), cfg)


def test_defaults_and_space_are_hopper_schedules() -> None:
    cur = {k: v[1] for k, v in conv.DEFAULTS.items()}
    assert (cur["CONV_BLOCK_P"], cur["CONV_BLOCK_CO"], cur["CONV_NUM_WARPS"], cur["CONV_NUM_STAGES"]) == (128, 64, 8, 2)
    names, points = tune.space()["conv"]
    pts = [dict(zip(names, p)) for p in points]
    # tf32x3 holds hi and lo halves of both operands: a 128 x 64 tile needs two warpgroups (255 regs on one)
    assert all(p["CONV_NUM_WARPS"] == 8 for p in pts if p["CONV_BLOCK_P"] >= 128 and p["CONV_BLOCK_CO"] >= 64)
    assert len({p["CONV_NUM_STAGES"] for p in pts}) > 1 and {p["MM_PRECISION"] for p in pts} == {"tf32x3", "ieee"}
    for p in pts:  # every point inside the declared choices: the tuner drops none of them
        assert all(v in conv.DEFAULTS[k][0] for k, v in p.items() if k in conv.DEFAULTS)


_LOWERED: dict[str, tuple[Path, str]] = {}


def _lowered(tmp_path_factory: pytest.TempPathFactory, dt: str) -> tuple[Path, str]:
    """(spec, draft) of a dtype, lowered once for the file: the capture is most of a test's time."""
    if dt not in _LOWERED:
        spec = _spec(tmp_path_factory.mktemp(f"conv_sched_{dt}"), dt)
        res = lower_spec(spec)
        assert res.source is not None, res.diagnosis
        _LOWERED[dt] = (spec, res.source)
    return _LOWERED[dt]


# fp16/bf16 take a lowering each (5 s): the default tile in those dtypes is also test_primitives's
# test_convolution[tap/flat], which CI runs
@pytest.mark.parametrize("dt", ["float32", pytest.param("float16", marks=pytest.mark.slow),
                                pytest.param("bfloat16", marks=pytest.mark.slow)])
def test_default_schedule_matches_torch(tmp_path: Path, tmp_path_factory: pytest.TempPathFactory, dt: str) -> None:
    spec, src = _lowered(tmp_path_factory, dt)
    assert len(re.findall(r"tap-major(, \d+ stride classes)? reduction", src)) == 3
    assert len(re.findall(r"flat \(ci, k\)", src)) == 3 and len(re.findall(r"direct \(ci, taps\)", src)) == 2
    assert src.count("num_stages=CONV_NUM_STAGES") == 6
    assert src.count("_BCO = min(CONV_BLOCK_CO, max(16, triton.next_power_of_2(_COUT_G)))") == 6
    check_candidate(spec, src, tmp_path)


@pytest.mark.parametrize("point", [4, 7])
def test_tuner_points_match_torch(tmp_path: Path, tmp_path_factory: pytest.TempPathFactory, point: int) -> None:
    """Point 4: 16-channel k steps, 5 stages, tf32x3 (within fp32's tolerance), with the flat GEMM for the
    few-channel convolutions (CONV_DIRECT 0, as the direct space's point 4); point 7: the FMA path ("ieee")
    on 64 x 64, 4 warps, 4 stages, the direct form."""
    spec, src = _lowered(tmp_path_factory, "float32")
    names, points = tune.space()["conv"]
    cfg = dict(zip(names, points[point]), **({"CONV_DIRECT": 0} if point == 4 else {}))
    check_candidate(spec, _with(src, cfg), tmp_path)


@pytest.mark.slow
def test_widest_points_compile_for_sm90_without_spills(tmp_path: Path,
                                                       tmp_path_factory: pytest.TempPathFactory) -> None:
    from workbench.lowering import sm90_check as sc

    spec, src = _lowered(tmp_path_factory, "float32")
    path = tmp_path / "cand_sched_sm90.py"
    path.write_text(src)
    ref, cand = load_module(spec, "ref_sched_sm90"), load_module(path, "cand_sched_sm90")
    torch.manual_seed(0)
    launches = [ln for ln in sc.record_launches(cand.ModelNew(*ref.get_init_inputs()), ref.get_inputs())
                if ln.kernel.startswith("conv") and "tapt3d" not in ln.kernel]
    names, points = tune.space()["conv"]
    for k in (0, 7):
        fits = sc.check_config(src, launches, dict(zip(names, points[k])))
        bad = [f.why() or f"{f.kernel}: {f.spills} bytes spilled" for f in fits if not f.ok or f.spills]
        assert not bad, (k, bad)
