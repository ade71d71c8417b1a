"""Pools and matmuls that store into their slice of a cat's buffer (cat_chain.direct_writes, beside
test_cat_inplace.py's convolutions and pointwise kernels): max, average and adaptive pools along the batch or
channel dim (a max pool's indices still their own tensor), mm and bmm outputs along any dim (an RNN's stacked
outputs, the split-K path's second phase); a value read by anything else, or a view of one (a 1-d pool's
squeeze), keeps its copy. Against PyTorch in fp32/fp16/bf16 with odd sizes, the published VanillaRNNs' copy
counts, and the stored kernels compile for sm_90."""
from __future__ import annotations

import re
from pathlib import Path

import pytest
import torch

from tests.lowering.helpers import check_candidate, load_module
from tests.lowering.test_cat_chain import KB3
from tests.lowering.test_primitives import FLOATS, SPEC
from workbench.lowering import lower_spec
from workbench.lowering import sm90_check as sc


def _spec(tmp_path: Path, name: str, dt: str, init: str, body: str, inputs: str, args: str) -> Path:
    spec = tmp_path / f"{name}_{dt}.py"
    text = SPEC.format(dt=dt, args=args, expr="None", inputs=inputs, init=init)
    text = text.replace("import torch.nn as nn\n", "import torch.nn as nn\nimport torch.nn.functional as F\n")
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


# x [2, 5, 7, 9]: four pools to [4, 5] cat along channels (a max pool whose indices are returned too, an adaptive
# max pool, a ceil-mode max pool, an average pool without the padding in its count); a pool that tanh reads too
# (copied) beside tanh's result; w [2, 3, 4, 5, 6]: a 3-d max pool and an adaptive average one cat along the batch
# y [2, 3, 11]: avg_pool1d and max_pool1d along channels (each a squeeze view of a 2-d pool: copied)
POOLS = """
v, i = F.max_pool2d(x, 3, stride=2, padding=1, return_indices=True)
m = torch.cat([v, F.adaptive_max_pool2d(x, (4, 5)), F.max_pool2d(x, 2, 2, ceil_mode=True),
               F.avg_pool2d(x, 3, 2, padding=1, count_include_pad=False)], 1)
a = F.avg_pool2d(x, 2, ceil_mode=True)
shared = torch.cat([a, torch.tanh(a)], 1)
t = torch.cat([F.max_pool3d(w, 2), F.adaptive_avg_pool3d(w, (2, 2, 3))], 0)
ln = torch.cat([F.avg_pool1d(y, 3, 2), F.max_pool1d(y, 2)], 1)
return m, i, shared, t, ln
"""
POOL_INPUTS = "torch.randn(2, 5, 7, 9, dtype=DT), torch.randn(2, 3, 4, 5, 6, dtype=DT), torch.randn(2, 3, 11, dtype=DT)"


@pytest.mark.parametrize("dt", FLOATS)
def test_pools_store_into_a_cat(tmp_path: Path, dt: str) -> None:
    spec = _spec(tmp_path, "pools", dt, "        pass", POOLS, POOL_INPUTS, "x, w, y")
    src = _lower(spec)
    # stored: the 4 pools of m, tanh(a), both 3-d pools; copied: a (tanh reads it) and the two 1-d pools' views
    assert _slices(src) == 4 + 1 + 2, src
    assert _copies(src) == 1 + 2, src  # was 10
    check_candidate(spec, src, tmp_path)


# a DenseNet transition then a block: the pool's output is the block's first feature, and the first layer reads it
# too, so it keeps its copy (the layers' convolutions store in place)
TRANSITION_INIT = "        self.c = nn.ModuleList([nn.Conv2d(5 + 3 * i, 3, 3, padding=1).to(DT) for i in range(2)])"
TRANSITION = """
x = F.avg_pool2d(x, 2)
feats = [x]
for c in self.c:
    feats.append(c(torch.relu(x)))
    x = torch.cat(feats, 1)
return x
"""


def test_a_pool_that_a_layer_reads_too_keeps_its_copy(tmp_path: Path) -> None:
    spec = _spec(tmp_path, "transition", "float32", TRANSITION_INIT, TRANSITION, "torch.randn(2, 5, 7, 9, dtype=DT)",
                 "x")
    src = _lower(spec)
    assert _copies(src) == 1 and "avg_pool2d = torch.empty" in src, src
    check_candidate(spec, src, tmp_path)


# a vanilla RNN of 3 steps (33/34_VanillaRNN's cell): the hidden state is read by the next step's cat and by the
# output's linear (copied), the outputs stacked (a cat along dim 0 of mm + bias kernels: stored); bmm results cat
# along their last dim (one with a ReLU epilogue) and along rows; a long K (the split-K path) along columns
MM_INIT = """        self.i2h = nn.Linear(6 + 5, 5).to(DT)
        self.h2o = nn.Linear(5, 3).to(DT)"""
MATMULS = """
outs = []
for t in range(3):
    h = torch.tanh(self.i2h(torch.cat([x[t], h], 1)))
    outs.append(self.h2o(h))
s = torch.stack(outs)
zt = z.transpose(1, 2)
b = torch.cat([torch.bmm(z, zt), torch.relu(torch.bmm(z * 0.5, zt))], 2)
r = torch.cat([torch.bmm(z, zt) * 2.0, torch.bmm(z[:, :2], zt)], 1)
k = torch.cat([u @ v, u @ (v * 0.25)], 1)
return s, h, b, r, k
"""
MM_INPUTS = ("torch.randn(3, 4, 6, dtype=DT), torch.randn(4, 5, dtype=DT), torch.randn(2, 3, 5, dtype=DT), "
             "torch.randn(3, 4096, dtype=DT) / 64, torch.randn(4096, 5, dtype=DT)")


@pytest.mark.parametrize("dt", FLOATS)
def test_matmuls_store_into_a_cat(tmp_path: Path, dt: str) -> None:
    spec = _spec(tmp_path, "matmuls", dt, MM_INIT, MATMULS, MM_INPUTS, "x, h, z, u, v")
    src = _lower(spec)
    # stored: the 3 stacked outputs, b's and r's 4 bmm results, k's 2 products; copied: each step's x[t] (a view
    # of an input) and its hidden state (h, then h read by h2o too): 6 (was 15)
    assert _slices(src) == 3 + 4 + 2, src
    assert _copies(src) == 3 + 3, src
    assert "_split > 1" in src
    check_candidate(spec, src, tmp_path)


@pytest.mark.skipif(not (KB3 / "34_VanillaRNNHidden.py").is_file(),
                    reason="KernelBench level 3 is not beside this checkout")
def test_the_published_vanilla_rnns_stack_their_outputs_in_place() -> None:
    # 34: each step copies x[t] and its hidden state (read by h2o too; the first: h0, an input); the stacked
    # outputs are stored by h2o's kernels (3 copies a step before); 33: x only (self.hidden's copy_ kernel stores
    # into the cat: its one other user is a metadata assert, which reads nothing)
    res = lower_spec(KB3 / "34_VanillaRNNHidden.py", {"sequence_length": 4})
    assert res.source is not None, res.diagnosis
    assert _copies(res.source) == 2 * 4 and _slices(res.source) == 4
    res = lower_spec(KB3 / "33_VanillaRNN.py")
    assert res.source is not None, res.diagnosis
    assert _copies(res.source) == 1 and _slices(res.source) == 1


def test_stored_pool_and_matmul_kernels_compile_for_sm90(tmp_path: Path) -> None:
    bad, seen = [], set()
    for name, init, body, inputs, args in (("pools_sm90", "        pass", POOLS, POOL_INPUTS, "x, w, y"),
                                           ("mm_sm90", MM_INIT, MATMULS, MM_INPUTS, "x, h, z, u, v")):
        spec = _spec(tmp_path, name, "float32", init, body, inputs, args)
        path = tmp_path / f"cand_{name}.py"
        path.write_text(_lower(spec))
        ref, cand = load_module(spec, f"ref_{name}"), load_module(path, f"cand_{name}")
        torch.manual_seed(0)
        launches = sc.record_launches(cand.ModelNew(*ref.get_init_inputs()), ref.get_inputs())
        stored = [ln for ln in launches if {"out_sn", "out_gap", "out0_sb", "out1_sb"} & set(ln.signature)]
        seen |= {re.sub(r"_\d+$", "", ln.kernel) for ln in stored}
        bad += [f.why() or f"{f.kernel}: {f.spills} bytes spilled"
                for f in sc.compile_launches(path.read_text(), stored) if not f.ok or f.spills]
    assert seen == {"pool_kernel", "apool_kernel", "matmul_kernel"}, seen
    assert not bad, bad
