"""nonzero, argwhere, nonzero_static, masked_select and masked_scatter (workbench/lowering/compaction.py): count,
scan and write kernels, the host reading only the count; against PyTorch in every dtype on odd shapes: all
zero, no zero, 0-d and 1-d inputs, a broadcast mask, a non-contiguous input, more blocks than one scan chunk."""
from __future__ import annotations

from pathlib import Path

import pytest
import torch

from tests.lowering.helpers import load_module
from tests.lowering.test_primitives import FLOATS, SPEC, _family
from workbench.lowering import lower_spec
from workbench.lowering import sm90_check as sc

# about half zeros (bool and int inputs get zeros and ones too)
Z = "(torch.randn({}) * (torch.rand({}) > 0.5)).round().to(DT)"
CASES = {
    "nonzero": ("x, y", "torch.nonzero(x), torch.argwhere(x.transpose(0, 2)), torch.nonzero(x[0, 0, 0]), "
                "torch.nonzero(x * 0), torch.nonzero(y), torch.nonzero_static(x, size=7), "
                "torch.nonzero_static(x[1], size=200, fill_value=-3)",
                f"{Z.format('3, 5, 7', '3, 5, 7')}, {Z.format('2100', '2100')}"),
    "masks": ("x, m, s", "torch.masked_select(x, m), torch.masked_select(x[0], m), torch.masked_select(x, m[0, 0]), "
              "torch.masked_scatter(x, m, s), torch.masked_scatter(x.transpose(1, 2), m.t(), s), "
              "torch.masked_select(x, m & False), torch.masked_scatter(x[0, 0], m, s), "
              "torch.nonzero(x[0] * 0, as_tuple=True), torch.nonzero(x[1], as_tuple=True)",
              f"{Z.format('3, 5, 7', '3, 5, 7')}, torch.rand(5, 7) > 0.4, torch.randn(200).to(DT)"),
}


@pytest.mark.parametrize("dt", (*FLOATS, "int64", "bool"))
def test_compaction(tmp_path: Path, dt: str) -> None:
    cases = dict(CASES)
    if dt == "bool":  # randn of a bool tensor: the source values of masked_scatter as a comparison
        cases["masks"] = (cases["masks"][0], cases["masks"][1],
                          cases["masks"][2].replace("torch.randn(200).to(DT)", "torch.randn(200) > 0"))
    _family(tmp_path, "compaction", dt, cases)


def test_scan_spans_chunks(tmp_path: Path) -> None:
    """More blocks than one SCAN_CHUNK: the carry between chunks (BLOCK 16, chunk 256 in this candidate)."""
    spec = tmp_path / "compaction_chunks.py"
    spec.write_text(SPEC.format(dt="float32", init="        pass", args="x, m", expr="torch.nonzero(x), "
                                "torch.masked_select(x, m)", inputs=f"{Z.format('9000', '9000')}, "
                                "torch.rand(9000) > 0.3"))
    res = lower_spec(spec)
    assert res.source is not None, res.diagnosis
    src = res.source.replace("BLOCK = 1024", "BLOCK = 16").replace("SCAN_CHUNK = 1024", "SCAN_CHUNK = 256")
    assert "BLOCK = 16" in src and "SCAN_CHUNK = 256" in src
    from tests.lowering.helpers import check_candidate
    check_candidate(spec, src, tmp_path)


def test_compaction_kernels_compile_for_sm90(tmp_path: Path) -> None:
    spec = tmp_path / "compaction_sm90.py"
    spec.write_text(SPEC.format(dt="float16", init="        pass", args="x, m, s",
                                expr="torch.nonzero(x), torch.masked_select(x, m), torch.masked_scatter(x, m, s), "
                                "torch.nonzero_static(x, size=9)",
                                inputs=f"{Z.format('5, 7', '5, 7')}, torch.rand(5, 7) > 0.4, torch.randn(40).to(DT)"))
    res = lower_spec(spec)
    assert res.source is not None, res.diagnosis
    path = tmp_path / "cand_compaction_sm90.py"
    path.write_text(res.source)
    cand, ref = load_module(path, "cand_compaction_sm90"), load_module(spec, "ref_compaction_sm90")
    torch.manual_seed(0)
    launches = sc.record_launches(cand.ModelNew(), ref.get_inputs())
    assert len(launches) >= 10
    bad = [f.why() for f in sc.compile_launches(res.source, launches) if not f.ok]
    assert not bad, bad
