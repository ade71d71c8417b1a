"""fast_p and the geometric-mean speedup on hand-made records (KernelBench's definitions)."""
import math

import pytest

from workbench.suites.scoring import by_level, excessive, fast_p, geomean_speedup, summarize


def rec(pid, level, correct, speedup, compile_speedup=None, status="done"):
    return {"problem_id": pid, "level": level, "correct": correct, "speedup": speedup if correct else 0.0,
            "speedup_vs_compile": compile_speedup, "status": status}


RECORDS = [
    rec("a", "1", True, 0.5),
    rec("b", "1", True, 1.0),      # exactly 1.0 is not > 1.0
    rec("c", "1", True, 1.6),
    rec("d", "1", True, 12.0),     # above 10x: flagged
    rec("e", "1", False, 3.0),     # incorrect: never fast, whatever its time
    rec("f", "1", False, 0.0, status="failed"),
    rec("g", "2", True, 2.5),
    rec("h", "2", False, 0.0, status="pending"),
]


def test_fast_p_counts_correct_and_faster_over_all_problems():
    lvl1 = [r for r in RECORDS if r["level"] == "1"]
    assert fast_p(lvl1, 0.0) == pytest.approx(4 / 6)
    assert fast_p(lvl1, 1.0) == pytest.approx(2 / 6)
    assert fast_p(lvl1, 1.5) == pytest.approx(2 / 6)
    assert fast_p(lvl1, 2.0) == pytest.approx(1 / 6)
    assert fast_p([], 1.0) is None


def test_geomean_over_correct_problems_only():
    lvl1 = [r for r in RECORDS if r["level"] == "1"]
    assert geomean_speedup(lvl1) == pytest.approx(math.exp((math.log(0.5) + math.log(1.6) + math.log(12.0)) / 4))
    assert geomean_speedup([rec("x", "1", False, 0.0)]) is None


def test_levels_and_flags():
    out = by_level(RECORDS)
    assert list(out) == ["1", "2", "all"]
    assert out["2"]["fast_p"] == {"0": 0.5, "1": 0.5, "1.5": 0.5, "2": 0.5}
    assert out["2"]["unfinished"] == 1 and out["1"]["failed"] == 1 and out["1"]["done"] == 5
    assert out["all"]["n"] == 8 and out["all"]["correct"] == 5
    assert out["all"]["excessive_speedup"] == ["d"] == excessive(RECORDS)
    assert out["1"]["fast_p_vs_compile"] is None  # no compile baseline measured: no numbers made up


def test_fast_p_against_compile_uses_its_own_speedup():
    recs = [rec("a", "1", True, 3.0, compile_speedup=0.9), rec("b", "1", True, 3.0, compile_speedup=None),
            rec("c", "1", True, 1.2, compile_speedup=1.1)]
    s = summarize(recs)
    assert s["fast_p"]["1"] == 1.0
    assert s["fast_p_vs_compile"]["0"] == pytest.approx(2 / 3)  # b has no compile time: not counted fast
    assert s["fast_p_vs_compile"]["1"] == pytest.approx(1 / 3)
    assert s["geomean_speedup_vs_compile"] == pytest.approx(math.sqrt(0.9 * 1.1))
