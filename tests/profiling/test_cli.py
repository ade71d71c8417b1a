"""`workbench profile ...` prints the tables of recorded traces and fails clearly on bad files."""

from __future__ import annotations

import json
from pathlib import Path

from workbench.cli import main

FIX = Path(__file__).parent / "fixtures"
RESULTS = Path(__file__).resolve().parents[2] / "results" / "profiling" / "h200"


def test_inspect_prints_kernel_region_and_overlap_tables(capsys):
    rc = main(
        [
            "profile",
            "inspect",
            str(RESULTS / "softmax_kernels.hatchet"),
            str(RESULTS / "softmax_probes.hatchet"),
            str(RESULTS / "softmax_probes.chrome_trace"),
            "--overlap",
        ]
    )
    out = capsys.readouterr().out
    assert rc == 0
    assert "device: sm_90, 132 SMs, clock 1980.0 MHz" in out
    for text in ("softmax_kernel", "load_row", "reduce", "store_row", "overlap", "gbps"):
        assert text in out


def test_inspect_json(capsys):
    assert main(["profile", "inspect", str(FIX / "kern.hatchet"), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["kernels"][0]["launches"] == 3 and data["regions"] == []


def test_inspect_bad_file_exits_2_with_message(capsys, tmp_path):
    bad = tmp_path / "cut.hatchet"
    bad.write_text('[{"frame": ')
    assert main(["profile", "inspect", str(bad)]) == 2
    assert "truncated or not valid JSON" in capsys.readouterr().err
    assert main(["profile", "inspect", str(bad), str(FIX / "kern.hatchet"), "--keep-going"]) == 0
    assert "warning: trace file" in capsys.readouterr().out


def test_summarize(capsys):
    assert main(["profile", "summarize", str(FIX / "kern.hatchet")]) == 0
    assert "1.75 TB/s of 4.30 TB/s (41%)" in capsys.readouterr().out
