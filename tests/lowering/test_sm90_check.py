"""Every lowered draft of a representative set compiles for the H200 (sm_90) on this CPU, and fits.

The signatures come from one interpreter call of the draft (`record_launches`); the compile runs in a
child without the interpreter, with Triton's bundled ptxas (workbench/lowering/sm90_check.py).
"""
from __future__ import annotations

from pathlib import Path

import pytest
import torch

from tests.lowering.helpers import check_candidate, load_module
from workbench.lowering import lower_spec
from workbench.lowering import sm90_check as sc

SPECS = Path(__file__).parent / "specs"
# one spec per template: pointwise, reduction (softmax, layer/group norm, argmax, l2 norm), matmul with
# epilogue, conv (2d, 3d, transposed, depthwise) with pool, bmm, scan
REPRESENTATIVE = ["kb_cumprod", "kb_cumsum", "kb_linear_relu", "kb_softmax_dim0", "kb_layernorm_gelu",
                  "kb_groupnorm_swish",
                  "kb_argmax_logsumexp", "kb_l2norm_clamp", "kb_bmm_scale_mean", "kb_conv_bn_relu",
                  "kb_conv3d_avgpool", "kb_convt_tanh_maxpool", "kb_depthwise_hardswish", "mlp_softmax", "rnn_lstm",
                  "kb_conv_tap_gelu"]


def _draft(stem: str, tmp: Path):  # noqa: ANN202 - (source, launches)
    spec = SPECS / f"{stem}.py"
    res = lower_spec(spec)
    assert res.source is not None, res.diagnosis
    ref = load_module(spec, f"ref_sm90_{stem}")
    path = tmp / f"cand_sm90_{stem}.py"
    path.write_text(res.source)
    cand = load_module(path, f"cand_sm90_{stem}")
    torch.manual_seed(0)
    model_new = cand.ModelNew(*ref.get_init_inputs())
    torch.manual_seed(1)
    launches = sc.record_launches(model_new, ref.get_inputs())
    assert launches, "the draft launched no kernel"
    return res.source, launches


@pytest.mark.parametrize("stem", REPRESENTATIVE)
def test_lowered_draft_compiles_for_sm90_and_fits(stem: str, tmp_path: Path) -> None:
    source, launches = _draft(stem, tmp_path)
    fits = sc.compile_launches(source, launches)
    assert len(fits) == len(launches)
    bad = [f.why() for f in fits if not f.ok]
    assert not bad, bad
    assert all(f.n_regs > 0 for f in fits)  # the resource table was read


def test_launches_are_specialized_like_the_jit(tmp_path: Path) -> None:
    """An int argument equal to 1 becomes a constant and pointers and ints divisible by 16 are marked, as the
    JIT does on the GPU: the tap-major convolution's channel stride is 1 (channels-last copies), which is
    what lets its tiles load as 16-byte vectors and feed wgmma."""
    source, launches = _draft("kb_conv_tap_gelu", tmp_path)
    conv = [ln for ln in launches if ln.kernel.startswith("conv")]
    assert len(conv) == 2
    for ln in conv:
        assert ln.constexprs["sx1"] == 1 and ln.signature["sx1"] == "constexpr"
        assert {"x_ptr", "w_ptr", "sx0"} <= set(ln.divisible)
        assert "I0" not in ln.divisible  # 9 and 7: not multiples of 16
    assert all(f.ok for f in sc.compile_launches(source, conv))
    check_candidate(SPECS / "kb_conv_tap_gelu.py", source, tmp_path)


def test_cumprod_draft_is_correct(tmp_path: Path) -> None:
    """The carry of a chunk is its scan's last column now (was a loop-carried tl.reduce that sm_90 refused)."""
    res = lower_spec(SPECS / "kb_cumprod.py")
    assert res.source is not None and "tl.reduce" not in res.source
    check_candidate(SPECS / "kb_cumprod.py", res.source, tmp_path)


def test_cumsum_draft_is_correct(tmp_path: Path) -> None:
    """cumsum's carry is its chunk's last column too (was `carry + tl.sum(v)`, which sm_90 refused)."""
    res = lower_spec(SPECS / "kb_cumsum.py")
    assert res.source is not None and "carry + tl.sum" not in res.source
    check_candidate(SPECS / "kb_cumsum.py", res.source, tmp_path)


def test_the_tuner_predicate_drops_a_config_that_cannot_fit(tmp_path: Path) -> None:
    """A 128 x 128 x 64 fp32 matmul tile in 5 stages needs more shared memory than an H200 block has
    (64 KiB per stage; 256-wide tiles take minutes of ptxas on this CPU)."""
    source, launches = _draft("kb_linear_relu", tmp_path)
    assert all(f.ok for f in sc.compile_launches(source, launches))
    big = {"MM_BLOCK_M": 128, "MM_BLOCK_N": 128, "MM_BLOCK_K": 64, "MM_NUM_STAGES": 5, "MM_NUM_WARPS": 8}
    moved = sc.apply_config(source, launches, big)
    mm = [ln for ln in moved if ln.kernel.startswith("matmul")]
    assert mm and all(ln.constexprs["MM_BLOCK_M"] == 128 and ln.num_stages == 5 and ln.num_warps == 8 for ln in mm)
    fits = sc.check_config(source, launches, big)
    too_big = [f for f in fits if f.kernel.startswith("matmul")]
    assert too_big and not any(f.ok for f in too_big)
    assert all("shared memory" in f.why() for f in too_big), [f.why() for f in too_big]


def test_fits_predicate_limits() -> None:
    assert sc.fits(n_regs=128, shared=232448, num_warps=4)
    assert not sc.fits(n_regs=128, shared=232449, num_warps=4)
    assert not sc.fits(n_regs=256, shared=0, num_warps=1)       # 255 registers per thread
    assert sc.fits(n_regs=64, shared=0, num_warps=32)           # 64 * 1024 = 65536
    assert not sc.fits(n_regs=65, shared=0, num_warps=32)
