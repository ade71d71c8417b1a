"""End to end on a local Ray cluster with the real harness (CPU, Triton interpreter).

One cluster and one evaluator for the whole module: on the 2-core CI machine a Ray cluster takes
~30 s to start and each worker ~10 s to import torch and warm its harness.
"""

from __future__ import annotations

import os
import re
import signal
import socket
import threading
import time
from pathlib import Path

import pytest

ray = pytest.importorskip("ray")

from workbench.distributed import ray_backend  # noqa: E402
from workbench.distributed.errors import (  # noqa: E402
    ClusterUnreachable,
    PlatformUnavailable,
    WorkerVersionMismatch,
)
from workbench.distributed.ray_backend import RayEvaluator, start_local_cluster  # noqa: E402
from workbench.evaluator import EvalJob, LocalPoolEvaluator  # noqa: E402
from workbench.result import Status  # noqa: E402

pytestmark = pytest.mark.server

ROOT = Path(__file__).resolve().parents[2]
SPEC = str(ROOT / "examples" / "vector_add" / "spec.py")
GOOD = (ROOT / "examples" / "vector_add" / "candidate.py").read_text()
CANDIDATES = {
    "good": GOOD,
    "wrong": GOOD.replace("a + b * scale", "a - b * scale"),  # runs, wrong numbers
    "broken": GOOD.replace("tl.arange(0, BLOCK_SIZE)", "tl.arange(0, BLOCK_SIZE, 3)"),  # fails to trace
}
# A second platform on the same CPU node: an operator-chosen label (e.g. "h200" next to "h100").
OTHER = "interp-b"


def _job(name: str, platform: str | None = None) -> EvalJob:
    return EvalJob(
        spec_path=SPEC,
        candidate_source=CANDIDATES[name],
        device="cpu",
        trials=1,
        timeout_s=120,
        platform=platform,
    )


def _comparable(r) -> dict:
    """What must not depend on where a candidate ran (timings do)."""
    return {
        "status": r.status,
        "correct": r.correct,
        "violations": r.violations,
        "shapes": r.shapes,
        # an incorrect candidate's error size is not reproducible run to run (measured 3.75 vs 3.96 for
        # `wrong` in two runs on this machine; cause not pinned down), only that it is wrong
        "max_abs_err": r.max_abs_err if r.passed else (r.max_abs_err or 0) > 0,
        "fitness>0": r.fitness > 0,
        # the count of differing elements depends on the evaluation's fresh inputs (CI: 4097 vs 4099 of
        # 4099 for `wrong`, where b * scale is within tolerance of 0), the message's shape does not
        "error_head": re.sub(r"\d+ of (\d+) elements", r"N of \1 elements",
                             (r.error.strip().splitlines() or [""])[0][:80]),
    }


@pytest.fixture(scope="module")
def evaluator():
    addr = os.environ.get("RAY_ADDRESS")
    if addr:
        # A cluster started beforehand (`ray start --head --num-cpus=5
        # --resources='{"platform:cpu": 3, "platform:interp-b": 1}'`): on a loaded machine Ray's own
        # start-up can miss its agent's 15 s window, a cluster started once avoids paying that per run.
        ray.init(address=addr, log_to_driver=False)
    else:
        # 5 logical CPUs on 2 cores: the evaluator (2 cpu + 1 interp-b), one more cpu worker for the
        # version test, and room for a replacement while a killed worker is released.
        start_local_cluster(
            num_cpus=5,
            resources={"platform:cpu": 3, f"platform:{OTHER}": 1},
            include_dashboard=False,
            log_to_driver=False,
        )
    ev = None
    try:
        ev = RayEvaluator(workers=3, device="cpu", platforms=["cpu", OTHER], start_timeout_s=240)
        yield ev
    finally:
        if ev is not None:
            ev.close()
        ray.shutdown()


def test_same_records_as_the_local_pool(evaluator):
    names = list(CANDIDATES)
    with LocalPoolEvaluator(workers=1, device="cpu") as pool:
        local = [pool.submit(_job(n)).result(timeout=300) for n in names]
    remote = [f.result(timeout=300) for f in [evaluator.submit(_job(n)) for n in names]]
    assert local[0].status == Status.PASSED and local[1].status == Status.INCORRECT
    assert local[2].status in (Status.COMPILE_ERROR, Status.RUNTIME_ERROR), local[2].summary()
    for n, a, b in zip(names, local, remote, strict=True):
        assert _comparable(a) == _comparable(b), n
        assert b.details["dispatch"]["attempts"] == 1
        assert b.details["dispatch"]["overhead_s"] >= 0


def test_jobs_run_on_the_platform_they_target(evaluator):
    assert evaluator.platforms() == {"cpu": 2, OTHER: 1}
    jobs = [_job("good", OTHER), _job("good", "cpu"), _job("good", OTHER), _job("good")]
    futs = [evaluator.submit(j) for j in jobs]
    seen: dict[str, int] = {}
    deadline = time.monotonic() + 120
    while not all(f.done() for f in futs) and time.monotonic() < deadline:
        for k, v in evaluator.in_flight().items():
            seen[k] = max(seen.get(k, 0), v)
        time.sleep(0.05)
    results = [f.result(timeout=60) for f in futs]
    for j, r in zip(jobs, results, strict=True):
        assert r.passed, r.summary()
        if j.platform:
            assert r.details["dispatch"]["platform"] == j.platform
            assert r.details["dispatch"]["worker"].startswith(j.platform + "#")
    assert seen and all(k.split("#")[0] in ("cpu", OTHER) for k in seen)  # per-worker keys, platform prefix
    with pytest.raises(PlatformUnavailable, match="cuda:sm_90"):
        evaluator.submit(_job("good", "cuda:sm_90"))


def test_a_killed_worker_loses_no_job_and_counts_none_twice(evaluator):
    jobs = [_job("good") for _ in range(6)]
    calls: dict[str, int] = {j.job_id: 0 for j in jobs}
    lock = threading.Lock()

    def count(job_id):
        def cb(_f):
            with lock:
                calls[job_id] += 1

        return cb

    futs = []
    for j in jobs:
        f = evaluator.submit(j)
        f.add_done_callback(count(j.job_id))
        futs.append(f)
    victim = None
    deadline = time.monotonic() + 120
    while victim is None and time.monotonic() < deadline:
        busy = [w for w in evaluator.workers() if w["state"] == "busy" and w["platform"] == "cpu"]
        if busy:
            victim = busy[0]
        time.sleep(0.05)
    assert victim is not None, "no worker became busy"
    time.sleep(0.5)  # mid-evaluation, not at dispatch
    os.kill(victim["info"]["pid"], signal.SIGKILL)
    results = [f.result(timeout=400) for f in futs]
    assert all(n == 1 for n in calls.values()), calls  # exactly one result per job
    assert all(r.passed for r in results), [r.summary() for r in results]
    attempts = [r.details["dispatch"]["attempts"] for r in results]
    assert max(attempts) == 2 and attempts.count(2) == 1  # the victim's job, re-run once
    lost = next(r for r in results if r.details["dispatch"]["attempts"] == 2)
    assert victim["name"] in lost.details["dispatch"]["losses"][0]
    assert evaluator.stats["worker_losses"] == 1 and evaluator.stats["requeued"] == 1
    # the replacement worker (a fresh actor importing torch, warming a harness) comes back into service
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        state = {w["name"]: (w["state"], w["restarts"]) for w in evaluator.workers()}[victim["name"]]
        if state[0] != "starting":
            break
        time.sleep(0.2)
    assert state == ("idle", 1)
    assert evaluator.submit(_job("good", "cpu")).result(timeout=300).passed


def test_missing_platform_is_refused_before_any_worker_starts(evaluator):
    t0 = time.monotonic()
    with pytest.raises(PlatformUnavailable, match=r"cuda:sm_90.*advertises"):
        RayEvaluator(workers=1, device="cpu", platforms=["cuda:sm_90"])
    assert time.monotonic() - t0 < 5


def test_unreachable_address_is_refused_fast(evaluator):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    t0 = time.monotonic()
    with pytest.raises(ClusterUnreachable, match=f"127.0.0.1:{port}"):
        RayEvaluator(workers=1, device="cpu", address=f"127.0.0.1:{port}", probe_timeout_s=2)
    assert time.monotonic() - t0 < 5


def test_worker_with_another_triton_is_refused(evaluator, monkeypatch):
    import torch

    monkeypatch.setattr(
        ray_backend, "_driver_versions", lambda: {"triton": "0.0.0-driver", "torch": torch.__version__}
    )
    with pytest.raises(WorkerVersionMismatch, match=r"triton 0.0.0-driver.*triton 3\."):
        RayEvaluator(workers=1, device="cpu", platforms=["cpu"], start_timeout_s=120)
