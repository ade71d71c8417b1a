"""The pre-warmed evaluation server: torch and triton imported once, each candidate in a fork.

Protocol: one JSON job per line on stdin, one JSON result per line on stdout. Logs go to stderr.
For every job the server forks the candidate process, waits for it (wall-clock timeout, resident
memory watch on the GPU), then forks the reference process, which judges the candidate's saved
outputs. The verdict is assembled here, from what the reference process computed: nothing the
candidate prints is parsed.
"""
from __future__ import annotations

import json
import logging
import os
import select
import shutil
import signal
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

log = logging.getLogger("workbench.harness.server")


def _rss_bytes(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def _kill_group(pid: int) -> None:
    for target in (lambda: os.killpg(pid, signal.SIGKILL), lambda: os.kill(pid, signal.SIGKILL)):
        try:
            target()
        except (ProcessLookupError, PermissionError):
            pass


def _wait(pid: int, fd: int, timeout_s: float, rss_limit: int) -> tuple[bytes, str | None, int | None]:
    """Read the child's report until EOF; returns (data, failure, exit_status)."""
    deadline = time.monotonic() + timeout_s
    chunks: list[bytes] = []
    failure: str | None = None
    open_fd = True
    while open_fd:
        left = deadline - time.monotonic()
        if left <= 0:
            failure = "timeout"
            break
        ready, _, _ = select.select([fd], [], [], min(left, 0.2))
        if ready:
            data = os.read(fd, 1 << 16)
            if not data:
                open_fd = False
            else:
                chunks.append(data)
        if rss_limit and _rss_bytes(pid) > rss_limit:
            failure = "memory"
            break
    if failure:
        _kill_group(pid)
    os.close(fd)
    _, status = os.waitpid(pid, 0)
    return b"".join(chunks), failure, status


def _describe_exit(status: int) -> str:
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        return f"killed by signal {signal.Signals(sig).name}"
    return f"exited with code {os.WEXITSTATUS(status)}"


def _last_json(data: bytes) -> dict[str, Any] | None:
    for line in reversed(data.decode(errors="replace").strip().splitlines()):
        try:
            obj = json.loads(line)
            if isinstance(obj, dict):
                return obj
        except json.JSONDecodeError:
            continue
    return None


def _tail_file(path: Path, n: int = 2000) -> str:
    try:
        data = path.read_bytes()
        return data[-n:].decode(errors="replace")
    except OSError:
        return ""


@dataclass
class _Spare:
    """A forked child waiting for its job: CUDA context already created, nothing job-specific yet."""

    role: str       # "candidate" | "reference"
    pid: int
    job_w: int      # the server writes the job (and, for the reference, the go line) here
    result_r: int   # the child's report arrives here


class Server:
    def __init__(self, device: str) -> None:
        self.device = device
        self.baselines: dict[str, dict[str, float]] = {}
        # Candidate outputs travel to the reference process as files: keep them in memory when possible.
        shm = "/dev/shm" if os.access("/dev/shm", os.W_OK) else None
        self.root = Path(tempfile.mkdtemp(prefix="wb-harness-", dir=shm))
        self._fds: set[int] = set()  # server-side ends of every spare's pipes: closed in each new child
        self._spares: dict[str, _Spare | None] = {"candidate": None, "reference": None}

    # -- warm spares ---------------------------------------------------------------------------
    def _spawn(self, role: str) -> _Spare:
        job_r, job_w = os.pipe()
        res_r, res_w = os.pipe()
        inherited = set(self._fds)
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            code = 0
            try:
                # A candidate must reach no other process's pipes (a forged "go" line, say).
                for fd in inherited | {job_w, res_r}:
                    try:
                        os.close(fd)
                    except OSError:
                        pass
                self._spare_main(role, job_r, res_w)
            except BaseException:  # noqa: BLE001 - a child must never return into the server loop
                code = 70
            finally:
                os._exit(code)
        os.close(job_r)
        os.close(res_w)
        self._fds.update((job_w, res_r))
        return _Spare(role, pid, job_w, res_r)

    def _spare_main(self, role: str, job_r: int, res_w: int) -> None:
        from workbench.harness import child

        if role == "reference":
            out = os.open(self.root / "reference.log", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
            os.dup2(out, 1)
            os.dup2(out, 2)
        if self.device == "cuda":
            import torch

            torch.zeros(1, device="cuda")  # the context costs seconds: pay it before the job arrives
        reader = os.fdopen(job_r, "rb")
        line = reader.readline()
        if not line.strip():
            return
        job = json.loads(line)
        if role == "candidate":
            reader.close()  # the candidate gets no channel back to the server
            child.run_candidate(job, Path(job["sandbox"]), res_w)
        else:
            child.run_reference(job, reader.readline, Path(job["sandbox"]), res_w, job.get("cached_baseline"))

    def ensure_spares(self) -> None:
        for role in ("reference", "candidate"):
            sp = self._spares[role]
            if sp is not None and os.waitpid(sp.pid, os.WNOHANG) != (0, 0):
                self._close(sp.job_w)  # it died while waiting: reaped above, replace it
                self._close(sp.result_r)
                sp = None
            if sp is None:
                self._spares[role] = self._spawn(role)

    def _take(self, role: str) -> _Spare:
        sp = self._spares[role]
        self._spares[role] = None
        if sp is None:
            sp = self._spawn(role)
        return sp

    def _close(self, fd: int) -> None:
        if fd in self._fds:
            self._fds.discard(fd)
            try:
                os.close(fd)
            except OSError:
                pass

    def _send(self, sp: _Spare, obj: dict[str, Any]) -> None:
        try:
            os.write(sp.job_w, (json.dumps(obj) + "\n").encode())
        except BrokenPipeError:  # the child already reported (a bad spec) or died: its report says which
            pass

    # -- one job --------------------------------------------------------------------------------
    def run_job(self, job: dict[str, Any]) -> dict[str, Any]:
        t0 = time.perf_counter()
        job["device"] = self.device
        timeout = float(job.get("timeout_s", 300.0))
        rss_limit = int(job.get("mem_limit_gb", 8.0) * 2**30) if self.device == "cuda" else 0
        sandbox = Path(tempfile.mkdtemp(prefix="cand-", dir=self.root))
        (sandbox / "candidate.py").write_text(job["candidate_source"])
        job["sandbox"] = str(sandbox)
        res: dict[str, Any] = {"status": "passed", "violations": [], "error": "", "timings_s": {},
                               "trials": int(job.get("trials", 3))}
        key = json.dumps([job["spec_path"], job.get("overrides"), job.get("shapes"), self.device], sort_keys=True)
        job["cached_baseline"] = self.baselines.get(key) if job.get("cache_baseline", True) else None
        ref = self._take("reference")
        cand_p = self._take("candidate")
        ref_waited = False
        try:
            # The reference process prepares (spec, host inputs) while the candidate runs.
            self._send(ref, job)
            self._send(cand_p, job)
            self._close(cand_p.job_w)
            self._fds.discard(cand_p.result_r)
            data, failure, status = _wait(cand_p.pid, cand_p.result_r, timeout, rss_limit)
            cand = _last_json(data) if not failure else None
            res["stdout_tail"] = _tail_file(sandbox / "stdout.txt") + _tail_file(sandbox / "stderr.txt")
            if failure == "timeout":
                return self._done(res, "timeout", f"candidate exceeded the {timeout:g} s wall-clock limit", t0)
            if failure == "memory":
                return self._done(res, "crashed", f"candidate exceeded the resident memory limit "
                                  f"({job.get('mem_limit_gb', 8.0)} GiB)", t0)
            if cand is None:
                return self._done(res, "crashed", f"candidate process {_describe_exit(status)} before reporting "
                                  f"(segfault, abort or os._exit)\n{res['stdout_tail'][-800:]}", t0)
            res.update({k: cand[k] for k in ("violations", "launches", "aten_ops", "plan", "timing") if k in cand})
            res["timings_s"].update(cand.get("timings_s", {}))
            if cand["status"] != "passed":
                return self._done(res, cand["status"], cand.get("error", ""), t0)
            self._send(ref, cand)
            self._close(ref.job_w)
            self._fds.discard(ref.result_r)
            data, failure, status = _wait(ref.pid, ref.result_r, max(timeout, 600.0), 0)
            ref_waited = True
            verdict = _last_json(data)
            if verdict is None:
                return self._done(res, "infra_error", f"reference process {_describe_exit(status)} "
                                  f"({failure or 'no report'})", t0)
            if "bad_spec" in verdict:
                return self._done(res, "bad_spec", verdict["bad_spec"], t0)
            if "reference_error" in verdict:
                return self._done(res, "bad_spec", "the spec's Model failed: " + verdict["reference_error"], t0)
            res["timings_s"].update(verdict.get("timings_s", {}))
            res["max_abs_err"] = verdict.get("max_abs_err")
            res["max_rel_err"] = verdict.get("max_rel_err")
            if not verdict["correct"]:
                return self._done(res, "incorrect", "output mismatch: " + "\n".join(verdict["problems"][:8]), t0)
            if "baseline" in verdict:
                self.baselines[key] = verdict["baseline"]
                res["baseline"] = verdict["baseline"]
            return self._done(res, "passed", "", t0)
        finally:
            self._close(cand_p.job_w)
            self._close(ref.job_w)  # EOF tells a waiting reference process to abort
            if not ref_waited:
                _kill_group(ref.pid)
                self._close(ref.result_r)
                try:
                    os.waitpid(ref.pid, 0)
                except ChildProcessError:
                    pass
            if not job.get("keep_sandbox"):
                shutil.rmtree(sandbox, ignore_errors=True)

    def _done(self, res: dict[str, Any], status: str, error: str, t0: float) -> dict[str, Any]:
        res["status"] = status
        if error:
            res["error"] = error
        res["timings_s"]["server_wall"] = time.perf_counter() - t0
        return res


def main() -> None:
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(levelname)s harness-server: %(message)s")
    device = sys.argv[1] if len(sys.argv) > 1 else "cpu"
    t0 = time.perf_counter()
    import torch  # noqa: F401 - pre-warm: every forked child inherits these imports
    import torch._dynamo  # noqa: F401 - imported lazily it rewraps torch.manual_seed mid-evaluation
    import torch.utils._python_dispatch  # noqa: F401
    import triton  # noqa: F401
    import triton.language  # noqa: F401
    import triton.testing  # noqa: F401

    if os.environ.get("TRITON_INTERPRET") == "1":
        import triton.runtime.interpreter  # noqa: F401

    from workbench.harness import child, opcheck  # noqa: F401

    opcheck.install_triton_wrappers()
    server = Server(device)
    server.ensure_spares()
    out = sys.stdout
    out.write(json.dumps({"ready": True, "startup_s": time.perf_counter() - t0, "pid": os.getpid()}) + "\n")
    out.flush()
    try:
        for line in sys.stdin:
            if not line.strip():
                continue
            job = json.loads(line)
            try:
                res = server.run_job(job)
            except Exception as exc:  # the server stays up: the job becomes an infrastructure error
                log.exception("job failed inside the server")
                res = {"status": "infra_error", "error": f"harness server: {type(exc).__name__}: {exc}"}
            out.write(json.dumps(res) + "\n")
            out.flush()
            server.ensure_spares()  # while the client digests this result
    finally:
        shutil.rmtree(server.root, ignore_errors=True)


if __name__ == "__main__":
    main()
