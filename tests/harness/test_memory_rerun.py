"""The out-of-memory re-run is decided from what the trusted server saw, never from the words of a report.

A job whose error says "out of memory" runs once more alone on the GPU only when another process held the
device's memory lock while it ran (`server.MemoryNeighbours`, read from the kernel's lock table by the
server). The candidate's own report can carry those words: one that ran alone and claims them gets no second
draw. CPU-runnable: the memory lock is a real `flock` under `WB_CLOCK_DIR` for device "cuda", and the job is a
fake `run_job` (the server's other steps are not what is tested here).
"""
from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
import types
from pathlib import Path

import pytest

from platforms.clock import device_memory, memory_lock_path
from workbench.harness.server import MemoryNeighbours, Server, flock_holders
from workbench.harness.trusted_messages import EvalRequest, JobResult

REPO = Path(__file__).resolve().parents[2]
CLAIM = "the candidate process said: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB"

HOLD = """
import sys
from platforms.clock import device_memory
with device_memory("cuda"):
    print("held", flush=True)
    sys.stdin.readline()
"""


@pytest.fixture
def lock_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("WB_CLOCK_DIR", str(tmp_path))
    return tmp_path


class _Neighbour:
    """Another process holding the device's memory lock shared (another evaluation, a compile baseline)."""

    def __init__(self) -> None:
        env = {**os.environ, "PYTHONPATH": str(REPO)}
        self.proc = subprocess.Popen([sys.executable, "-c", HOLD], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     text=True, env=env)
        assert self.proc.stdout.readline().strip() == "held"

    def leave(self) -> None:
        self.proc.stdin.close()
        assert self.proc.wait(timeout=60) == 0


def _server(first: JobResult, during=None) -> types.SimpleNamespace:
    """A server whose `run_job` returns `first`, then a pass (a second draw), counting its runs."""
    srv = types.SimpleNamespace(device="cuda", runs=[], ensure_spares=lambda: None, needs_the_gpu_alone=set())

    def run_job(job: EvalRequest) -> JobResult:
        srv.runs.append(time.monotonic())
        if len(srv.runs) == 1:
            if during is not None:
                during()
            return first
        return JobResult(status="passed", trials=job.trials)

    srv.run_job = run_job
    return srv


def _claims_oom() -> JobResult:
    return JobResult(status="runtime_error", error=CLAIM, trials=1)


def test_a_candidate_that_claims_out_of_memory_while_it_ran_alone_gets_no_second_draw(lock_dir: Path) -> None:
    srv = _server(_claims_oom())
    res = Server.run_job_on_device(srv, EvalRequest(trials=1))
    assert len(srv.runs) == 1, "a second draw on the candidate's own words"
    assert res.status == "runtime_error" and res.reran_alone is None


def test_a_job_out_of_memory_beside_another_holder_runs_again_alone(lock_dir: Path) -> None:
    neighbour = _Neighbour()  # holds device memory when the job starts; leaves during it
    srv = _server(_claims_oom(), during=neighbour.leave)
    try:
        res = Server.run_job_on_device(srv, EvalRequest(trials=1))
    finally:
        if neighbour.proc.poll() is None:
            neighbour.leave()
    assert len(srv.runs) == 2 and res.status == "passed" and res.reran_alone == CLAIM[:300], res


def test_a_holder_that_comes_and_goes_during_the_job_is_seen(lock_dir: Path) -> None:
    def come_and_go() -> None:
        neighbour = _Neighbour()
        time.sleep(0.6)  # a few of the watch's looks
        neighbour.leave()

    srv = _server(_claims_oom(), during=come_and_go)
    res = Server.run_job_on_device(srv, EvalRequest(trials=1))
    assert len(srv.runs) == 2 and res.reran_alone, res


def test_only_a_failure_out_of_memory_runs_again(lock_dir: Path) -> None:
    neighbour = _Neighbour()
    try:
        for first in (JobResult(status="incorrect", error="output mismatch", trials=1),
                      JobResult(status="passed", trials=1)):
            srv = _server(first)
            assert Server.run_job_on_device(srv, EvalRequest(trials=1)).reran_alone is None
            assert len(srv.runs) == 1
    finally:
        neighbour.leave()


def test_the_lock_table_shows_this_process_and_another(lock_dir: Path) -> None:
    with device_memory("cuda"):
        ino = os.stat(memory_lock_path("cuda")).st_ino
        assert flock_holders(ino) == [os.getpid()]
        with MemoryNeighbours(memory_lock_path("cuda")) as alone:
            pass
        assert alone.readable and not alone.seen
        neighbour = _Neighbour()
        try:
            assert sorted(flock_holders(ino)) == sorted([os.getpid(), neighbour.proc.pid])
            with MemoryNeighbours(memory_lock_path("cuda")) as beside:
                pass
            assert beside.seen
        finally:
            neighbour.leave()
    with MemoryNeighbours(lock_dir / "no-such.memory") as nothing:  # no lock file: nothing is seen
        pass
    assert not nothing.readable and not nothing.seen


def test_a_problem_that_ran_out_beside_another_runs_alone_from_then_on(lock_dir: Path) -> None:
    neighbour = _Neighbour()
    srv = _server(_claims_oom(), during=neighbour.leave)
    try:
        Server.run_job_on_device(srv, EvalRequest(spec_path="/specs/big.py", trials=1))
    finally:
        if neighbour.proc.poll() is None:
            neighbour.leave()
    assert len(srv.runs) == 2
    # the next job of the same problem holds the lock exclusive at once: one run, never a failing shared one
    neighbour = _Neighbour()
    try:
        srv.runs.clear()
        srv.runs.append(0.0)  # the fake's first run fails: this job is its second, which passes
        t0 = time.monotonic()
        threading.Timer(0.5, neighbour.leave).start()  # the exclusive lock waits for the other holder
        res = Server.run_job_on_device(srv, EvalRequest(spec_path="/specs/big.py", trials=1))
        assert time.monotonic() - t0 >= 0.4 and len(srv.runs) == 2 and res.status == "passed"
        assert res.timings_s["memory_exclusive"] == 1.0 and res.reran_alone is None
    finally:
        if neighbour.proc.poll() is None:
            neighbour.leave()
    # another problem (or size) still shares the GPU
    res = Server.run_job_on_device(srv, EvalRequest(spec_path="/specs/small.py", trials=1))
    assert "memory_exclusive" not in res.timings_s


def test_the_other_servers_of_the_device_learn_it_from_one_book(lock_dir: Path) -> None:
    # two harness servers share a run's problems: the one that saw the problem run out tells the other, so
    # the problem fails beside another job once per device, not once per server
    neighbour = _Neighbour()
    first = _server(_claims_oom(), during=neighbour.leave)
    try:
        Server.run_job_on_device(first, EvalRequest(spec_path="/specs/big.py", overrides={"n": 3}, trials=1))
    finally:
        if neighbour.proc.poll() is None:
            neighbour.leave()
    assert len(first.runs) == 2
    other = _server(JobResult(status="passed", trials=1))  # its own memory is empty
    res = Server.run_job_on_device(other, EvalRequest(spec_path="/specs/big.py", overrides={"n": 3}, trials=1))
    assert len(other.runs) == 1 and res.timings_s["memory_exclusive"] == 1.0
    # the same problem at another size is another entry
    res = Server.run_job_on_device(other, EvalRequest(spec_path="/specs/big.py", overrides={"n": 4}, trials=1))
    assert "memory_exclusive" not in res.timings_s
    book = (lock_dir / memory_lock_path("cuda").name).with_suffix(".alone").read_text()
    assert len(book.split()) == 1 and "big.py" not in book  # hashed keys, one line each
