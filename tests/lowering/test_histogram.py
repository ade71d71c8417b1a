"""histogram / histogramdd (workbench/lowering/histogram.py) against PyTorch: bin counts with the range from the
data, a given range, a constant input (the range widened by 0.5), an empty input; weights and density; sorted
and unsorted bin tensors (ATen's upper_bound decides); histogramdd over 1 and 3 dimensions. float32 only:
PyTorch's CPU histogram takes float32 and float64, and float16/bfloat16 raise there (checked below)."""
from __future__ import annotations

from pathlib import Path

import pytest
import torch

from tests.lowering.helpers import load_module
from tests.lowering.test_primitives import SPEC, _family
from workbench.lowering import lower_spec
from workbench.lowering import sm90_check as sc

EDGY = "(torch.randint(-12, 13, ({},)) / 4).to(DT)"  # quarters: values on the edges of bins over [-3, 3]
CASES = {
    "counts": ("x, w", "torch.histogram(x, 7), torch.histogram(x, 6, range=(-3.0, 3.0), weight=w, density=True), "
               "torch.histogram(x[0] * 0 + 1.5, 3), torch.histogram(x[:0], 4), "
               "torch.histogram(x, 1, range=(2.0, 2.0), weight=w)",
               f"{EDGY.format('5, 7')}, torch.rand(5, 7, dtype=DT)"),
    "tensors": ("x, w", "torch.histogram(x, torch.tensor([-3.0, -1.0, 0.25, 0.5, 3.0], dtype=DT)), "
                "torch.histogram(x, torch.tensor([-2.0, 1.0, -0.5, 2.5], dtype=DT), weight=w, density=True)",
                f"{EDGY.format('3, 11')}, torch.rand(3, 11, dtype=DT)"),
    "dd": ("y, w", "torch.histogramdd(y, (2, 3, 4)), torch.histogramdd(y, 3, weight=w, density=True), "
           "torch.histogramdd(y, (2, 2, 2), range=[-1.0, 1.0, 0.0, 0.0, -3.0, 3.0]), "
           "torch.histogramdd(y[:, :1], [torch.tensor([-3.0, 0.5, 0.0, 2.0], dtype=DT)], weight=w), "
           "torch.histogramdd(y, [torch.tensor([-3.0, 0.5, 3.0], dtype=DT), torch.tensor([-1.0, 1.0], dtype=DT), "
           "torch.tensor([-2.0, -1.5, 0.0, 1.25, 2.5], dtype=DT)], density=True)",
           f"{EDGY.format('13, 3')}, torch.rand(13, dtype=DT)"),
}


def test_histogram(tmp_path: Path) -> None:
    _family(tmp_path, "histogram", "float32", CASES)


def test_histogram_low_precision_is_not_an_eager_op() -> None:
    # the claim of the module docstring: no fp16/bf16 histogram to compare with on the CPU
    for dt in (torch.float16, torch.bfloat16):
        with pytest.raises(RuntimeError):
            torch.histogram(torch.ones(3, dtype=dt), 2)


def test_histogram_kernels_compile_for_sm90(tmp_path: Path) -> None:
    spec = tmp_path / "histogram_sm90.py"
    spec.write_text(SPEC.format(dt="float32", init="        pass", args="x, w",
                                expr="torch.histogram(x, 5, weight=w, density=True), "
                                     "torch.histogramdd(x, [torch.tensor([-3.0, 0.0, 3.0]), "
                                     "torch.tensor([-1.0, 1.0])])",
                                inputs=f"{EDGY.format('9, 2')}, torch.rand(9, 2)"))
    res = lower_spec(spec)
    assert res.source is not None, res.diagnosis
    path = tmp_path / "cand_histogram_sm90.py"
    path.write_text(res.source)
    cand, ref = load_module(path, "cand_histogram_sm90"), load_module(spec, "ref_histogram_sm90")
    torch.manual_seed(0)
    launches = sc.record_launches(cand.ModelNew(), ref.get_inputs())
    assert {ln.kernel.rsplit("_", 1)[-1] for ln in launches} >= {"minmax", "linspace", "copy", "count", "finish"}
    bad = [f.why() for f in sc.compile_launches(res.source, launches) if not f.ok]
    assert not bad, bad
