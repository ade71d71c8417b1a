"""Query API on the real corpus (hashing embedder): ordering, tag filters, budget, bad input,
and queries built from evaluation results."""

from __future__ import annotations

import pytest

from retrieval import TagError, diagnosis_query
from retrieval.retriever import estimate_tokens
from retrieval.tags import LEVELS
from workbench.result import EvalResult, Status

# A real message of the Triton 3.6 compiler front end (benchmarks/retrieval_trigger_errors.py).
COMPILE_ERROR = """Traceback (most recent call last):
  File "candidate.py", line 40, in forward
triton.compiler.errors.CompilationError: at 3:4:
def k_loopcarry(x, n):
    acc = 0
    for i in range(n):
    ^
AssertionError('Loop-carried variable acc has initial type int32 but is re-assigned to fp32 in loop! Please make sure that the type stays consistent.')"""  # noqa: E501


def test_retrieve_orders_levels_and_respects_budget(real_hashing):
    res = real_hashing.retrieve(
        "GEMM slow on H100: tensor descriptors, wgmma, shared memory and stages",
        platform="cuda",
        arch="sm_90",
        budget_tokens=1200,
    )
    levels = [h.level for h in res.hits]
    assert levels == sorted(levels, key=LEVELS.index)
    assert "architecture" in levels
    assert 0 < res.tokens <= 1200 and estimate_tokens(res.text) == res.tokens
    assert len({h.section_id for h in res.hits}) == len(res.hits)
    for h in res.hits:
        assert h.tags["platform"] in ("any", "cuda")
        assert "any" in h.tags["arch"] or "sm_90" in h.tags["arch"]
        assert h.title in res.text


@pytest.mark.parametrize("budget", [60, 300])
def test_small_budget_still_returns_the_best_hit(real_hashing, budget):
    res = real_hashing.retrieve("out of resource: shared memory", platform="cuda", arch="sm_80", budget_tokens=budget)
    assert res.hits and res.tokens <= budget + 2
    assert res.hits[0].section_id in ("err-out-of-resources", "cuda-warps-stages", "ampere-pipelining")


def test_platform_filter_excludes_other_vendors(real_hashing):
    for h in real_hashing.query("LDS wavefront waves_per_eu MFMA matrix cores", 15, platform="cuda", arch="sm_90"):
        assert h.tags["platform"] != "rocm"
    amd = real_hashing.query("LDS wavefront waves_per_eu MFMA matrix cores", 3, platform="rocm", arch="gfx942")
    assert {h.section_id for h in amd} & {"cdna3-waves-per-eu", "cdna3-matrix-cores", "rocm-wavefront-64"}
    cpu = real_hashing.query("illegal memory access shared memory", 20, platform="cpu", arch="cpu")
    assert all(h.tags["platform"] in ("any", "cpu-interpreter") for h in cpu)


def test_bad_input_gives_clear_errors(real_hashing):
    with pytest.raises(ValueError, match="empty query"):
        real_hashing.query("   ")
    with pytest.raises(TagError, match="unknown platform 'tpu'"):
        real_hashing.retrieve("x", platform="tpu", arch="v5")
    with pytest.raises(ValueError, match="unknown level"):
        real_hashing.query("x", level="expert")
    with pytest.raises(ValueError, match="budget_tokens"):
        real_hashing.retrieve("x", platform="cuda", arch="sm_90", budget_tokens=0)


def test_diagnosis_from_compile_error_finds_the_fix(real_hashing):
    res = EvalResult(status=Status.COMPILE_ERROR, error=COMPILE_ERROR)
    q = diagnosis_query(res)
    assert q.startswith("status compile_error") and "Loop-carried variable acc" in q
    hits = real_hashing.query(q, 3, platform="cuda", arch="sm_90")
    assert "err-loop-carried-type" in [h.section_id for h in hits]
    assert diagnosis_query(res.to_dict()) == q  # dicts work as well as records


def test_diagnosis_of_slow_and_incorrect_results():
    slow = EvalResult(status=Status.PASSED, correct=True, speedup=0.42, fitness=0.42)
    assert "slower than the baseline (speedup 0.42x)" in diagnosis_query(slow, "memory bound, 310 GB/s")
    assert "profile: memory bound" in diagnosis_query(slow, "memory bound, 310 GB/s")
    bad = EvalResult(status=Status.INCORRECT, max_abs_err=0.5, max_rel_err=2.0, details={"first_mismatch": "index 123"})
    q = diagnosis_query(bad)
    assert "numerical mismatch" in q and "first mismatch: index 123" in q
    rej = EvalResult(status=Status.REJECTED, violations=["forbidden_torch_op:mm"])
    assert "violations: forbidden_torch_op:mm" in diagnosis_query(rej)


def test_query_vectors_are_cached_and_dropped_on_reindex(project):
    from tests.retrieval.conftest import make_retriever

    r = make_retriever(project)
    calls = []
    embed = r.embedder.embed
    r.embedder.embed = lambda texts: (calls.append(list(texts)), embed(texts))[1]
    r.query("tensor memory accelerator", 1)
    r.query("tensor memory accelerator", 1)
    assert calls.count(["tensor memory accelerator"]) == 1
    (project / "corpus" / "more.md").write_text(
        "## New\n<!-- id: t-new | level: general | platform: any | arch: any | topic: x -->\nnew text\n"
    )
    r.query("tensor memory accelerator", 1)  # corpus changed: re-indexed, IDF refitted, query re-embedded
    assert calls.count(["tensor memory accelerator"]) == 2


def test_code_sample_comes_whole_when_it_fits(project):
    from tests.retrieval.conftest import make_retriever

    r = make_retriever(project)
    q = "vector add kernel with a masked tail: add_kernel tl.load tl.store mask offs"
    res = r.retrieve(q, platform="cuda", arch="sm_90", budget_tokens=1200)
    code = [h for h in res.hits if h.level == "code_sample"]
    assert code and "TUNABLES" in code[0].text and "def add_kernel" in code[0].text
    small = r.retrieve(q, platform="cuda", arch="sm_90", budget_tokens=120)
    assert small.tokens <= 122
