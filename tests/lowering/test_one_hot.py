"""F.one_hot (workbench/lowering/one_hot.py and capture._one_hot) against PyTorch: the class count inferred
(max kernel, one value read by the host, write kernel) on odd shapes, a 0-d and a non-contiguous input, and a
given count (traced as a comparison with an arange); int64, the only dtype one_hot takes; sm_90 compile."""
from __future__ import annotations

from pathlib import Path

import torch

from tests.lowering.helpers import check_candidate, load_module
from tests.lowering.test_primitives import SPEC
from workbench.lowering import lower_spec
from workbench.lowering import sm90_check as sc

F1 = "nn.functional.one_hot"
EXPR = (f"{F1}(x), {F1}(x.transpose(0, 2)), {F1}(y), {F1}(y[3]), {F1}(x, 29), {F1}(y, num_classes=5), "
        f"{F1}(x[:, 1:4:2], -1)")
INPUTS = "torch.randint(0, 23, (3, 5, 7)), torch.randint(0, 5, (11,))"


def test_one_hot(tmp_path: Path) -> None:
    spec = tmp_path / "one_hot.py"
    spec.write_text(SPEC.format(dt="int64", init="        pass", args="x, y", expr=EXPR, inputs=INPUTS))
    res = lower_spec(spec)
    assert res.source is not None, res.diagnosis
    assert "workbench.one_hot_infer.default" in res.ops
    check_candidate(spec, res.source, tmp_path)


def test_one_hot_compiles_for_sm90(tmp_path: Path) -> None:
    spec = tmp_path / "one_hot_sm90.py"
    spec.write_text(SPEC.format(dt="int64", init="        pass", args="x, y", expr=f"{F1}(x)", inputs=INPUTS))
    res = lower_spec(spec)
    assert res.source is not None, res.diagnosis
    path = tmp_path / "cand_one_hot_sm90.py"
    path.write_text(res.source)
    cand, ref = load_module(path, "cand_one_hot_sm90"), load_module(spec, "ref_one_hot_sm90")
    torch.manual_seed(0)
    launches = sc.record_launches(cand.ModelNew(), ref.get_inputs())
    bad = [f.why() for f in sc.compile_launches(res.source, launches) if not f.ok]
    assert launches and not bad, bad
