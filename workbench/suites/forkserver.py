"""A small pre-warmed fork server for the suite's own per-problem work (preparation, compile baselines).

Problem files are the user's code and may hang or crash the interpreter, so each job runs in a child
forked from a server process that has torch imported already (a fork costs milliseconds; importing
torch costs seconds on a busy CPU). The server kills a child that overruns its limit and answers
with the reason. Protocol: one JSON job per line on stdin, one JSON answer per line on a private copy
of stdout; fd 1 of the server and of every child points at stderr, so nothing a spec prints can
desynchronize the answers. Jobs name a function of `JOBS`: nothing is unpickled.
"""
from __future__ import annotations

import json
import logging
import os
import select
import signal
import sys
import time
import traceback
from typing import Any

from workbench.worker import WarmWorker, WorkerLost

log = logging.getLogger(__name__)

JOBS = {
    "prepare": ("workbench.suites.prepare", "prepare_problem"),
    "compile_baseline": ("workbench.suites.baselines", "time_eager_and_compile"),
}


class ForkServer:
    """Client side: one server process (`workbench.worker.WarmWorker`); `call` is thread-safe (one job at a
    time per server)."""

    def __init__(self, env: dict[str, str] | None = None, startup_timeout_s: float = 300.0) -> None:
        self._worker = WarmWorker("workbench.suites.forkserver", env=env, startup_timeout_s=startup_timeout_s,
                                  name="suite's fork server")

    def call(self, job: str, kwargs: dict[str, Any], timeout_s: float) -> dict[str, Any]:
        """`JOBS[job](**kwargs)` in a forked child; `{"ok": False, "diagnosis": ...}` on any fault."""
        if job not in JOBS:
            raise ValueError(f"unknown job {job!r}")
        try:
            line, _ = self._worker.request({"job": job, "kwargs": kwargs, "timeout_s": timeout_s}, timeout_s + 60)
        except WorkerLost:
            return {"ok": False, "diagnosis": "the suite's fork server died twice on this problem"}
        return json.loads(line)

    def close(self) -> None:
        self._worker.close()


# -- server side ---------------------------------------------------------------------------------
def _describe(status: int) -> str:
    if os.WIFSIGNALED(status):
        return f"killed by signal {signal.Signals(os.WTERMSIG(status)).name}"
    return f"exited with code {os.WEXITSTATUS(status)}"


def _run_child(job: dict[str, Any], w: int) -> None:
    """In the forked child: run the job, write one JSON object to `w`, exit without cleanup."""
    os.setsid()  # its own group: a timeout kills whatever the spec started too
    try:
        import importlib

        mod, fn = JOBS[job["job"]]
        out = getattr(importlib.import_module(mod), fn)(**job["kwargs"])
    except BaseException as exc:  # every fault of the user's code is the problem's reason
        tail = traceback.format_exc(limit=-4).strip().splitlines()
        out = {"ok": False, "diagnosis": f"{type(exc).__name__}: {exc}".splitlines()[0][:300],
               "traceback": "\n".join(tail[-12:])}
    data = json.dumps(out, default=str).encode()
    view = memoryview(data)
    while view:
        view = view[os.write(w, view):]
    os._exit(0)


def _serve_one(job: dict[str, Any]) -> dict[str, Any]:
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        _run_child(job, w)
    os.close(w)
    deadline = time.monotonic() + float(job.get("timeout_s", 120.0))
    chunks: list[bytes] = []
    timed_out = False
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            timed_out = True
            break
        ready, _, _ = select.select([r], [], [], min(left, 0.5))
        if ready:
            data = os.read(r, 1 << 16)
            if not data:
                break
            chunks.append(data)
    os.close(r)
    if timed_out:
        for kill in (lambda: os.killpg(pid, signal.SIGKILL), lambda: os.kill(pid, signal.SIGKILL)):
            try:
                kill()
            except (ProcessLookupError, PermissionError):
                pass
    _, status = os.waitpid(pid, 0)
    if timed_out:
        return {"ok": False, "diagnosis": f"timed out after {job.get('timeout_s'):g} s (a hang at import, in "
                                          f"get_inputs or in the model's construction)"}
    try:
        return json.loads(b"".join(chunks))
    except ValueError:
        return {"ok": False, "diagnosis": f"the preparing process died ({_describe(status)}) before reporting"}


def _warm_up() -> None:
    """Import and initialize once what every child needs: torch, fake tensors (the sizing) and the lowering
    (torch.export), so a child spends its time limit on the problem, not on imports (seconds each)."""
    import torch
    from torch._subclasses.fake_tensor import FakeTensorMode

    import workbench.spec  # noqa: F401
    import workbench.suites.sizing  # noqa: F401

    with FakeTensorMode():
        torch.nn.Linear(4, 4)(torch.randn(2, 4)).sum()
    try:
        import workbench.lowering  # noqa: F401
    except ImportError:  # lowering is optional for a suite (--draft none)
        pass


def main() -> int:
    proto = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)  # prints of specs and libraries go to stderr, never into the answers
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    _warm_up()

    proto.write(json.dumps({"ready": True, "pid": os.getpid()}) + "\n")
    for line in sys.stdin:
        if not line.strip():
            continue
        try:
            job = json.loads(line)
            answer = _serve_one(job) if job.get("job") in JOBS else {"ok": False, "diagnosis": "unknown job"}
        except Exception as exc:  # a malformed line must not take the server down
            answer = {"ok": False, "diagnosis": f"fork server: {type(exc).__name__}: {exc}"}
        proto.write(json.dumps(answer, default=str) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
