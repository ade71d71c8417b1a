"""benchmarks/lowering_gpu_worker.py: a warm-up that runs out of GPU memory beside the other workers is
tried again (holding the retry lock), and out of memory never counts as a context-breaking error; and
`lowering_gpu.py merge`, one table from several device calls."""
from __future__ import annotations

import threading

from benchmarks import lowering_gpu_worker as wk


def test_out_of_memory_is_not_fatal() -> None:
    assert not wk.fatal("draft first call: AcceleratorError: CUDA error: out of memory")
    assert wk.fatal("draft first call: AcceleratorError: CUDA error: an illegal memory access was encountered")
    assert wk.out_of_memory({"reason": "eager: OutOfMemoryError: CUDA out of memory. Tried to allocate 8 GiB"})
    assert wk.out_of_memory({"reason": "", "compile_reason": "torch.compile: CUDA out of memory"})
    assert not wk.out_of_memory({"reason": "output 0: 3 of 9 elements differ"})


def _answers(monkeypatch, rows: list[dict]) -> list[dict]:
    calls: list[dict] = []

    def fake(job: dict) -> dict:
        calls.append(job)
        return dict(rows[min(len(calls), len(rows)) - 1])
    monkeypatch.setattr(wk, "_measure", fake)
    monkeypatch.setattr(wk.time, "sleep", lambda s: None)
    return calls


def test_warm_up_out_of_memory_is_retried_under_the_lock(monkeypatch) -> None:
    oom = {"status": "error", "reason": "draft first call: CUDA error: out of memory"}
    calls = _answers(monkeypatch, [oom, oom, {"status": "passed", "reason": ""}])
    lock = threading.Lock()
    held = []
    monkeypatch.setattr(wk, "_RETRY_LOCK", lock)
    real = wk._measure

    def watching(job: dict) -> dict:
        held.append(lock.locked())
        return real(job)
    monkeypatch.setattr(wk, "_measure", watching)
    row = wk.measure({"warm_only": True, "oom_retries": 3})
    assert row["status"] == "passed" and row["oom_tries"] == 2 and len(calls) == 3
    assert held == [False, True, True]  # the first try runs beside the others, the retries one at a time


def test_retries_stop_at_the_limit_and_never_in_the_timed_phase(monkeypatch) -> None:
    oom = {"status": "error", "reason": "eager: CUDA out of memory"}
    calls = _answers(monkeypatch, [oom])
    assert wk.out_of_memory(wk.measure({"warm_only": True, "oom_retries": 2})) and len(calls) == 3
    calls.clear()
    assert wk.out_of_memory(wk.measure({"warm_only": False, "oom_retries": 2})) and len(calls) == 1


def test_merge_keeps_the_last_part_that_ran_each_problem(tmp_path) -> None:
    import csv
    import json

    from benchmarks import lowering_gpu as lg

    def part(name: str, rows: list[dict]) -> str:
        d = tmp_path / name
        d.mkdir()
        with (d / "lowering_gpu.csv").open("w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=lg.FIELDS)
            w.writeheader()
            for r in rows:
                w.writerow({k: r.get(k, "") for k in lg.FIELDS})
        (d / "provenance.json").write_text(json.dumps({"commit": name}))
        return str(d)

    timed = {"status": "passed", "correct": True, "eager_us": "10", "draft_us": "20", "speedup_vs_eager": "0.5",
             "tuned_draft_us": "5", "tuned_speedup_vs_eager": "2", "compile_us": "8"}
    a = part("a", [{"level": 1, "problem": "2_B", **timed}, {"level": 1, "problem": "10_C", "status": "not_run"},
                   {"level": 2, "problem": "1_D", "status": "incorrect", "correct": False}])
    b = part("b", [{"level": 1, "problem": "10_C", **timed}, {"level": 1, "problem": "2_B", "status": "not_run"}])
    assert lg.main(["merge", "--parts", f"{a},{b}", "--out", str(tmp_path / "m")]) == 0
    rows = list(csv.DictReader((tmp_path / "m" / "lowering_gpu.csv").open()))
    assert [(r["problem"], r["part"]) for r in rows] == [("2_B", "a"), ("10_C", "b"), ("1_D", "a")]
    s = json.loads((tmp_path / "m" / "summary.json").read_text())
    assert s["1"]["correct"] == 2 and s["1"]["geomean_vs_eager_tuned"] == 2.0
    assert s["1"]["fast_1_vs_compile_tuned"] == 1.0 and s["2"]["correct"] == 0
    assert set(json.loads((tmp_path / "m" / "provenance.json").read_text())["merged_from"]) == {"a", "b"}


class _Cancels:
    """sum(x) - sum(reversed x), scaled: 0 in exact arithmetic, order noise times 1e6 in fp32."""

    def __call__(self, x):  # noqa: ANN001, ANN204 - a tensor
        import torch

        return ((x.sum() - torch.flip(x, [0]).cumsum(0)[-1]) * 1e6).reshape(1)

    def double(self):  # noqa: ANN201 - the fp64 copy conditioning() makes
        return self


def test_an_ill_conditioned_reference_is_told_apart_from_a_wrong_draft() -> None:
    import torch

    torch.manual_seed(0)
    x = torch.randn(100_000)
    bad = _Cancels()
    want = [bad(x)]
    assert abs(float(want[0])) > 1e-2  # fp32 order noise, blown up
    row = wk.conditioning(bad, [x], want, [want[0] + 1.0])
    assert row["ill_conditioned"] is True and float(row["eager_fp64_err"]) > 1e-2

    lin = torch.nn.Linear(64, 8)
    xs = torch.randn(5, 64)
    with torch.no_grad():
        good = [lin(xs)]
        row = wk.conditioning(lin, [xs], good, [good[0] + 0.5])
    assert row["ill_conditioned"] is False
    assert float(row["eager_fp64_err"]) < 1e-5 and abs(float(row["draft_fp64_err"]) - 0.5) < 1e-3
    assert wk.conditioning(lin, [xs.long()], [torch.ones(2, dtype=torch.long)], [torch.zeros(2)]) == {}


def test_summary_of_a_call_without_the_tuner() -> None:
    """--tune 0 rows carry no tuned_draft_us at all (the H200's level-3 call of run 4 lost its summary to a
    KeyError there)."""
    from benchmarks import lowering_gpu as lg

    rows = [{"level": 3, "problem": "1_MLP", "status": "passed", "correct": True, "eager_us": 10.0,
             "compile_us": 8.0, "draft_us": 20.0, "speedup_vs_eager": "0.5", "speedup_vs_compile": "0.4"},
            {"level": 3, "problem": "2_X", "status": "incorrect", "correct": False}]
    s = lg.summarize(rows)["3"]
    assert s["correct"] == 1 and s["timed"] == 1 and s["geomean_vs_eager"] == 0.5
    assert s["tuned_rows"] == 0 and s["geomean_vs_eager_tuned"] is None and s["geomean_vs_compile_tuned"] is None
