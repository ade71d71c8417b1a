"""benchmarks/lowering_gpu_worker.py: a warm-up that runs out of GPU memory beside the other workers is
tried again (holding the retry lock), and out of memory never counts as a context-breaking error."""
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
