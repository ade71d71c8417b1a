"""dist, cdist and pdist (workbench/lowering/distances.py) against PyTorch in every float dtype: p = 0, 1, 2, 1.5,
inf (and -inf for dist), batched and broadcast cdist, broadcast dist operands, an empty pdist."""
from __future__ import annotations

from pathlib import Path

import pytest

from tests.lowering.test_primitives import FLOATS, R, _family

CASES = {
    "dist": ("a, b", "torch.dist(a, b), torch.dist(a, b[0], 0), torch.dist(a, b, 1), torch.dist(a, b, 1.5), "
             "torch.dist(a, b, float('inf')), torch.dist(a, b, -float('inf'))",
             f"{R.format('3, 7')}, {R.format('3, 7')}"),
    "cdist": ("x, y", "torch.cdist(x, y), torch.cdist(x, y, p=1), torch.cdist(x[0], y[0], p=0), "
              "torch.cdist(x, y, p=float('inf')), torch.cdist(x, y, p=1.5), torch.cdist(x, y[:1], p=2)",
              f"{R.format('2, 5, 4')}, {R.format('2, 3, 4')}"),
    "pdist": ("x", "torch.nn.functional.pdist(x), torch.nn.functional.pdist(x, p=1), "
              "torch.nn.functional.pdist(x, p=float('inf')), torch.nn.functional.pdist(x[:1])", R.format("6, 5")),
}


@pytest.mark.parametrize("dt", FLOATS)
def test_distances(tmp_path: Path, dt: str) -> None:
    cases = CASES if dt == "float32" else {"dist": CASES["dist"]}  # PyTorch's CPU cdist/pdist: fp32/fp64 only
    _family(tmp_path, "distances", dt, cases)


def test_distance_kernels_compile_for_sm90(tmp_path: Path) -> None:
    import torch

    from tests.lowering.helpers import load_module
    from tests.lowering.test_primitives import SPEC
    from workbench.lowering import lower_spec
    from workbench.lowering import sm90_check as sc

    spec = tmp_path / "dist_sm90.py"
    spec.write_text(SPEC.format(dt="float32", init="        pass", args="x, y",
                                expr="torch.dist(x[0, :3], y[0], 1.5), torch.cdist(x, y), "
                                "torch.nn.functional.pdist(x[0])",
                                inputs=f"{R.format('2, 5, 4')}, {R.format('2, 3, 4')}"))
    res = lower_spec(spec)
    assert res.source is not None, res.diagnosis
    path = tmp_path / "cand_dist_sm90.py"
    path.write_text(res.source)
    cand, ref = load_module(path, "cand_dist_sm90"), load_module(spec, "ref_dist_sm90")
    torch.manual_seed(0)
    launches = sc.record_launches(cand.ModelNew(), ref.get_inputs())
    assert len(launches) >= 4
    bad = [f.why() for f in sc.compile_launches(res.source, launches) if not f.ok]
    assert not bad, bad
