"""The pre-warmed fork server (trusted, its own process): the lifecycle of every evaluation's processes.

Protocol with the client (`__init__.py`): one JSON job per line on stdin, one JSON result per line on
stdout; logs go to stderr. This module starts with torch and Triton imported, forks the candidate and
reference processes ahead of their jobs (their namespaces, uid and CUDA context ready), hands each job a
pair, and kills and reaps them after it. What one job does with them is the job pipeline's
(`job_pipeline.py`); what runs inside them is `candidate_proc.py` (hostile) and `reference_proc.py`
(trusted).
"""
from __future__ import annotations

import hashlib
import json
import logging
import os
import secrets
import shutil
import signal
import socket
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from platforms.clock import (
    device_memory,
    learn_the_device_alone,
    memory_lock_path,
    needs_the_device_alone,
    out_of_memory,
)
from workbench.harness import policy as _policy
from workbench.harness import sandbox as _sandbox
from workbench.harness.channel import Channel, Link
from workbench.harness.job_pipeline import _tail_file, finish, run_steps
from workbench.harness.settings import HarnessSettings
from workbench.harness.trusted_messages import CandidateJob, EvalRequest, JobResult, ReferenceJob

log = logging.getLogger("workbench.harness.server")


def _describe_exit(status: int) -> str:
    if os.WIFSIGNALED(status):
        return f"killed by signal {signal.Signals(os.WTERMSIG(status)).name}"
    return f"exited with code {os.WEXITSTATUS(status)}"


def flock_holders(ino: int) -> list[int]:
    """The processes holding an `flock` on the file of inode `ino` (waiters left out), from the kernel's table
    of file locks (`/proc/locks`: `1: FLOCK  ADVISORY  READ 4242 fe:00:2146660 0 EOF`); empty where the
    table cannot be read."""
    try:
        with open("/proc/locks") as f:
            lines = f.read().splitlines()
    except OSError:
        return []
    found = []
    for line in lines:
        f = line.split()
        if len(f) >= 6 and f[1] == "FLOCK" and f[5].rsplit(":", 1)[-1] == str(ino):  # "->": a waiter
            try:
                found.append(int(f[4]))
            except ValueError:
                continue
    return found


def _memory_key(job: EvalRequest) -> str:
    """One problem at one size, as the client named it (the candidate's text plays no part)."""
    return json.dumps([job.spec_path, job.overrides, job.shapes], sort_keys=True, default=str)


class MemoryNeighbours:
    """Whether another process held the device's memory lock (`platforms.clock.device_memory`) while this
    one held it for a job: what this trusted process itself sees in the kernel's table of file locks, when
    it enters (the lock already held), every `every` seconds while the job runs (a thread that only reads
    the table) and when it leaves (before the lock is let go). `seen`: another holder was there at one of
    those times. `readable`: the table showed this process's own hold; where it does not (no /proc, no lock
    file: the CPU), nothing is seen. Whatever a candidate writes decides neither."""

    def __init__(self, path: Path, every: float = 0.2) -> None:
        self.path, self.every = path, every
        self.seen = self.readable = False
        self._ino = -1
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def __enter__(self) -> MemoryNeighbours:
        try:
            self._ino = os.stat(self.path).st_ino
        except OSError:
            return self
        self.readable = os.getpid() in self._look()
        if self.readable:
            self._thread = threading.Thread(target=self._watch, name="memory-neighbours", daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._look()

    def _watch(self) -> None:
        while not self.seen and not self._stop.wait(self.every):
            self._look()

    def _look(self) -> list[int]:
        holders = flock_holders(self._ino)
        me = os.getpid()
        if any(pid != me for pid in holders):
            self.seen = True
        return holders


@dataclass
class _Spare:
    """A forked child waiting for its job: CUDA context already created, nothing job-specific yet."""

    role: str       # "candidate" | "reference"
    pid: int        # for the candidate: the parent of its PID namespace's init
    job_w: int      # the server's commands go here
    result_r: int   # the child's reports arrive here
    iso: dict[str, Any] = field(default_factory=dict)
    box: Path | None = None  # the candidate's sandbox (a bounded tmpfs), when this server mounts one
    sock: int = -1  # a Unix socket: descriptors (the GPU outbox's device memory) pass over it


class Server:
    def __init__(self, device: str) -> None:
        self.device = device
        self.settings = HarnessSettings.from_env()  # read once: the jobs and the forked children take them
        self.baselines: dict[str, dict[str, float]] = {}
        self.null_s: dict[str, float] = {}  # the protocol's own cost per round, measured in the reference
        # Drawn again for every job from the OS CSPRNG: the key of every timed input's seed (256 bits), and
        # the trial plan's base seed, drawn apart from it (the candidate sees trial and model seeds: they
        # tell nothing of the key).
        self.secret = secrets.token_bytes(32)
        self.plan_seed = 2_000_000 + secrets.randbits(61)
        shm = "/dev/shm" if os.access("/dev/shm", os.W_OK) else None
        self.root = Path(tempfile.mkdtemp(prefix="wb-harness-", dir=shm))
        os.chmod(self.root, 0o711)  # others may traverse into a stage they were given, not list
        self.isolate = _sandbox.can_isolate() and self.settings.sandbox
        # The jobs' tmpfs live in this server's own mount namespace (`_spawn`): the host never sees them.
        self.own_mounts = self.isolate and _sandbox.private_mounts()
        self.uid_lease: _sandbox.UidLease | None = None  # the running job's fresh uid
        self._boxes = 0
        if not self.isolate:
            log.warning("candidate isolation unavailable (%s): candidates run with this server's uid and "
                        "namespaces; only the Python guards and the static policy apply",
                        "WB_SANDBOX=off" if _sandbox.can_isolate() else "not root")
        self._fds: set[int] = set()  # server-side ends of every spare's pipes: closed in each new child
        # Forked ahead, CUDA context made: on the GPU two of each, so a job never waits for a context
        # (seconds on an H200) that the previous job's end started.
        self._spares: dict[str, list[_Spare]] = {"candidate": [], "reference": []}
        self.spare_depth = self.settings.spares_for(device)
        # problems (spec and overrides) that ran out of GPU memory beside another job: alone from now on
        self.needs_the_gpu_alone: set[str] = set()
        self._jobs = 0

    # -- warm spares ---------------------------------------------------------------------------
    def _spawn(self, role: str) -> _Spare:
        box = None
        if role == "candidate" and self.own_mounts:
            # Its sandbox: a bounded tmpfs mounted before the fork, so the candidate's mount namespace
            # (copied from this one) holds the same file system the judge reads after it is dead.
            self._boxes += 1
            box = self.root / f"box{self._boxes}"
            box.mkdir(mode=0o700)
            if not _sandbox.mount_box(box, self.settings.sandbox_mb):
                log.warning("could not mount a %d MB tmpfs for a sandbox: it is a plain directory",
                            self.settings.sandbox_mb)
        job_r, job_w = os.pipe()
        res_r, res_w = os.pipe()
        a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        sock_srv, sock_child = a.detach(), b.detach()
        inherited = set(self._fds)
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            code = 0
            try:
                # A candidate must reach no other process's pipes (a forged "go" line, say).
                for fd in inherited | {job_w, res_r, sock_srv}:
                    try:
                        os.close(fd)
                    except OSError:
                        pass
                if role == "candidate" and self.isolate:
                    code = self._candidate_namespace(job_r, res_w, sock_child)
                else:
                    self._spare_main(role, job_r, res_w, None, sock_child)
            except BaseException:  # noqa: BLE001 - a child must never return into the server loop
                code = 70
            finally:
                os._exit(code)
        os.close(job_r)
        os.close(res_w)
        os.close(sock_child)
        self._fds.update((job_w, res_r, sock_srv))
        return _Spare(role, pid, job_w, res_r, box=box, sock=sock_srv)

    def _candidate_namespace(self, job_r: int, res_w: int, sock: int) -> int:
        """In the forked child: new namespaces, then the candidate spare as the PID namespace's init.

        This process stays outside as the init's parent and passes on how it ended.
        """
        iso = _sandbox.Isolation()
        _sandbox.unshare_namespaces(iso)
        if "pid" not in iso.namespaces:
            _sandbox.after_pid_fork(iso)
            self._spare_main("candidate", job_r, res_w, iso, sock)
            return 0
        init = os.fork()
        if init == 0:
            code = 0
            try:
                _sandbox.after_pid_fork(iso)
                self._spare_main("candidate", job_r, res_w, iso, sock)
            except BaseException:  # noqa: BLE001
                code = 70
            finally:
                os._exit(code)
        os.close(job_r)
        os.close(res_w)
        os.close(sock)
        _, status = os.waitpid(init, 0)
        if os.WIFSIGNALED(status):
            sig = os.WTERMSIG(status)
            signal.signal(sig, signal.SIG_DFL)
            os.kill(os.getpid(), sig)
        return os.WEXITSTATUS(status)

    def _spare_main(self, role: str, job_r: int, res_w: int, iso: _sandbox.Isolation | None, sock: int) -> None:
        from workbench.harness import candidate_proc, reference_proc

        if role == "reference":
            out = os.open(self.root / "reference.log", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
            os.dup2(out, 1)
            os.dup2(out, 2)
        if role == "candidate":
            # Before any candidate code: the guards' snapshot of torch must see torch.manual_seed as it stays
            # (torch._dynamo rewraps it when imported, and the op recorder's first dispatch imports it). A pool
            # server imported it before forking (a no-op here); a one-shot server leaves it to this spare,
            # which imports it while the reference prepares (`main`).
            import torch._dynamo  # noqa: F401
        if self.device == "cuda":
            import torch

            torch.zeros(1, device="cuda")  # the context costs seconds: pay it before the job arrives
        chan = Channel(job_r, res_w)
        try:
            msg = chan.recv()
        except EOFError:
            return
        if role == "candidate":  # decoded while this is still the harness's own process: no candidate code yet
            candidate_proc.run_candidate(CandidateJob.from_wire(msg), chan, iso, self.settings, sock)
        else:
            reference_proc.run_reference(ReferenceJob.from_wire(msg), chan, self.settings, sock)

    def ensure_spares(self) -> None:
        self.reap_orphans()
        for role in ("reference", "candidate"):
            live = []
            for sp in self._spares[role]:
                try:
                    alive = os.waitpid(sp.pid, os.WNOHANG) == (0, 0)
                except ChildProcessError:
                    alive = False
                if alive:
                    live.append(sp)
                else:  # it died while waiting: replace it
                    self._drop_box(sp)
                    self._close(sp.job_w)
                    self._close(sp.result_r)
                    self._close(sp.sock)
            self._spares[role] = live
            while len(live) < self.spare_depth:
                live.append(self._spawn(role))

    def _take(self, role: str) -> _Spare:
        if self._spares[role]:
            return self._spares[role].pop(0)
        return self._spawn(role)

    def _drop_box(self, sp: _Spare) -> None:
        if sp.box is not None:
            _sandbox.unmount(sp.box)
            shutil.rmtree(sp.box, ignore_errors=True)

    def _close(self, fd: int) -> None:
        if fd in self._fds:
            self._fds.discard(fd)
            try:
                os.close(fd)
            except OSError:
                pass

    def _kill(self, sp: _Spare, whole_uid: bool) -> int | None:
        """Kill the child and everything it started; returns its exit status.

        The namespace's init goes first, so its parent (outside) reaps it and exits on its own; then
        every process of the uid; then the parent if it lingers. No zombie is left to the host's init.
        """
        for pid in _sandbox.child_pids(sp.pid) or [sp.pid]:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        if whole_uid and self.uid_lease is not None:
            _sandbox.kill_uid(self.uid_lease.uid)
        deadline = time.monotonic() + 2.0
        while time.monotonic() < deadline:
            try:
                done, status = os.waitpid(sp.pid, os.WNOHANG)
            except ChildProcessError:
                return None
            if done:
                return status
            time.sleep(0.001)
        try:
            os.kill(sp.pid, signal.SIGKILL)
            return os.waitpid(sp.pid, 0)[1]
        except (ProcessLookupError, ChildProcessError):
            return None

    def reap_orphans(self) -> None:
        """This server is a child subreaper: whatever a child orphaned ends up here and is reaped."""
        spare_pids = {sp.pid for sps in self._spares.values() for sp in sps}
        while True:
            try:
                pid, _ = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            if pid in spare_pids:  # a spare died while waiting: ensure_spares replaces it
                for sps in self._spares.values():
                    for sp in [x for x in sps if x.pid == pid]:
                        self._drop_box(sp)
                        self._close(sp.job_w)
                        self._close(sp.result_r)
                        sps.remove(sp)

    def _seeds(self, kind: int, k: int, r: int) -> list[int]:
        """Seeds of round k's r repetitions (kind 1: the candidate's rounds, 2: the baseline's): a keyed
        hash of the job's secret, so one seed the candidate process holds tells nothing of the next."""
        return [int.from_bytes(hashlib.blake2b(f"{kind}:{k}:{i}".encode(), digest_size=8,
                                               key=self.secret).digest(), "little") >> 2
                for i in range(r)]

    # -- one job --------------------------------------------------------------------------------
    def run_job_on_device(self, job: EvalRequest) -> JobResult:
        """`run_job` holding the GPU's memory lock shared (`platforms.clock`); once more, holding it exclusive,
        when the job ran out of device memory beside other jobs (two published-size KernelBench problems
        need more than an H100 holds). Both runs are whole evaluations, judged alike. A problem that needed
        that once holds the lock exclusive from the start of its later jobs on this server (a search's
        next candidates: on 2026-12-06 34 KernelBench jobs failed beside another and ran again alone).

        Beside other jobs is what this server saw (`MemoryNeighbours`: another process held the memory lock
        while this job did), never what the job's error says: the words "out of memory" can be the
        candidate's own report, so a candidate that ran alone and claims them gets no second draw."""
        key = _memory_key(job)
        if self.device == "cuda" and (key in self.needs_the_gpu_alone or needs_the_device_alone(key, self.device)):
            # this problem ran out of memory beside another job before: every later job of it holds the
            # lock exclusive from the start (a shared run that fails and runs again costs both runs)
            with device_memory(self.device, exclusive=True) as waited:
                res = self.run_job(job)
            res.timings_s["memory_wait"] = round(waited, 3)
            res.timings_s["memory_exclusive"] = 1.0
            return res
        with device_memory(self.device) as waited, MemoryNeighbours(memory_lock_path(self.device)) as beside:
            res = self.run_job(job)
        oom = self.device == "cuda" and res.status != "passed" and out_of_memory(res.error)
        if oom and not beside.seen:
            log.warning("job failed out of GPU memory with no other job holding device memory (%s): no second run",
                        "none seen" if beside.readable else "the lock table does not show this server's hold")
        elif oom:
            first = res.error
            log.warning("job ran out of GPU memory beside others: running it again alone")
            self.ensure_spares()
            with device_memory(self.device, exclusive=True) as alone:
                res = self.run_job(job)
            waited += alone
            res.reran_alone = first[:300]
            self.needs_the_gpu_alone.add(key)
            learn_the_device_alone(key, self.device)  # the run's other servers read it too
        res.timings_s["memory_wait"] = round(waited, 3)
        return res

    def run_job(self, job: EvalRequest) -> JobResult:
        t0 = time.perf_counter()
        self._jobs += 1
        timeout = float(job.timeout_s)
        res = JobResult(status="passed", trials=job.trials)
        self.secret = secrets.token_bytes(32)  # fresh seeds: nothing one job saw helps the next
        self.plan_seed = 2_000_000 + secrets.randbits(61)  # trial and model seeds (the plan adds offsets)
        problem = _policy.source_problem(job.candidate_source)
        if problem is not None:  # before any process is taken: nothing to leave behind
            res.violations = [f"malformed_source:{problem}"]
            return finish(res, "rejected", f"static policy: malformed_source: {problem}", t0)
        source = job.candidate_source.encode("utf-8")  # exactly the bytes the policy checked
        job_dir = Path(tempfile.mkdtemp(prefix=f"job{self._jobs}-", dir=self.root))
        nonce = secrets.token_hex(8)
        ref_sp, cand_sp = self._take("reference"), self._take("candidate")
        stage, sandbox = job_dir / "stage", cand_sp.box or job_dir / "sandbox"
        stage.mkdir(mode=0o755)
        sandbox.mkdir(mode=0o700, exist_ok=True)
        os.chmod(job_dir, 0o711)
        (sandbox / "candidate.py").write_bytes(source)
        if self.isolate:
            self.uid_lease = _sandbox.UidLease()  # fresh per job: its own keyrings, nothing of the last
        for fd in (ref_sp.job_w, ref_sp.result_r, cand_sp.job_w, cand_sp.result_r, ref_sp.sock, cand_sp.sock):
            self._fds.discard(fd)
        ref = Link(ref_sp.pid, ref_sp.job_w, ref_sp.result_r, nonce)
        cand = Link(cand_sp.pid, cand_sp.job_w, cand_sp.result_r, nonce, strict=True)
        ref.sock, cand.sock = ref_sp.sock, cand_sp.sock
        cand.watch_pid = self._namespace_init(cand_sp.pid)
        if self.device == "cuda":
            # raised by what the harness stages (`job_pipeline`)
            cand.rss_limit = int(self.settings.mem_limit_gb * 2**30)
        try:
            return run_steps(self, job, res, ref, cand, stage, sandbox, timeout, t0)
        finally:
            if cand.pid > 0:
                self._kill_and_status(cand)
            self._kill(ref_sp, whole_uid=False)
            for fd in (ref_sp.job_w, ref_sp.result_r, cand_sp.job_w, cand_sp.result_r, ref_sp.sock, cand_sp.sock):
                try:
                    os.close(fd)
                except OSError:
                    pass
            res.stdout_tail = (_tail_file(sandbox / "stdout.txt") + _tail_file(sandbox / "stderr.txt"))[-2000:]
            shutil.rmtree(job_dir, ignore_errors=True)
            self._drop_box(cand_sp)
            if self.uid_lease is not None:
                self.uid_lease.release()
                self.uid_lease = None

    def _namespace_init(self, pid: int) -> int:
        """The candidate's PID-namespace init, seen from here (its parent `pid` forked it at spawn)."""
        if not self.isolate:
            return pid
        deadline = time.monotonic() + 30.0  # returns as soon as it exists; a loaded machine forks slowly
        while time.monotonic() < deadline:
            kids = _sandbox.child_pids(pid)
            if kids:
                return kids[0]
            time.sleep(0.002)
        return pid

    def _kill_and_status(self, cand: Link) -> str:
        if cand.pid <= 0:
            return "ended"
        sp = _Spare("candidate", cand.pid, cand.cmd_w, cand.report_r)
        status = self._kill(sp, whole_uid=True)
        cand.pid = -1
        return _describe_exit(status) if status is not None else "ended"



def _process_age_s() -> float:
    """Seconds since this process was started (`/proc/self/stat`'s start time against the boot time, in clock
    ticks): what the interpreter and the imports took before `main`; 0.0 where /proc does not say."""
    try:
        with open("/proc/self/stat") as f:
            start_ticks = int(f.read().rsplit(")", 1)[1].split()[19])
        with open("/proc/uptime") as f:
            uptime = float(f.read().split()[0])
        return max(0.0, uptime - start_ticks / os.sysconf("SC_CLK_TCK"))
    except (OSError, ValueError, IndexError):
        return 0.0


def main() -> None:
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, datefmt="%H:%M:%S",
                        format="%(asctime)s %(levelname)s harness-server: %(message)s")
    device = sys.argv[1] if len(sys.argv) > 1 else "cpu"
    # A one-shot server (`workbench eval`) answers one job: what only the candidate's process needs is imported
    # there, after the fork, while the reference prepares, not here on the command's critical path.
    one_shot = "--one-shot" in sys.argv[2:]
    t0 = time.perf_counter()
    before_main = _process_age_s()  # the interpreter's start and this module's imports (torch among them)
    import torch  # noqa: F401 - pre-warm: every forked child inherits these imports
    t_torch = time.perf_counter()
    if not one_shot:
        # imported lazily it rewraps torch.manual_seed mid-evaluation: a pool's spares inherit it (paid once);
        # a one-shot's candidate spare imports it itself (`_spare_main`): 2-2.7 s off the server's start on the
        # CPU CI machine
        import torch._dynamo  # noqa: F401
    t_dynamo = time.perf_counter()
    import torch.utils._python_dispatch  # noqa: F401
    import triton  # noqa: F401
    import triton.language  # noqa: F401
    import triton.testing  # noqa: F401

    if os.environ.get("TRITON_INTERPRET") == "1":
        import triton.runtime.interpreter  # noqa: F401

    from workbench.harness import candidate_proc, opcheck, reference_proc  # noqa: F401

    opcheck.install_triton_wrappers()
    _sandbox.become_subreaper()
    t_imports = time.perf_counter()
    server = Server(device)
    server.ensure_spares()
    t_ready = time.perf_counter()
    ready: dict[str, Any] = {
        "ready": True, "startup_s": t_ready - t0, "pid": os.getpid(), "isolated": server.isolate,
        # where the start went (the client adds them to the result's `timings_s` as `server_*`)
        "phases_s": {"before_main": round(before_main, 3), "import_torch": round(t_torch - t0, 3),
                     "import_dynamo": round(t_dynamo - t_torch, 3),
                     "import_rest": round(t_imports - t_dynamo, 3), "spares": round(t_ready - t_imports, 3)}}
    if device == "cpu":  # torch is here already: the client need not import it to say what the CPU is
        from platforms import describe_device

        ready["platform"] = describe_device("cpu").to_dict()
    out = sys.stdout
    out.write(json.dumps(ready) + "\n")
    out.flush()
    try:
        for line in sys.stdin:
            if not line.strip():
                continue
            job = EvalRequest.from_wire(line)  # the trusted client's: a malformed one is a bug, as before
            try:
                res = server.run_job_on_device(job)
            except Exception as exc:  # the server stays up: the job becomes an infrastructure error
                log.exception("job failed inside the server")
                res = JobResult(status="infra_error", error=f"harness server: {type(exc).__name__}: {exc}")
            out.write(res.encode() + "\n")
            out.flush()
            if job.last:  # a one-shot client: no spares for a next job, exit now
                break
            server.ensure_spares()  # while the client digests this result
    finally:
        for sps in server._spares.values():  # their tmpfs first: a mount point cannot be removed
            for sp in sps:
                server._drop_box(sp)
        shutil.rmtree(server.root, ignore_errors=True)
        if server.uid_lease is not None:
            server.uid_lease.release()
    # Everything is written and cleaned up: skip the interpreter's teardown of torch and Triton (seconds).
    logging.shutdown()
    sys.stderr.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
