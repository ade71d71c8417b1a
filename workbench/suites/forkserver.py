"""A small pre-warmed fork server for the suite's own per-problem work (preparation, compile baselines).

Problem files are the user's code and may hang or crash the interpreter, so each job runs in a child
forked from a server process that has torch imported already (a fork costs milliseconds; importing
torch costs seconds on a busy CPU). The server kills a child that overruns its limit and answers
with the reason. Protocol: one JSON job per line on stdin, one JSON answer per line on a private copy
of stdout; fd 1 of the server and of every child points at stderr, so nothing a spec prints can
desynchronize the answers. Jobs name a function of `JOBS`: nothing is unpickled.

CUDA and fork: a process that has initialized CUDA cannot give it to a forked child (torch: "Cannot
re-initialize CUDA in forked subprocess"), and torch poisons fork as soon as it asks the CUDA runtime how
many devices there are, which `torch.cuda.is_available()` does (FakeTensorMode's warm-up calls it). So the
server asks NVML instead (`PYTORCH_NVML_BASED_CUDA_CHECK=1`, set before torch is imported) and never
initializes CUDA itself; on a CUDA machine a probe child proves at start that a forked child can initialize
CUDA. If it cannot (a library that initialized CUDA anyway), the server spawns a fresh interpreter per job
instead of forking (`mode` in its ready line: `fork` or `spawn`), slower by an import of torch, never wrong.
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
    "cuda_probe": ("workbench.suites.forkserver", "cuda_probe"),
}


class ForkServer:
    """Client side: one server process (`workbench.worker.WarmWorker`); `call` is thread-safe (one job at a
    time per server)."""

    def __init__(self, env: dict[str, str] | None = None, startup_timeout_s: float = 300.0) -> None:
        self._worker = WarmWorker("workbench.suites.forkserver", env=env, startup_timeout_s=startup_timeout_s,
                                  name="suite's fork server")

    def start(self) -> dict[str, Any]:
        """Start the server now; its ready line (`mode`: fork or spawn, and why)."""
        self._worker.start()
        return dict(self._worker.ready_info)

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
    if os.getsid(0) != os.getpid():
        os.setsid()  # its own group: a timeout kills whatever the spec started too (spawned: already)
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


def _start_fork(job: dict[str, Any]) -> tuple[int, int]:
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        _run_child(job, w)
    os.close(w)
    return pid, r


def _start_spawn(job: dict[str, Any]) -> tuple[int, int]:
    """A fresh interpreter runs the job (`--one`, the job on its stdin), its answer on a pipe (fd 3)."""
    import subprocess

    r, w = os.pipe()
    proc = subprocess.Popen([sys.executable, "-m", "workbench.suites.forkserver", "--one", str(w)],
                            stdin=subprocess.PIPE, stdout=2, pass_fds=(w,), start_new_session=True)
    os.close(w)
    assert proc.stdin is not None
    proc.stdin.write(json.dumps(job).encode())
    proc.stdin.close()
    return proc.pid, r


def _serve_one(job: dict[str, Any], mode: str = "fork") -> dict[str, Any]:
    if mode == "fork":
        _refuse_fork_after_cuda()
    pid, r = (_start_fork if mode == "fork" else _start_spawn)(job)
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


def _cuda_initialized() -> bool:
    torch = sys.modules.get("torch")
    return bool(torch is not None and torch.cuda.is_initialized())


def _refuse_fork_after_cuda() -> None:
    if _cuda_initialized():
        raise RuntimeError("this fork server has initialized CUDA: forking it would hand its children a dead "
                           "CUDA context")


def _probe_fork_cuda(timeout_s: float = 120.0) -> tuple[bool, str]:
    """Whether a forked child of this process can initialize CUDA and run a kernel (on a CUDA machine)."""
    answer = _serve_one({"job": "cuda_probe", "kwargs": {}, "timeout_s": timeout_s}, "fork")
    return bool(answer.get("ok")), str(answer.get("diagnosis", ""))


def cuda_probe() -> dict[str, Any]:
    """Job: initialize CUDA and add on the device (the fork server's start-up check)."""
    import torch

    x = torch.arange(4, device="cuda", dtype=torch.float32)
    return {"ok": bool(float((x + 1).sum()) == 10.0), "device": torch.cuda.get_device_name()}


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
        from workbench.lowering.capture import warm_up  # the import alone, as before the warm-up: CUDA untouched
    except ImportError:  # lowering is optional for a suite (--draft none)
        return
    if os.environ.get("WB_FORKSERVER_DEVICE") == "cuda":
        # torch.export's machinery initialized CUDA in this process on the H100 (results/gpu_ci/call7: the
        # server fell back to spawning a fresh interpreter per job): children forked from here capture cold
        return
    try:
        # one tiny export here, not one per child: torch.export's lazy imports cost a fresh process's first
        # capture about 19 s of its preparation limit (2-core CPU, load 7; capture.warm_up)
        warm_up()
    except Exception as exc:  # noqa: BLE001 - a failed warm-up costs the children time, never the server
        log.warning("suite's fork server: lowering warm-up failed: %s: %s", type(exc).__name__, exc)


def _one(fd: int) -> int:
    """`--one FD`: run the job on stdin in this (fresh) interpreter, answer on FD (spawn mode)."""
    job = json.loads(sys.stdin.read())
    os.dup2(2, 1)
    _run_child(job, fd)
    return 0


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--one"]:
        return _one(int(argv[1]))
    # before torch is imported: torch.cuda.is_available() asks NVML, which leaves fork usable
    os.environ.setdefault("PYTORCH_NVML_BASED_CUDA_CHECK", "1")
    proto = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)  # prints of specs and libraries go to stderr, never into the answers
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    _warm_up()
    mode, why = os.environ.get("WB_FORKSERVER_MODE", "fork"), ""
    if mode == "fork" and os.environ.get("WB_FORKSERVER_DEVICE") == "cuda":
        if _cuda_initialized():
            mode, why = "spawn", "the warm-up initialized CUDA"
        else:
            ok, diag = _probe_fork_cuda()
            if not ok:
                mode, why = "spawn", f"a forked child could not use CUDA ({diag})"
        if why:
            log.warning("suite's fork server: spawning a fresh interpreter per job: %s", why)
    proto.write(json.dumps({"ready": True, "pid": os.getpid(), "mode": mode, "why": why,
                            "cuda_initialized": _cuda_initialized()}) + "\n")
    for line in sys.stdin:
        if not line.strip():
            continue
        try:
            job = json.loads(line)
            if job.get("job") not in JOBS:
                answer = {"ok": False, "diagnosis": "unknown job"}
            else:
                if mode == "fork" and _cuda_initialized():  # something initialized CUDA since the start
                    mode = "spawn"
                    log.warning("suite's fork server: CUDA got initialized here; spawning from now on")
                answer = _serve_one(job, mode)
        except Exception as exc:  # a malformed line must not take the server down
            answer = {"ok": False, "diagnosis": f"fork server: {type(exc).__name__}: {exc}"}
        proto.write(json.dumps(answer, default=str) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
