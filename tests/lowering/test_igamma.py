"""igamma / igammac (workbench/lowering/igamma.py) against PyTorch in fp32/fp16/bf16: broadcasting odd shapes,
both algorithms (series for x < a + 1, the continued fraction above), a near x (ATen's asymptotic regime for
a > 20), small a and x, and ATen's boundary values in its order (a or x < 0, a = 0, x = 0, inf, nan)."""
from __future__ import annotations

from pathlib import Path

import pytest
import torch

from tests.lowering.helpers import load_module
from tests.lowering.test_primitives import FLOATS, SPEC, _family
from workbench.lowering import lower_spec
from workbench.lowering import sm90_check as sc

# a and x over (0, 12): both branches; the 1 x 5 row broadcasts against the 7 x 1 column
CASES = {
    "small": ("a, x", "torch.igamma(a, x), torch.igammac(a, x), torch.special.gammainc(a[0], x[:, :1] * 0.1)",
              "(torch.rand(1, 5) * 12 + 0.01).to(DT), (torch.rand(7, 1) * 12 + 0.001).to(DT)"),
    # a in (20, 180), x within 30% of a: where ATen uses Temme's expansion; the Stirling prefactor here
    "large": ("a, t", "torch.igamma(a, a * t), torch.special.gammaincc(a, a * t)",
              "(torch.rand(13) * 160 + 20).to(DT), (torch.rand(13) * 0.6 + 0.7).to(DT)"),
}
EDGES = ("a, x", "torch.igamma(a[:, None], x[None, :]), torch.igammac(a[:, None], x[None, :])",
         "torch.tensor([0.0, 2.0, -1.0, float('inf'), float('nan'), 0.5]), "
         "torch.tensor([0.0, 1.5, -2.0, float('inf'), float('nan'), 3.0e-3])")


@pytest.mark.parametrize("dt", FLOATS)
def test_igamma(tmp_path: Path, dt: str) -> None:
    _family(tmp_path, "igamma", dt, CASES)


def test_igamma_boundaries(tmp_path: Path) -> None:
    _family(tmp_path, "igamma_edges", "float32", {"edges": EDGES})


def test_igamma_kernels_compile_for_sm90(tmp_path: Path) -> None:
    spec = tmp_path / "igamma_sm90.py"
    spec.write_text(SPEC.format(dt="bfloat16", init="        pass", args="a, x",
                                expr="torch.igamma(a, x), torch.igammac(a, x.float())",
                                inputs="(torch.rand(3, 5) * 9).to(DT), (torch.rand(5) * 9).to(DT)"))
    res = lower_spec(spec)
    assert res.source is not None, res.diagnosis
    path = tmp_path / "cand_igamma_sm90.py"
    path.write_text(res.source)
    cand, ref = load_module(path, "cand_igamma_sm90"), load_module(spec, "ref_igamma_sm90")
    torch.manual_seed(0)
    launches = sc.record_launches(cand.ModelNew(), ref.get_inputs())
    assert len(launches) >= 2  # a bf16 and an fp32 result (and the cast of x)
    bad = [f.why() for f in sc.compile_launches(res.source, launches) if not f.ok]
    assert not bad, bad
