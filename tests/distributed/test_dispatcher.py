"""Scheduling and re-queue logic of the distributed evaluator, against an in-process fake backend.

No Ray and no harness here (the end-to-end tests in test_ray_evaluator.py use both): the fake stands
for worker processes so that deaths, hangs and failed restarts can be staged exactly.
"""

from __future__ import annotations

import threading
import time
from concurrent.futures import wait
from typing import Any

import pytest

from workbench.distributed.dispatcher import BUSY, DEAD, IDLE, Dispatcher, Post, Slot
from workbench.evaluator import EvalJob
from workbench.result import EvalResult, Status


class FakeBackend:
    """Workers as timers. `die_on[job_id] = n`: the worker running that job dies the first n times."""

    def __init__(self, eval_s: float = 0.02, spawn_s: float = 0.01) -> None:
        self.eval_s = eval_s
        self.spawn_s = spawn_s
        self.die_on: dict[str, int] = {}
        self.hang_on: set[str] = set()
        self.spawn_fails = 0  # the next N spawns fail
        self.runs: list[tuple[str, str]] = []  # (slot name, job id) per launch
        self.kills: list[str] = []
        self.spawns: list[str] = []
        self.lock = threading.Lock()

    def _later(self, delay: float, fn: Any) -> None:
        t = threading.Timer(delay, fn)
        t.daemon = True
        t.start()

    def spawn(self, slot: Slot, post: Post) -> None:
        with self.lock:
            self.spawns.append(slot.name)
            fail = self.spawn_fails > 0
            self.spawn_fails -= 1 if fail else 0
        gen = slot.generation
        kind = "spawn_failed" if fail else "ready"
        self._later(self.spawn_s, lambda: post((kind, slot.name, gen, "boom" if fail else {"pid": 1})))

    def launch(self, slot: Slot, job: EvalJob, post: Post) -> None:
        gen = slot.generation
        with self.lock:
            self.runs.append((slot.name, job.job_id))
            die = self.die_on.get(job.job_id, 0) > 0
            if die:
                self.die_on[job.job_id] -= 1
        if job.job_id in self.hang_on:
            return  # never answers
        if die:
            self._later(self.eval_s / 2, lambda: post(("lost", slot.name, gen, "ActorDiedError: killed")))
            return
        res = EvalResult(status=Status.PASSED, fitness=1.0, correct=True, device=slot.platform)
        res.details["ran_on"] = slot.name
        self._later(self.eval_s, lambda: post(("done", slot.name, gen, (res, self.eval_s))))

    def kill(self, slot: Slot) -> None:
        with self.lock:
            self.kills.append(slot.name)


def _slots(*labels: str) -> list[Slot]:
    out = []
    for lb in labels:
        n = sum(1 for s in out if s.platform == lb)
        out.append(Slot(name=f"{lb}#{n}", platform=lb, state=IDLE))
    return out


def _jobs(n: int, platform: str | None = None, timeout_s: float = 30.0) -> list[EvalJob]:
    return [
        EvalJob(spec_path="s.py", candidate_source="x", platform=platform, timeout_s=timeout_s)
        for _ in range(n)
    ]


def test_every_job_gets_one_result_and_platforms_route():
    be = FakeBackend()
    d = Dispatcher(be, _slots("cpu", "cpu", "cuda:sm_90"))
    try:
        jobs = _jobs(6, "cpu") + _jobs(4, "cuda:sm_90") + _jobs(3)
        futs = [d.submit(j) for j in jobs]
        done, not_done = wait(futs, timeout=20)
        assert not not_done
        for j, f in zip(jobs, futs, strict=True):
            r = f.result()
            assert r.passed
            if j.platform:
                assert r.details["dispatch"]["platform"] == j.platform
                assert r.details["ran_on"].startswith(j.platform + "#")
        assert sorted(jid for _, jid in be.runs) == sorted(j.job_id for j in jobs)  # each ran exactly once
        assert d.stats["finished"] == len(jobs)
    finally:
        d.close()


def test_lost_worker_requeues_then_gives_infra_error():
    be = FakeBackend()
    d = Dispatcher(be, _slots("cpu", "cpu"), max_retries=2, max_worker_restarts=10)
    try:
        once, always, fine = _jobs(3)
        be.die_on[once.job_id] = 1  # dies once: re-queued, then passes
        be.die_on[always.job_id] = 99  # dies every time: INFRA_ERROR after 1 + max_retries attempts
        r_once, r_always, r_fine = (d.submit(j).result(timeout=20) for j in (once, always, fine))
        assert r_once.passed and r_once.details["dispatch"]["attempts"] == 2
        assert r_once.details["dispatch"]["losses"]
        assert r_always.status == Status.INFRA_ERROR and r_always.fitness == 0.0
        assert r_always.details["dispatch"]["attempts"] == 3
        assert "worker lost 3 times" in r_always.error and "ActorDiedError" in r_always.error
        assert r_fine.passed and r_fine.details["dispatch"]["attempts"] == 1
        assert sum(1 for _, jid in be.runs if jid == always.job_id) == 3
        assert d.stats["requeued"] == 3 and d.stats["worker_losses"] == 4
        assert be.kills.count("cpu#0") + be.kills.count("cpu#1") == 4  # every lost worker was stopped
    finally:
        d.close()


def test_stale_report_after_loss_is_not_counted():
    be = FakeBackend()
    d = Dispatcher(be, _slots("cpu"), max_retries=2)
    try:
        # A report from a worker generation already declared lost must be dropped.
        [job] = _jobs(1)
        fut = d.submit(job)
        assert fut.result(timeout=10).passed
        stale = EvalResult(status=Status.INCORRECT)
        d._post(("done", "cpu#0", -1, (stale, 0.0)))
        d._post(("lost", "cpu#0", -1, "old worker"))
        time.sleep(0.3)
        assert d.stats["stale_reports"] == 2 and d.stats["worker_losses"] == 0
        assert d.stats["finished"] == 1
    finally:
        d.close()


def test_hung_worker_is_killed_and_job_requeued():
    be = FakeBackend()
    d = Dispatcher(be, _slots("cpu"), max_retries=1, hang_grace_s=0.3, tick_s=0.05)
    try:
        [job] = _jobs(1, timeout_s=0.2)
        be.hang_on.add(job.job_id)
        t0 = time.monotonic()
        r = d.submit(job).result(timeout=10)
        assert r.status == Status.INFRA_ERROR and "presumed hung" in r.error
        assert time.monotonic() - t0 < 5
        assert len(be.kills) == 2
    finally:
        d.close()


def test_platform_with_no_live_worker_fails_fast_instead_of_hanging():
    be = FakeBackend()
    be.spawn_fails = 100  # replacements never come up
    d = Dispatcher(be, _slots("cpu", "cuda:sm_90"), max_retries=5, max_worker_restarts=2)
    try:
        a, b = _jobs(2, "cuda:sm_90")
        be.die_on[a.job_id] = 1  # kills the only sm_90 worker; its restarts all fail
        ra = d.submit(a).result(timeout=10)
        rb = d.submit(b).result(timeout=10)
        assert ra.status == Status.INFRA_ERROR and "no live worker for platform 'cuda:sm_90'" in ra.error
        assert rb.status == Status.INFRA_ERROR
        assert {s["name"]: s["state"] for s in d.slots()}["cuda:sm_90#0"] == DEAD
        assert d.platforms() == {"cpu": 1}
        [c] = _jobs(1, "cpu")
        assert d.submit(c).result(timeout=10).passed  # the other platform keeps working
    finally:
        d.close()


def test_worker_that_never_starts_is_retired():
    be = FakeBackend(spawn_s=60)  # "ready" would come far too late
    slots = [Slot(name="cpu#0", platform="cpu")]  # STARTING: the dispatcher spawns it
    d = Dispatcher(be, slots, start_timeout_s=0.2, max_worker_restarts=1, tick_s=0.05)
    try:
        r = d.submit(_jobs(1)[0]).result(timeout=10)
        assert r.status == Status.INFRA_ERROR and "no live worker" in r.error
        assert be.spawns == ["cpu#0", "cpu#0"]
    finally:
        d.close()


def test_close_resolves_everything_in_flight_and_queued():
    be = FakeBackend(eval_s=5.0)
    d = Dispatcher(be, _slots("cpu"))
    futs = [d.submit(j) for j in _jobs(3)]
    deadline = time.monotonic() + 5
    while not d.in_flight() and time.monotonic() < deadline:
        time.sleep(0.02)
    assert d.in_flight() == {"cpu#0": 1} and d.in_flight_by_platform() == {"cpu": 1}
    d.close()
    results = [f.result(timeout=5) for f in futs]
    assert [r.status for r in results] == [Status.INFRA_ERROR] * 3
    assert "closed during" in results[0].error and "closed before" in results[2].error
    with pytest.raises(RuntimeError, match="closed"):
        d.submit(_jobs(1)[0])


def test_in_flight_counts_busy_workers_per_slot():
    be = FakeBackend(eval_s=0.5)
    d = Dispatcher(be, _slots("cpu", "cpu", "cuda:sm_80"))
    try:
        futs = [d.submit(j) for j in _jobs(2, "cpu") + _jobs(1, "cuda:sm_80")]
        deadline = time.monotonic() + 5
        while len(d.in_flight()) < 3 and time.monotonic() < deadline:
            time.sleep(0.02)
        assert d.in_flight() == {"cpu#0": 1, "cpu#1": 1, "cuda:sm_80#0": 1}
        assert d.in_flight_by_platform() == {"cpu": 2, "cuda:sm_80": 1}
        assert all(s["state"] == BUSY for s in d.slots())
        wait(futs, timeout=10)
        assert d.in_flight() == {}
    finally:
        d.close()
