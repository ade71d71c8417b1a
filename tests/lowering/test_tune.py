"""The GPU config space of a lowered draft (workbench/lowering/tune.py), its sm_90 fit filter, and the CPU
dry run of `benchmarks/lowering_gpu.py run --tune` on a tiny staged problem."""
from __future__ import annotations

import csv
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


def test_cpu_dry_run_fills_tuned_columns(tmp_path: Path) -> None:
    from benchmarks import lowering_gpu as lg

    # a KernelBench-format folder of its own: CI's clone has no ../shared/kernelbench beside it
    root = tmp_path / "kb"
    (root / "level1").mkdir(parents=True)
    (root / "level1" / "1_Linear_ReLU.py").write_text((SPECS / "kb_linear_relu.py").read_text())
    d = tmp_path / "stage"
    assert lg.main(["stage", "--root", str(root), "--picks", "1:0:1", "--dir", str(d), "--max-elems", "4096",
                    "--prepare-timeout", "120"]) == 0
    out = tmp_path / "out"
    assert lg.main(["run", "--dir", str(d), "--out", str(out), "--device", "cpu", "--workers", "1", "--tune", "2",
                    "--cap-s", "120", "--budget-s", "300", "--warm-share", "0.5", "--compile-budget-s", "0"]) == 0
    (row,) = list(csv.DictReader((out / "lowering_gpu.csv").open()))
    assert row["correct"] == "True" and row["tune_tried"] == "2" and float(row["tuned_draft_us"]) > 0
    assert float(row["tuned_draft_us"]) <= float(row["draft_us"])
    s = json.loads((out / "summary.json").read_text())["1"]
    assert s["tuned_rows"] == 1 and s["geomean_vs_eager_tuned"] is not None
