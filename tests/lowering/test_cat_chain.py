"""Chains of growing cats (workbench/lowering/cat_chain.py): a dense block's cats share the last one's buffer,
each earlier cat is a prefix view of it and each input is copied once (L + 1 copy launches for L layers, not
L * (L + 3) / 2), against PyTorch in every float dtype; a cat that is a graph output (or a view of one)
ends its chain, and cats of different dtypes or dims never share a buffer."""
from __future__ import annotations

import re
from pathlib import Path

import pytest
import torch

from tests.lowering.helpers import check_candidate, load_module
from tests.lowering.test_primitives import FLOATS, SPEC
from workbench.lowering import lower_spec

KB3 = Path(__file__).resolve().parents[3] / "shared" / "kernelbench" / "level3"


def _lower(tmp_path: Path, name: str, dt: str, args: str, body: str, inputs: str) -> str:
    """One spec whose forward is `body` (statements; the last line is the return), lowered and checked."""
    spec = tmp_path / f"{name}_{dt}.py"
    text = SPEC.format(dt=dt, args=args, expr="None", inputs=inputs, init="        pass")
    text = text.replace("        return (None,)", "\n".join("        " + ln for ln in body.strip().splitlines()))
    spec.write_text(text)
    res = lower_spec(spec)
    assert res.source is not None, res.diagnosis
    check_candidate(spec, res.source, tmp_path)
    return res.source


def _cat_launches(source: str) -> int:
    return len(re.findall(r"cat_kernel_\d+\[", source))


# a layer: a pointwise kernel over the last two channels plus a reduction over all of them (both read the
# prefix view through its strides); features-list cats (DenseNet's) and x = cat([x, new]) cats
DENSE = """
feats = [x]
for i in range(4):
    new = torch.relu(x[:, -2:] * 1.5 + 0.25) + x.mean(1, keepdim=True)
    feats.append(new)
    x = torch.cat(feats, 1)
for i in range(3):
    y = torch.cat([y, torch.tanh(y[:, :3]) * 0.5], 1)
return x, y
"""


@pytest.mark.parametrize("dt", FLOATS)
def test_dense_block_cats_copy_each_input_once(tmp_path: Path, dt: str) -> None:
    src = _lower(tmp_path, "dense", dt, "x, y", DENSE, "torch.randn(2, 3, 4, 5, dtype=DT), "
                 "torch.randn(2, 3, 6, dtype=DT)")
    # x: its own copy (each layer's pointwise kernel stores its new feature in place: cat_chain.direct_writes;
    # copied, 4 layers were 5 launches, before the chain 14); y: its own copy (was 4, before the chain 6)
    assert _cat_launches(src) == 1 + 1, src
    assert src.count("(chained)") == 4 + 3
    assert len(re.findall(r"\bcat\w* = torch\.empty", src)) == 2  # one buffer per chain


# each second cat extends its first by one channel (a plain int: x's channels are symbolic), except e2, whose
# third input has x's symbolic channels (the buffer would be sized before it exists)
INTERMEDIATE_OUT = """
r, t, u = torch.relu(x), x * 2.0, x + 1.0
a1 = torch.cat([x, r], 1)
a2 = torch.cat([x, r, torch.sigmoid(a1[:, :1])], 1)
b1 = torch.cat([x, t], 1)
b2 = torch.cat([x, t, b1[:, :1] * 3.0], 1)
c1 = torch.cat([x, u], 1)
c2 = torch.cat([x, u, c1[:, :1].double()], 1)
d1 = torch.cat([r, t], 1)
d2 = torch.cat([r, t, d1[:, 1:2] * 0.5], 1)
e1 = torch.cat([r, u], 1)
e2 = torch.cat([r, u, e1[:, 1:] * 0.5], 1)
return a1, a2, b1.transpose(0, 1), b2, c2, d2, e2
"""


def test_a_cat_returned_or_of_another_dtype_ends_the_chain(tmp_path: Path) -> None:
    src = _lower(tmp_path, "ends", "float32", "x", INTERMEDIATE_OUT, "torch.randn(3, 2, 4, dtype=DT)")
    # d's cats, and a2, b2, c2, e2: single cats whose last input is stored in place by its pointwise kernel
    assert src.count("(chained)") == 2 + 4, src
    assert _cat_launches(src) == (2 + 3) * 4 + 3 - 5
    cand_path = tmp_path / "cand_ends_float32.py"
    cand = load_module(cand_path, "cat_chain_ends_cand")
    outs = cand.ModelNew()(torch.randn(3, 2, 4))
    # eager's outputs are fresh tensors: none may be a view of another's storage
    assert len({o.untyped_storage().data_ptr() for o in outs}) == len(outs)
    assert outs[0].is_contiguous() and outs[3].is_contiguous()


@pytest.mark.skipif(not (KB3 / "14_DenseNet121DenseBlock.py").is_file(),
                    reason="KernelBench level 3 is not beside this checkout")
def test_published_densenet_block_copies_each_feature_once() -> None:
    res = lower_spec(KB3 / "14_DenseNet121DenseBlock.py")
    assert res.source is not None, res.diagnosis
    # the block's input (was 7 with each layer's convolution output copied, and 27 before the chain: every
    # layer's cat copied every earlier feature again)
    assert _cat_launches(res.source) == 1
