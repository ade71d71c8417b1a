"""mode and argsort in fp16 / bf16 on odd shapes with many equal values (low precision rounds distinct values
together): the values against PyTorch, the indices against the choice that is defined. The suite's CPU reference
differs there only in which of several equal elements an index names: its mode takes the last of the equal run
std::sort leaves (unstable above 16 elements) and its default argsort (stable=False) orders equal keys as its
unstable sort does; measured on OpInfo's samples (a 3000-element mode row, an 8000-element argsort row) the
candidate's index names an element of the same value in every mismatch. So mode's index is checked against
CUDA's choice, measured on an H100 (the largest index of the mode value for rows of up to 2048 elements, the
smallest above; mode.py), and argsort against torch.argsort(stable=True), which CUDA's default argsort matched on
OpInfo's fp16 and bf16 samples (the bitonic sort's keys carry the column: stable whatever `stable` says)."""
from __future__ import annotations

from pathlib import Path

import pytest
import torch

from tests.lowering.helpers import load_module
from tests.lowering.test_primitives import SPEC
from workbench.lowering import lower_spec

INPUTS = ("(torch.randn(3, 301) * 4).round().to(DT), torch.randn(5, 203).to(DT), "
          "(torch.randn(255) * 64).to(DT), (torch.randn(2049) * 8).round().to(DT)")
EXPR = ("torch.mode(x, 1), torch.mode(y.mT, 0, keepdim=True), torch.mode(z), torch.mode(w), "
        "torch.argsort(y), torch.argsort(y, 0, descending=True), torch.argsort(z, descending=True), "
        "torch.sort(x, stable=False)")


@pytest.mark.parametrize("dt", ("float16", "bfloat16"))
def test_mode_and_argsort_ties(tmp_path: Path, dt: str) -> None:
    spec = tmp_path / f"ties_{dt}.py"
    spec.write_text(SPEC.format(dt=dt, init="        pass", args="x, y, z, w", expr=EXPR, inputs=INPUTS))
    res = lower_spec(spec)
    assert res.source is not None, res.diagnosis
    path = tmp_path / f"cand_ties_{dt}.py"
    path.write_text(res.source)
    ref, cand = load_module(spec, f"ref_ties_{dt}"), load_module(path, f"cand_ties_{dt}")
    torch.manual_seed(0)
    x, y, z, w = ref.get_inputs()
    got = cand.ModelNew()(x, y, z, w)
    for (vals, idx), (data, dim, keep) in zip(got[:4], ((x, 1, False), (y.mT, 0, True), (z, -1, False), (w, 0, False))):
        want = torch.mode(data, dim, keepdim=keep)
        assert torch.equal(vals, want.values)
        pos = torch.arange(data.shape[dim]).reshape([-1] + [1] * (data.dim() - 1 - dim % data.dim()))
        hit = data == (want.values if keep else want.values.unsqueeze(dim))
        n = data.shape[dim]
        want_idx = torch.where(hit, pos, -1).amax(dim, keepdim=keep) if n <= 2048 else \
            torch.where(hit, pos, n).amin(dim, keepdim=keep)
        assert torch.equal(idx, want_idx), n
    assert torch.equal(got[4], torch.argsort(y, stable=True))
    assert torch.equal(got[5], torch.argsort(y, dim=0, descending=True, stable=True))
    assert torch.equal(got[6], torch.argsort(z, dim=-1, descending=True, stable=True))
    assert torch.equal(got[7][0], torch.sort(x).values)
    assert torch.equal(got[7][1], torch.sort(x, stable=True).indices)
    ties = [(t.unique().numel(), t.numel()) for t in (x, y, z, w)]
    assert all(u < n for u, n in ties), ties  # the rows do hold equal values
