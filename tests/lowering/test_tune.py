"""The GPU config space of a lowered draft (workbench/lowering/tune.py) and its sm_90 fit filter; the offline
operator proposes these points first (tests/search/test_offline_operator.py)."""
from __future__ import annotations

import json
from pathlib import Path

from tests.lowering.helpers import load_module
from workbench.lowering import lower_spec, tune
from workbench.lowering import sm90_check as sc
from workbench.tunables import parse_tunables

SPECS = Path(__file__).parent / "specs"


def test_configs_stay_inside_the_drafts_tunables_and_differ_from_it() -> None:
    src = lower_spec(SPECS / "kb_linear_relu.py").source
    assert src is not None
    space = parse_tunables(src)
    cfgs = tune.configs(src, 8)
    assert 4 <= len(cfgs) <= 8 and len({json.dumps(c, sort_keys=True) for c in cfgs}) == len(cfgs)
    for c in cfgs:
        assert all(k in space.choices and v in space.choices[k] for k, v in c.items()), c
        assert any(space.current[k] != v for k, v in c.items())
    assert any(c.get("MM_PRECISION") == "tf32x3" for c in cfgs)
    assert len(tune.configs(src, 2)) == 2


def test_a_convolution_draft_tries_tf32x3_from_its_own_points() -> None:
    """The conv family carries its precision: a draft with no matmul gets no matmul points (whose ieee
    half used to pair with five of the eight conv tiles)."""
    src = lower_spec(SPECS / "kb_conv_tap_gelu.py").source
    assert src is not None and "MM_BLOCK_M" not in parse_tunables(src).choices
    cfgs = tune.configs(src, 8)
    assert len(cfgs) == 8
    assert sum(c["MM_PRECISION"] == "tf32x3" for c in cfgs) == 7
    assert [c["CONV_BLOCK_P"] for c in cfgs] == [p[0] for p in tune.space()["conv"][1]]


def test_fit_filter_drops_what_an_h200_block_cannot_hold(tmp_path: Path) -> None:
    spec = SPECS / "kb_linear_relu.py"
    src = lower_spec(spec).source
    path = tmp_path / "cand_tune.py"
    path.write_text(src)
    ref, cand = load_module(spec, "ref_tune"), load_module(path, "cand_tune")
    launches = sc.record_launches(cand.ModelNew(*ref.get_init_inputs()), ref.get_inputs())
    good = tune.configs(src, 1)
    bad = {"MM_BLOCK_M": 128, "MM_BLOCK_N": 128, "MM_BLOCK_K": 64, "MM_NUM_STAGES": 5, "MM_NUM_WARPS": 8}
    assert tune.fitting(src, launches, good + [bad]) == good
