"""Trace model on real H200 outputs (fixtures and the committed self-check results), and bad input."""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import pytest

import profiling
from profiling import formats as F

FIX = Path(__file__).parent / "fixtures"
RESULTS = Path(__file__).resolve().parents[2] / "results" / "profiling" / "h200"
CASES = ("scale_add", "softmax", "matmul", "mbdt")


def test_kernel_tree_with_scope_bytes_and_ceiling():
    prof = profiling.load(FIX / "kern.hatchet")
    assert (
        prof.device["arch"] == "sm_90"
        and prof.device["clock_mhz"] == 1980.0
        and prof.device["num_sms"] == 132
    )
    (row,) = prof.kernels.to_dict(orient="records")
    assert (row["kernel"], row["scope"], row["launches"], row["time_ns"]) == ("k", "outer", 3, 7200.0)
    assert row["time_per_launch_us"] == pytest.approx(2.4)
    # the scope's bytes go to its only kernel: 12582912 B in 7200 ns
    assert row["gbps"] == pytest.approx(12582912 / 7200e-9 / 1e9)
    assert row["bw_ceiling_gbps"] == 4300.0 and row["bw_fraction"] == pytest.approx(row["gbps"] / 4300.0)


def test_kernel_chrome_trace_in_us():
    prof = profiling.load(FIX / "kt.chrome_trace")
    assert prof.kernels[["kernel", "launches", "time_ns"]].values.tolist() == [
        ["k", 1, pytest.approx(2560.0)]
    ]
    assert prof.kernel_events["stream"].tolist() == [7]


def test_kernel_chrome_trace_as_json_lines(tmp_path):
    one = json.loads((FIX / "kt.chrome_trace").read_text())
    two = dict(one, traceEvents=[dict(one["traceEvents"][0], tid=9, dur=1.0)])
    p = tmp_path / "streams.chrome_trace"
    p.write_text(json.dumps(one) + "\n" + json.dumps(two) + "\n")
    prof = profiling.load(p)
    assert sorted(prof.kernel_events["stream"]) == [7, 9]
    assert prof.kernels["time_ns"].sum() == pytest.approx(3560.0)


def test_probe_tree_and_trace_together():
    prof = profiling.load(FIX / "it.hatchet", FIX / "itr.chrome_trace", launches=1)
    reg = prof.regions.set_index("region")
    assert reg.loc["ld", "cycles"] == 13826590 and reg.loc["ld", "normalized_cycles"] == pytest.approx(
        3375.632324
    )
    assert reg.loc["ld", "share"] + reg.loc["lp", "share"] == pytest.approx(1.0)
    assert reg.loc["ld", "ns_per_launch"] == pytest.approx(3375.632324 * 1e3 / 1980.0)
    # spread from the trace: 1024 CTAs, warp 0 sampled only
    assert reg.loc["ld", "n_ctas"] == 1024 and reg.loc["ld", "n_warps"] == 1
    ev = prof.events
    assert len(ev) == 2048 and set(ev["warp"]) == {0}
    first = ev.iloc[0]  # "ts": 0.096, "dur": 0.128 at a recorded 1000 MHz -> 96 and 128 cycles
    assert (first["cta"], first["sm"], first["start_cycles"], first["dur_cycles"]) == (116, 0, 96.0, 128.0)
    assert first["dur_ns"] == pytest.approx(128 / 1.98)
    tl = prof.timeline(116)
    assert tl["region"].tolist() == ["ld", "lp"]
    assert prof.cta_durations("ld")["cta"].nunique() == 1024


def test_overlap_view_counts_other_warps_only():
    prof = profiling.load(FIX / "itr.chrome_trace", clock_mhz=1980)
    ov = prof.overlap()
    assert len(ov) == 4 and (ov["concurrent_share"] == 0).all()  # one warp sampled: nothing concurrent
    # two warps of one CTA, made to overlap by hand
    ev = prof.events[prof.events["cta"] == 116].copy()
    ev2 = ev.assign(warp=1)
    both = profiling.overlap_table(__import__("pandas").concat([ev, ev2]))
    same = both[(both["region_a"] == "ld") & (both["region_b"] == "ld")].iloc[0]
    assert same["concurrent_share"] == pytest.approx(1.0)


def test_launch_counts_scope_aware_and_missing_region():
    prof = profiling.load(FIX / "run2_cupti.hatchet", FIX / "run2_instr.hatchet")
    l4 = prof.regions[prof.regions["scope"] == "s1/L4"].set_index("region")
    assert (l4["launches"] == 5).all()
    assert l4.loc["lp", "cycles_per_launch"] == pytest.approx(4431.87467956543 / 5)
    # with buffer_size=4096 the circular buffer dropped `ld` under L64
    with pytest.raises(profiling.MissingRegionsError, match="circular buffer") as err:
        sub = profiling.load(FIX / "run2_instr.hatchet", launches=5)
        sub.regions = sub.regions[sub.regions["scope"] == "s1/L64"]
        sub.check_regions(["ld", "lp"])
    assert err.value.missing == ["ld"]


def test_unknown_launch_count_is_a_warning():
    prof = profiling.load(FIX / "it.hatchet")
    assert any("launch count unknown" in w for w in prof.warnings)
    assert (prof.regions["launches"] == 1).all()


def test_profile_without_probe_regions():
    prof = profiling.load(FIX / "kern.hatchet")
    with pytest.raises(profiling.MissingRegionsError, match="no probe regions at all.*PROBES=True"):
        prof.check_regions(["load"])


@pytest.mark.parametrize(
    "content, message",
    [
        (None, "does not exist"),
        ("", "is empty"),
        ('[{"children": [{"frame": {"name": "k"', "truncated or not valid JSON"),
        ('{"traceEvents": []}', "holds no events"),
        (
            '[{"frame": {"name": "ROOT"}, "metrics": {}, "children": []}, {}]',
            "neither kernel times nor probe cycles",
        ),
        ('{"version": 4, "nodes": [], "metrics": ["time"]}', "another Triton/Proton version"),
        (
            '{"traceEvents": [{"name": "ld", "pid": "k SM0 CTA1", "tid": "warp 0", "ts": 0, "dur": 1}]}',
            "another Proton version",
        ),
    ],
)
def test_bad_files_have_clear_messages(tmp_path, content, message):
    p = tmp_path / "bad.hatchet"
    if content is not None:
        p.write_text(content)
    with pytest.raises(profiling.TraceFileError, match=message):
        profiling.load(p)


def test_binary_profile_from_a_newer_triton(tmp_path):
    doc = json.loads((FIX / "it.hatchet").read_text())
    p = tmp_path / "new.hatchet"
    try:
        import msgpack
    except ImportError:
        p.write_bytes(b"\x92\x81\xa8children\x90")
        with pytest.raises(profiling.TraceVersionError, match="msgpack profile written by Triton >= 3.7"):
            profiling.load(p)
        return
    p.write_bytes(msgpack.packb(doc))
    assert profiling.load(p, launches=1).regions["cycles"].tolist() == [13826590.0, 7008274.0]


def test_sidecar_from_another_triton_version(tmp_path):
    p = tmp_path / "old.hatchet"
    shutil.copy(FIX / "kern.hatchet", p)
    F.sidecar_path(p).write_text(json.dumps({"triton": "3.2.0", "launches": {}}))
    prof = profiling.load(p)
    assert any("Triton 3.2.0" in w and "checked against" in w for w in prof.warnings)
    assert "caveats" in profiling.summarize(prof)


def test_warn_mode_keeps_what_it_can_read(tmp_path):
    bad = tmp_path / "cut.chrome_trace"
    bad.write_text((FIX / "itr.chrome_trace").read_text()[:5000])
    prof = profiling.load(bad, FIX / "kern.hatchet", on_error="warn")
    assert [s.name for s in prof.sources] == ["kern.hatchet"]
    assert any("truncated" in w for w in prof.warnings)
    with pytest.raises(profiling.TraceFileError, match="no readable trace"):
        profiling.load(bad, on_error="warn")


def test_subsample_probe_trace(tmp_path):
    info = profiling.subsample_probe_trace(FIX / "itr.chrome_trace", tmp_path / "s.chrome_trace", max_ctas=16)
    assert info["ctas_total"] == 1024 and info["ctas_kept"] == 16 and info["events_kept"] == 32
    assert (tmp_path / "s.chrome_trace").stat().st_size < 10_000
    assert len(profiling.load(tmp_path / "s.chrome_trace").ctas()) == 16


# --- the committed H200 self-check (python -m profiling.selfcheck) -------------------------------------


def test_committed_selfcheck_is_complete_and_small():
    check = json.loads((RESULTS / "selfcheck.json").read_text())
    assert check["passed"] is True
    assert check["provenance"]["gpu"] == "NVIDIA H200" and check["provenance"]["triton"].startswith("3.6")
    for case in CASES:
        c = check["cases"][case]
        assert c["checks"]["cupti_vs_cuda_events"]["relative_difference"] <= 0.10
        assert c["instrumented"]["overhead"] > -0.05  # probes do not make a kernel faster
    for f in RESULTS.iterdir():
        assert f.stat().st_size < 1_000_000, f


@pytest.mark.parametrize("case", CASES)
def test_committed_traces_parse_with_every_declared_region(case):
    check = json.loads((RESULTS / "selfcheck.json").read_text())["cases"][case]
    prof = profiling.load(
        RESULTS / f"{case}_kernels.hatchet",
        RESULTS / f"{case}_probes.hatchet",
        RESULTS / f"{case}_probes_kernels.hatchet",
        RESULTS / f"{case}_probes.chrome_trace",
    )
    kernel = check["kernel"]
    prof.check_regions(check["declared_regions"], kernel=kernel)
    reg = prof.regions[prof.regions["kernel"] == kernel]
    assert (reg["launches"] == 3).all() and (reg["cycles_per_launch"] > 0).all()
    assert reg.loc[reg["depth"] == 0, "share"].sum() == pytest.approx(1.0)
    assert set(check["declared_regions"]) <= set(prof.events["region"])
    plain = prof.kernels[(prof.kernels["kernel"] == kernel) & (prof.kernels["scope"] == case)].iloc[0]
    assert plain["launches"] == 20 and not math.isnan(plain["gbps"])
    text = profiling.summarize(prof)
    assert f"kernel `{kernel}`" in text and "probes in" in text and "overhead" in text
