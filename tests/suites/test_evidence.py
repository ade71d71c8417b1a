"""The report's evidence beside the verdict: the share of the GPU's ceilings each correct kernel reaches, and
the fp64 referee's count of mismatches as close to the exact result as eager's own output."""
from __future__ import annotations

import pytest

from workbench.suites.evidence import as_good_as_eager, ceiling_share, level_evidence

# 2.15 GB moved in 1 ms is 2150 GB/s: half the H200's measured copy bandwidth (platforms.ceilings)
MEMORY_BOUND = {"flops": 1e6, "bytes": 2.15e9, "dtype": "float32"}


def _rec(**kw):
    return {"problem_id": kw.pop("pid", "p"), "level": kw.pop("level", "1"), "correct": True, "runtime_us": 1000.0,
            "work": MEMORY_BOUND, **kw}


def test_a_memory_bound_kernel_gets_its_share_of_the_copy_bandwidth():
    got = ceiling_share(_rec(), "sm_90")
    assert got["bound"] == "memory" and got["share"] == pytest.approx(0.5) and got["gbs"] == pytest.approx(2150)
    assert got["arch"] == "sm_90"


def test_a_gemm_is_held_against_the_fp32_fma_peak_unless_tf32():
    work = {"flops": 2 * 4096**3, "bytes": 3 * 4096 * 4096 * 4, "dtype": "float32"}
    ieee = ceiling_share(_rec(work=work, runtime_us=4000.0), "sm_90")
    tf32 = ceiling_share(_rec(work=work, runtime_us=4000.0), "sm_90", tf32=True)
    assert ieee["bound"] == "compute" and ieee["share"] == pytest.approx(2 * 4096**3 / 4e-3 / 1e12 / 67.0)
    assert tf32["share"] < ieee["share"]


@pytest.mark.parametrize("change", [{"correct": False}, {"work": None}, {"runtime_us": None}, {"runtime_us": 0.0},
                                    {"work": {"flops": 1.0}}])
def test_no_share_without_a_correct_timed_kernel_and_its_work(change):
    assert ceiling_share(_rec(**change), "sm_90") is None


def test_no_share_on_an_architecture_without_ceilings():
    assert ceiling_share(_rec(), None) is None and ceiling_share(_rec(), "x86_64") is None


def test_the_referee_counts_mismatches_as_close_to_fp64_as_eager_apart_from_correct():
    recs = [_rec(pid="a"),
            _rec(pid="b", correct=False, referee={"eager_fp64_err": 3.0e-4, "candidate_fp64_err": 2.8e-4,
                                                  "as_good_as_eager": True}),
            _rec(pid="c", correct=False, referee={"eager_fp64_err": 1e-6, "candidate_fp64_err": 0.5,
                                                  "as_good_as_eager": False}),
            _rec(pid="d", correct=False, referee={"error": "RuntimeError: no fp64 kernel"}),
            # a correct record never counts as a mismatch, whatever a stale referee entry says
            _rec(pid="e", referee={"as_good_as_eager": True})]
    assert [as_good_as_eager(r) for r in recs] == [False, True, False, False, False]
    for r in recs:
        r["ceiling"] = ceiling_share(r, "sm_90")
    ev = level_evidence(recs)
    assert ev["matches_fp64_as_eager"] == 1 and ev["refereed"] == 3
    assert ev["median_ceiling_share"] == pytest.approx(0.5)


def test_the_report_leads_with_the_referee_count_and_shows_shares(tmp_path):
    from workbench.suites.report import build_report, markdown
    from workbench.suites.runner import STORE_NAME
    from workbench.suites.store import ProblemRow, SuiteStore

    recs = {"1_A": _rec(pid="1_A", speedup=2.0, evaluations=3, kernels=3.0),
            "2_B": _rec(pid="2_B", correct=False, evaluations=3, verdict="incorrect", diagnosis="output mismatch",
                        referee={"eager_fp64_err": 3.0e-4, "candidate_fp64_err": 2.8e-4, "as_good_as_eager": True})}
    with SuiteStore(tmp_path / STORE_NAME) as store:
        store.add_problems([ProblemRow(pid, i, "1", pid, f"/x/{pid}.py") for i, pid in enumerate(recs)])
        store.set_meta("config", {"suite": "kernelbench", "search": {"device": "cuda"}})
        store.set_meta("provenance", {"sm": "sm_90", "gpu": "NVIDIA H200"})
        for pid, rec in recs.items():
            store.finish(pid, "done", rec)
        report = build_report(tmp_path, store)
    assert report["headline"] == ("2 of 2 problems reached the harness, 1 correct "
                                  "(1 more match fp64 as well as eager does)")
    assert report["levels"]["1"]["matches_fp64_as_eager"] == 1 and report["levels"]["all"]["refereed"] == 1
    assert report["problems"][0]["ceiling"]["share"] == pytest.approx(0.5)
    md = markdown(report)
    assert "| 1_A | done | None | 2 | - | 1000.0 | - | 3 | 50% memory |" in md and "0.0003 / 0.00028" in md
    # the same run on the CPU: no ceiling meets an interpreter's times
    with SuiteStore(tmp_path / STORE_NAME) as store:
        store.set_meta("config", {"suite": "kernelbench", "search": {"device": "cpu"}})
        assert build_report(tmp_path, store)["problems"][0]["ceiling"] is None
