"""A local evaluator serves the lowest `order` first (the suite: the oldest problem), ties in submission order."""

import threading

import pytest

import workbench.harness
from workbench.evaluator import EvalJob, InOrder, LocalPoolEvaluator
from workbench.result import EvalResult, Status


class _FakeHarness:
    """Records the jobs it ran; the first one waits for `release` so the rest queue up behind it."""

    ran: list[str] = []
    release = threading.Event()

    def __init__(self, device: str = "auto") -> None:
        pass

    def evaluate_job(self, job: EvalJob) -> EvalResult:
        if not _FakeHarness.ran:
            _FakeHarness.ran.append(job.job_id)
            assert _FakeHarness.release.wait(30)
        else:
            _FakeHarness.ran.append(job.job_id)
        return EvalResult(status=Status.PASSED)

    def close(self) -> None:
        pass


@pytest.fixture
def pool(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(workbench.harness, "Harness", _FakeHarness)
    _FakeHarness.ran, _FakeHarness.release = [], threading.Event()
    ev = LocalPoolEvaluator(workers=1, device="cpu")
    yield ev
    ev.close()


def _job(name: str, order: float = 0.0) -> EvalJob:
    return EvalJob(spec_path="spec.py", candidate_source="", job_id=name, order=order)


def test_waiting_jobs_run_lowest_order_first_then_in_submission_order(pool: LocalPoolEvaluator) -> None:
    first = pool.submit(_job("busy", 9.0))
    while not _FakeHarness.ran:  # the worker holds the first job: the rest wait in the queue
        threading.Event().wait(0.01)
    futs = [pool.submit(_job(name, order)) for name, order in
            (("c", 3.0), ("a1", 1.0), ("b", 2.0), ("a2", 1.0), ("d", 5.0))]
    _FakeHarness.release.set()
    for f in [first, *futs]:
        assert f.result(timeout=30).status is Status.PASSED
    assert _FakeHarness.ran == ["busy", "a1", "a2", "b", "c", "d"]


def test_in_order_stamps_its_order_and_leaves_the_shared_pool_open(pool: LocalPoolEvaluator) -> None:
    _FakeHarness.release.set()
    old, new = InOrder(pool, 1.0), InOrder(pool, 2.0)
    assert old.capacity == pool.capacity == 1
    assert new.submit(_job("n")).result(timeout=30).status is Status.PASSED
    assert old.submit(_job("o")).result(timeout=30).status is Status.PASSED
    old.close()  # the search's close: the suite's pool serves the next problem
    assert pool.submit(_job("after")).result(timeout=30).status is Status.PASSED
    assert _FakeHarness.ran == ["n", "o", "after"]
