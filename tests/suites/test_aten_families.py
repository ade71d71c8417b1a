"""The ATen suite's op families (the report's speed per family) from OpInfo names, without the database."""
from __future__ import annotations

import pytest

from workbench.suites.aten_families import family
from workbench.suites.evidence import by_family


@pytest.mark.parametrize("name,cls,want", [
    ("nn.functional.max_pool2d", "OpInfo", "pooling and resampling"),
    ("nn.functional.adaptive_avg_pool3d", "OpInfo", "pooling and resampling"),
    ("linalg.cholesky", "OpInfo", "linear algebra"),
    ("cholesky_solve", "OpInfo", "linear algebra"),
    ("special.bessel_j0", "UnaryUfuncInfo", "special functions"),
    ("fft.irfft", "SpectralFuncInfo", "fft"),
    ("addmm", "OpInfo", "matmul and attention"),
    ("max", "OpInfo", "sort and select"),
    ("unique_consecutive", "OpInfo", "sort and select"),
    ("scatter_reduce", "OpInfo", "indexing and scatter"),
    ("nonzero_static", "OpInfo", "indexing and scatter"),
    ("diagonal_copy", "OpInfo", "shape and copy"),
    ("logcumsumexp", "OpInfo", "softmax and scans"),
    ("_softmax_backward_data", "OpInfo", "softmax and scans"),
    ("nn.functional.layer_norm", "OpInfo", "normalization"),
    ("nn.functional.huber_loss", "OpInfo", "losses"),
    ("randn", "OpInfo", "random"),
    ("zeros_like", "OpInfo", "factories"),
    ("sum", "ReductionOpInfo", "reduction"),
    ("sin", "UnaryUfuncInfo", "pointwise"),
    ("nn.functional.relu", "UnaryUfuncInfo", "pointwise"),
    ("nn.functional.glu", "OpInfo", "activations and other nn.functional"),
    ("something_new", "OpInfo", "other"),
])
def test_family_by_name_then_by_opinfo_class(name, cls, want):
    assert family(name, cls) == want


def test_speed_per_family_over_every_dtype():
    recs = [{"problem_id": "aten/abs/float32", "correct": True, "speedup": 2.0, "speedup_vs_compile": 1.0},
            {"problem_id": "aten/abs/bfloat16", "correct": True, "speedup": 0.5, "speedup_vs_compile": 0.25},
            {"problem_id": "aten/max.reduction_with_dim/float32", "correct": False, "speedup": 0.0},
            {"problem_id": "aten/unlisted/float32", "correct": True, "speedup": 3.0}]
    fams = {"abs": "pointwise", "max.reduction_with_dim": "sort and select"}
    got = by_family(recs, fams)
    assert list(got) == ["pointwise", "sort and select", "other"]  # most ops first
    pw = got["pointwise"]
    assert pw["n"] == 2 and pw["correct"] == 2 and pw["geomean_speedup"] == pytest.approx(1.0)
    assert pw["fast_1"] == 0.5 and pw["fast_1_vs_compile"] == 0
    assert pw["geomean_speedup_vs_compile"] == pytest.approx(0.5)
    assert got["sort and select"]["correct"] == 0 and got["sort and select"]["fast_1_vs_compile"] is None
