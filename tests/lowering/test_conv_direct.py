"""The direct convolution form (few input channels a group: outer products per channel and tap, no tl.dot)
and its schedule switch CONV_DIRECT, which the tuner flips to the flat implicit GEMM: both forms and a
second tile against PyTorch, and both compiled for sm_90."""
from __future__ import annotations

import re
from pathlib import Path

import pytest
import torch

from tests.lowering.helpers import check_candidate, load_module
from tests.lowering.test_primitives import CONVS_DIRECT, SPEC, R
from workbench.lowering import lower_spec, tune
from workbench.lowering import sm90_check as sc
from workbench.tunables import apply_config, parse_tunables


def _spec(tmp_path: Path, dt: str) -> Path:
    cases = sorted(CONVS_DIRECT.items())
    init = "\n".join(f"        self.m{k} = {mod}.to(DT)" for k, (_, (mod, _)) in enumerate(cases))
    args = ", ".join(f"x{k}" for k in range(len(cases)))
    expr = ", ".join(f"torch.relu(self.m{k}(x{k})) - 0.5" for k in range(len(cases)))
    inputs = ", ".join(R.format(shp) for _, (_, shp) in cases)
    spec = tmp_path / f"conv_direct_{dt}.py"
    spec.write_text(SPEC.format(dt=dt, args=args, expr=expr, inputs=inputs, init=init))
    return spec


def _with(source: str, **cfg: object) -> str:
    return apply_config(source, parse_tunables(source), cfg)


@pytest.mark.parametrize("cfg", [{"CONV_DIRECT": 0}, {"DIRECT_BLOCK_P": 128, "DIRECT_BLOCK_CO": 8,
                                                      "DIRECT_NUM_WARPS": 2}])
def test_both_forms_and_another_tile_match_torch(tmp_path: Path, cfg: dict) -> None:
    spec = _spec(tmp_path, "float32")
    res = lower_spec(spec)
    assert res.source is not None, res.diagnosis
    n = len(CONVS_DIRECT)
    assert len(re.findall(r"direct \(ci, taps\) reduction", res.source)) == n
    assert len(re.findall(r"flat \(ci, k\) reduction", res.source)) == n
    assert "tl.dot" not in res.source.split("_flat(")[0]          # the direct kernel: FMA only
    check_candidate(spec, _with(res.source, **cfg), tmp_path)


def test_the_tuner_tries_the_flat_form_and_direct_tiles(tmp_path: Path) -> None:
    src = lower_spec(_spec(tmp_path, "float32")).source
    cfgs = tune.configs(src, 8)
    assert [c["CONV_DIRECT"] for c in cfgs[:2]] == [0, 1]
    assert {c["DIRECT_BLOCK_P"] for c in cfgs} >= {128, 512}
    assert all(c["DIRECT_BLOCK_P"] >= 32 * c["DIRECT_NUM_WARPS"] for c in cfgs)   # lanes along positions


def test_direct_form_compiles_for_sm90_without_spills_at_every_tuner_point(tmp_path: Path) -> None:
    spec = _spec(tmp_path, "float32")
    src = lower_spec(spec).source
    path = tmp_path / "cand_direct_sm90.py"
    path.write_text(src)
    ref, cand = load_module(spec, "ref_direct_sm90"), load_module(path, "cand_direct_sm90")
    torch.manual_seed(0)
    launches = [ln for ln in sc.record_launches(cand.ModelNew(*ref.get_init_inputs()), ref.get_inputs())
                if ln.kernel.startswith("conv")]
    assert launches
    for p, c, w, _ in tune.space()["direct"][1]:
        fits = sc.check_config(src, launches, {"DIRECT_BLOCK_P": p, "DIRECT_NUM_WARPS": w})
        bad = [f.why() or f"{f.kernel}: {f.spills} bytes spilled" for f in fits if not f.ok or f.spills]
        assert not bad, (p, c, w, bad)
