"""Producers that store into their slice of a cat's buffer (cat_chain.direct_writes): a dense block's convolutions
(direct, tap-major and flat forms, the anchor's output or an epilogue's) and pointwise kernels write their new
features in place, so the block copies only its input; a single cat of convolution branches (an Inception
module's) copies nothing; an output that something else reads too keeps its copy.
Against PyTorch in fp32/fp16/bf16 with odd channel counts, and the changed kernels compile for sm_90."""
from __future__ import annotations

import re
from pathlib import Path

import pytest
import torch

from tests.lowering.helpers import check_candidate, load_module
from tests.lowering.test_primitives import FLOATS, SPEC
from workbench.lowering import lower_spec
from workbench.lowering import sm90_check as sc
from workbench.tunables import apply_config, parse_tunables


def _spec(tmp_path: Path, name: str, dt: str, init: str, body: str, inputs: str, args: str = "x") -> Path:
    spec = tmp_path / f"{name}_{dt}.py"
    text = SPEC.format(dt=dt, args=args, expr="None", inputs=inputs, init=init)
    spec.write_text(text.replace("        return (None,)",
                                 "\n".join("        " + ln for ln in body.strip().splitlines())))
    return spec


def _lower(spec: Path) -> str:
    res = lower_spec(spec)
    assert res.source is not None, res.diagnosis
    return res.source


def _copies(source: str) -> int:
    """Copy launches into cat buffers in the forward's text (each runs once a call)."""
    return len(re.findall(r"cat_kernel_\d+\[", source))


def _slices(source: str) -> int:
    return source.count("its slice of the cat's buffer")


# a dense block of 3 layers: 7 input channels (layer 0: the direct form), 7 + 5 = 12 (direct), 17 (tap-major);
# even layers store the convolution's own output, odd ones a pointwise epilogue's
DENSE_INIT = "        self.c = nn.ModuleList([nn.Conv2d(7 + 5 * i, 5, 3, padding=1).to(DT) for i in range(3)])"
DENSE = """
feats = [x]
for i, c in enumerate(self.c):
    h = c(torch.relu(x))
    feats.append(h if i % 2 == 0 else torch.sigmoid(h) * 2.0)
    x = torch.cat(feats, 1)
return x
"""


@pytest.mark.parametrize("dt", FLOATS)
def test_dense_block_convolutions_store_into_the_cat_buffer(tmp_path: Path, dt: str) -> None:
    spec = _spec(tmp_path, "dense_conv", dt, DENSE_INIT, DENSE, "torch.randn(2, 7, 5, 3, dtype=DT)")
    src = _lower(spec)
    # the block's input is copied; the 3 new features are stored in place (were 4 copy launches)
    assert _copies(src) == 1, src
    # layers 0 and 1: their direct kernel and their flat one (the CONV_DIRECT switch); layer 2: tap-major
    assert _slices(src) == 2 + 2 + 1
    check_candidate(spec, src, tmp_path)


def test_the_flat_form_stores_into_the_cat_buffer_too(tmp_path: Path) -> None:
    spec = _spec(tmp_path, "dense_flat", "float32", DENSE_INIT, DENSE, "torch.randn(2, 7, 5, 3, dtype=DT)")
    src = _lower(spec)
    check_candidate(spec, apply_config(src, parse_tunables(src), {"CONV_DIRECT": 0}), tmp_path)


# one cat of four branches along channels: a 1x1 convolution, a 3x3 one with a ReLU epilogue, a depthwise
# convolution, and a max pool (stored too: test_cat_inplace_producers.py); a cat along dim 0 of two convolutions;
# a pointwise result cat along the last dim (strided store with every stride); and a convolution that a later add
# reads too (copied)
BRANCH_INIT = """        self.a = nn.Conv2d(6, 3, 1).to(DT)
        self.b = nn.Conv2d(6, 5, 3, padding=1).to(DT)
        self.d = nn.Conv2d(6, 6, 3, padding=1, groups=6).to(DT)
        self.e = nn.Conv2d(6, 6, 3, padding=1, bias=False).to(DT)"""
BRANCHES = """
pool = torch.nn.functional.max_pool2d(x, 3, stride=1, padding=1)
inception = torch.cat([self.a(x), torch.relu(self.b(x)), self.d(x), pool], 1)
batch = torch.cat([self.a(x), self.a(x * 0.5)], 0)
last = torch.cat([x[..., :2] * 3.0, torch.tanh(x)], 3)
e = self.e(x)
shared = torch.cat([x, e], 1) + e.sum()
return inception, batch, last, shared
"""


@pytest.mark.parametrize("dt", FLOATS)
def test_branches_store_into_a_single_cat(tmp_path: Path, dt: str) -> None:
    spec = _spec(tmp_path, "branches", dt, BRANCH_INIT, BRANCHES, "torch.randn(2, 6, 5, 7, dtype=DT)")
    src = _lower(spec)
    # stored in place: a, relu(b), d, the pool; both convolutions of `batch`; both pointwise results of `last`.
    # copied: x and e of `shared` (e is read by the sum too): 2 (was 12)
    assert _copies(src) == 2, src
    check_candidate(spec, src, tmp_path)


def test_a_cat_returned_beside_its_stored_input_keeps_them_apart(tmp_path: Path) -> None:
    """An input that is also a graph output is never a view of the cat's buffer."""
    spec = _spec(tmp_path, "outs", "float32", "        self.a = nn.Conv2d(6, 3, 1)",
                 "h = self.a(x)\nreturn torch.cat([x, h], 1), h", "torch.randn(2, 6, 5, 7)")
    src = _lower(spec)
    assert _slices(src) == 0 and _copies(src) == 2
    check_candidate(spec, src, tmp_path)
    cand = load_module(tmp_path / "cand_outs_float32.py", "cat_inplace_outs")
    c, h = cand.ModelNew()(torch.randn(2, 6, 5, 7))
    assert c.untyped_storage().data_ptr() != h.untyped_storage().data_ptr()


def test_stored_convolution_and_pointwise_kernels_compile_for_sm90(tmp_path: Path) -> None:
    spec = _spec(tmp_path, "dense_sm90", "float32", DENSE_INIT, DENSE, "torch.randn(2, 7, 5, 3, dtype=DT)")
    src = _lower(spec)
    spec2 = _spec(tmp_path, "branches_sm90", "float32", BRANCH_INIT, BRANCHES, "torch.randn(2, 6, 5, 7, dtype=DT)")
    src2 = _lower(spec2)
    bad = []
    # the dense block's three forms (direct and tap-major, then flat); the branches' depthwise and pointwise
    for sp, s, name, forms in ((spec, src, "d", (1, 0)), (spec2, src2, "b", (1,))):
        for form in forms:
            text = apply_config(s, parse_tunables(s), {"CONV_DIRECT": form})
            path = tmp_path / f"cand_sm90_{name}{form}.py"
            path.write_text(text)
            ref, cand = load_module(sp, f"ref_sm90_{name}{form}"), load_module(path, f"cand_sm90_{name}{form}")
            torch.manual_seed(0)
            launches = sc.record_launches(cand.ModelNew(*ref.get_init_inputs()), ref.get_inputs())
            stored = [ln for ln in launches if "out0_sn" in ln.signature or "out0_s0" in ln.signature]
            assert stored, [ln.kernel for ln in launches]
            bad += [f.why() or f"{f.kernel}: {f.spills} bytes spilled" for f in sc.compile_launches(text, stored)
                    if not f.ok or f.spills]
    assert not bad, bad
