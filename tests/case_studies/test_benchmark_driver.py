"""The case studies' benchmark driver (`benchmarks/case_studies/run.py`) and A/B tool (`ab.py`) on the CPU:
the declared benchmark reduced as asked, new rows paired with the recorded ones, and a `--smoke` run
(tiny shapes, Triton's interpreter) that checks, measures and writes every file."""
from __future__ import annotations

import json

import pytest

from benchmarks.case_studies import ab, run
from benchmarks.case_studies.registry import CASES, get_case
from case_studies.common.results import read_rows
from case_studies.conv1d.bench import BENCHMARK as CONV1D


def test_every_case_study_is_registered_and_declares_what_the_driver_reads():
    assert set(CASES) == {"conv1d", "optimized_fm", "pffn", "mapid", "mbdt", "event_truncate"}
    for cfg in CASES.values():
        bench = cfg.bench()
        assert bench.BENCHMARK["sweeps"] and callable(bench.configured) and cfg.kernel_names()
        if cfg.exact:
            assert bench.DISPATCH_CONTENDERS and set(cfg.smoke_spec_shapes) <= set(
                __import__(f"case_studies.{cfg.name}.spec", fromlist=["SHAPES"]).SHAPES)
        else:
            assert bench.CHECKS["shapes"] and bench.CHECKS["configs"]
    with pytest.raises(KeyError):
        get_case("conv2d")


def test_select_keeps_the_named_sweeps_shapes_modes_and_compile_only_when_asked():
    d = run.select(CONV1D, ["production", "k5"], ["graph"], with_compile=False)
    # max_autotune (production shape, compile contenders only) goes: nothing of ours is left in it
    assert [s["name"] for s in d["sweeps"]] == ["production", "kernel_size"]
    assert [x["name"] for x in d["sweeps"][1]["shapes"]] == ["k5"]
    assert all(s["modes"] == ["graph"] for s in d["sweeps"])
    assert not any("compile" in c for s in d["sweeps"] for c in s["contenders"])
    full = run.select(CONV1D, [], [], with_compile=True)
    assert [s["name"] for s in full["sweeps"]] == [s["name"] for s in CONV1D["sweeps"]]
    assert "compile_default" in full["sweeps"][0]["contenders"]
    assert run.select(CONV1D, ["max_autotune"], [], with_compile=False)["sweeps"] == []
    assert run.select(CONV1D, ["max_autotune"], [], with_compile=True)["sweeps"][0]["contenders"] == [
        "eager", "conv2d_compile_max_autotune"]
    assert CONV1D["sweeps"][0]["contenders"][-1] == "triton"     # the declaration itself is untouched
    from case_studies.mbdt.bench import BENCHMARK as MBDT  # compiled_* sweeps: only ours would be left

    assert [s["name"] for s in run.select(MBDT, [], [], with_compile=False)["sweeps"]] == ["paper_range", "beyond"]


def test_versus_recorded_pairs_the_same_cell_and_keeps_the_faster_recorded_median():
    def row(contender, us, status="ok", mode="graph"):
        return {"shape": "s", "dtype": "float16", "contender": contender, "role": "kernel", "mode": mode,
                "status": status, "median_us": us}
    recorded = [row("triton", 10.0), row("triton", 8.0), row("eager", 20.0), row("triton", 5.0, mode="plain")]
    got = run.versus_recorded([row("triton", 9.0), row("eager", 1.0, "incorrect"), row("other", 3.0)], recorded)
    assert len(got) == 1 and got[0]["recorded_us"] == 8.0 and got[0]["ratio"] == pytest.approx(9.0 / 8.0)
    assert run.drift_lines("x", got)[0].startswith("x: 1 rows matched")
    assert "no row" in run.drift_lines("x", [])[0]


def test_smoke_run_checks_measures_and_writes_every_file(tmp_path):
    rc = run.main(["--case", "mapid,optimized_fm", "--smoke", "--out", str(tmp_path)])
    assert rc == 0
    doc = json.loads((tmp_path / "checks.json").read_text())
    assert doc["provenance"]["torch"] and set(doc["cases"]) == {"mapid", "optimized_fm"}
    for name, rec in doc["cases"].items():
        assert rec["ok"] and rec["checks"] and all(c["ok"] for c in rec["checks"]), name
    rows = read_rows(tmp_path / "optimized_fm.csv")
    assert {r["contender"] for r in rows} == {"eager", "triton"} and all(r["status"] == "ok" for r in rows)
    assert all(r["prov_torch"] for r in rows)
    disp = read_rows(tmp_path / "mapid_dispatch.csv")
    assert "dispatch" in {r["contender"] for r in disp} and all(r["status"] == "ok" for r in disp)
    assert "## mapid: ok" in (tmp_path / "summary.md").read_text()


def test_bad_command_lines_exit_2_with_one_line(tmp_path, capsys):
    assert run.main(["--case", "conv2d", "--smoke", "--out", str(tmp_path)]) == 2
    assert run.main(["--case", "mapid", "--modes", "eager", "--smoke", "--out", str(tmp_path)]) == 2
    assert run.main(["--case", "mapid", "--out", str(tmp_path)]) == 2        # no GPU and no --smoke
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 3 and all(line.startswith("run.py: ") for line in err)


def test_ab_plan_is_checked_before_anything_runs(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("shapes: [n24_k16]\nconfigs: {a: 3}\n")
    with pytest.raises(ValueError, match="must be a mapping or null"):
        ab.load_plan(bad)
    bad.write_text("shapes: [n24_k16]\n")
    with pytest.raises(ValueError, match="configs"):
        ab.load_plan(bad)
    good = tmp_path / "good.yaml"
    good.write_text("shapes: [nope]\nconfigs: {shipped: null}\n")
    with pytest.raises(ValueError, match="unknown shape 'nope'"):
        ab.resolve_shapes(get_case("optimized_fm"), ab.load_plan(good))


def test_ab_smoke_times_each_config_beside_the_baseline(tmp_path):
    plan = tmp_path / "ab.yaml"
    plan.write_text("shapes: [n24_k16]\ndtypes: [float16]\nconfigs:\n  shipped: null\n  fixed: {}\n"
                    "  narrow: {BLOCK_D: 16}\n")
    assert ab.main(["--case", "optimized_fm", "--configs", str(plan), "--out", str(tmp_path / "o"), "--smoke",
                    "--rounds", "2"]) == 0
    rows = read_rows(tmp_path / "o" / "ab.csv")
    assert sorted(r["config"] for r in rows) == ["eager", "fixed", "narrow", "shipped"]
    assert all(r["status"] == "ok" and r["rounds"] == 2 and r["revision"] == "head" for r in rows)
    assert "| smoke | float16 | plain | narrow | head |" in (tmp_path / "o" / "ab.md").read_text()


def test_dispatch_vs_eager_reports_the_worst_cell_against_the_098_rule():
    def row(shape, contender, us, mode="graph"):
        return {"shape": shape, "contender": contender, "mode": mode, "status": "ok", "median_us": us}
    got = run.dispatch_vs_eager([row("a", "eager", 20.0), row("a", "dispatch", 5.0), row("b", "eager", 10.0),
                                 row("b", "dispatch", 10.5), row("c", "eager", 9.0)])
    assert got["worst"] == "b graph" and got["min"] == pytest.approx(10 / 10.5) and not got["holds"]
    assert run.dispatch_vs_eager([row("a", "eager", 20.0), row("a", "dispatch", 5.0)])["holds"]
    assert not run.dispatch_vs_eager([])["holds"]


def test_every_committed_ab_config_file_loads_and_names_known_shapes():
    from pathlib import Path

    files = sorted((Path(ab.__file__).parent / "configs").glob("*.yaml"))
    assert files
    for f in files:
        plan = ab.load_plan(f)
        assert plan["case"] in CASES and ab.resolve_shapes(get_case(plan["case"]), plan), f.name
    assert ab.main(["--case", "mapid", "--configs", str(files[0]), "--out", "unused", "--smoke"]) == 2
