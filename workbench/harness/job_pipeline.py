"""The job pipeline (trusted, in the server process): one evaluation's numbered steps.

For every job:

1. the reference process (trusted, forked ahead) loads the spec and stages every input in a stage
   directory, from seeds drawn by the server that no candidate sees (on the GPU it makes them on the device
   instead, into memory it shares with the candidate when the candidate's turn comes: `inbox.py`);
2. the static policy checks the candidate's source (`policy.py`): a violation ends the job here;
3. the baseline is timed, before any candidate code exists, under the server's clock (cached);
4. the candidate process (forked ahead, confined by `sandbox.py` in its own namespaces and uid)
   runs the trials and the timing rounds, which the server clocks (`rounds.py`, `stager.py`);
5. the candidate's namespace and every process of its uid are killed;
6. the reference process judges the outputs the candidate left in its sandbox, on the same inputs.

Steps 1 to 6 hold the GPU's clock shared (`platforms.clock.device_busy`) and the timed windows of steps 3
and 4 hold it exclusive: no other evaluation's GPU work (input generation, reference runs, candidate trials,
judging) runs during a timed window, and no candidate code runs anywhere outside its server's hold (its
process lives from step 4 to step 5).

The processes themselves (forked ahead, killed, reaped) are the fork server's (`server.py`); what runs in
them is `reference_proc.py` and `candidate_proc.py`.
"""
from __future__ import annotations

import json
import logging
import os
import socket
import time
from pathlib import Path
from typing import Any, Protocol, TypeVar

from platforms.clock import device_busy, device_clock
from workbench.harness import graph_audit as _graph_audit
from workbench.harness import messages as _messages
from workbench.harness import outbox as _outbox
from workbench.harness import policy as _policy
from workbench.harness import rounds as _rounds
from workbench.harness import safeio as _safeio
from workbench.harness import sandbox as _sandbox
from workbench.harness.channel import ChildGone, Link, ProtocolError
from workbench.harness.settings import HarnessSettings
from workbench.harness.stager import RoundStager
from workbench.harness.trusted_messages import (
    BaselineReady,
    CandidateJob,
    EvalRequest,
    Filled,
    InputsShared,
    JobResult,
    Prepared,
    ReferenceFailure,
    ReferenceJob,
    Verdict,
    WireError,
    reference_reply,
)

# The smallest timed set worth the input cache (`candidate`): host RNG makes a set under 1 MB in
# milliseconds, less than a write into the cache costs.
CACHE_MIN_SET_BYTES = 2**20


class Server(Protocol):
    """What a job takes of the fork server (`server.Server`), named here so the two modules import one way."""

    device: str
    settings: HarnessSettings
    isolate: bool                  # candidates get namespaces and a uid of their own
    own_mounts: bool               # the sandboxes are tmpfs in the server's own mount namespace
    uid_lease: _sandbox.UidLease | None
    plan_seed: int
    baselines: dict[str, dict[str, Any]]
    null_s: dict[str, float]

    def _seeds(self, kind: int, k: int, r: int) -> list[int]: ...

    def _kill_and_status(self, cand: Link) -> str: ...


log = logging.getLogger("workbench.harness.server")


def _tail_file(path: Path, n: int = 2000) -> str:
    """A candidate-written file's tail: no link followed, never more than `n` bytes read (`safeio`)."""
    return _safeio.read_tail(path.parent, path.name, n)


def run_steps(server: Server, job: EvalRequest, res: JobResult, ref: Link, cand: Link, stage: Path,
              sandbox: Path, timeout: float, t0: float) -> JobResult:
    """The job's numbered steps (the module's docstring); any step may end it with `_End`."""
    run = _JobRun(server, job, res, ref, cand, stage, sandbox, timeout)
    try:
        with device_busy(server.device) as waited:  # the untimed GPU work waits for, and holds off, timed windows
            res.timings_s["busy_wait"] = round(waited, 3)
            return _steps(run, cand, res, t0)
    finally:
        for fd in (run.dev_fd, run.inputs_fd):  # the job ended before the candidate got it
            if fd >= 0:
                os.close(fd)


def _steps(run: _JobRun, cand: Link, res: JobResult, t0: float) -> JobResult:
    try:
        run.prepare()          # 1. the reference stages (or will make) every input
        run.static_policy()    # 2. before any candidate code runs anywhere
        run.baseline()         # 3. before the candidate exists, under this server's clock
        report = run.candidate()  # 4. trials and timed rounds in the sandbox
        run.server._kill_and_status(cand)  # 5. nothing of the candidate survives past this line
        run.accept(report)
        run.judge()            # 6. the verdict, from the trusted side
    except _End as end:
        return finish(res, end.status, end.error, t0)
    return finish(res, "passed", "", t0)


def finish(res: JobResult, status: str, error: str, t0: float) -> JobResult:
    """The job's result with its status, its diagnosis and the server's wall time."""
    res.status = status
    if error:
        res.error = error
    res.timings_s["server_wall"] = time.perf_counter() - t0
    return res


def idle_after_done(pid: int, cpu_ms: float, why: list[str] | None = None) -> bool | None:
    """After `done`: the candidate's main thread must go straight to waiting on its command pipe. No
    grace period: from the moment this server holds `done`, the thread may spend at most
    `cpu_ms` (`WB_AFTER_DONE_CPU_MS`) of CPU time (its own clock, `schedstat`, so a loaded host does not count) before
    it is blocked in read(); work done after `done` is `reported_done_early`. None where /proc says
    nothing (a kernel without the files). A refusal appends its reason to `why` (the report says which
    rule fired, and where the thread was)."""

    def refuse(reason: str) -> bool:
        if why is not None:
            why.append(f"{reason} (syscall {_syscall(pid)}, waited {time.monotonic() - t0:.3f} s)")
        return False

    cpu0 = _thread_cpu_ns(pid)
    t0 = time.monotonic()
    while True:
        state = _blocked_in_read(pid)
        if state is None:
            return None
        if state:
            break
        cpu = _thread_cpu_ns(pid)
        if cpu0 is not None and cpu is not None and cpu - cpu0 > cpu_ms * 1e6:
            # working after `done`, however the host is loaded
            return refuse(f"{(cpu - cpu0) / 1e6:.2f} ms of CPU after done, over {cpu_ms:g} ms")
        waited = time.monotonic() - t0
        # Asleep anywhere but its pipe (waiting on a thread that works on) after 0.5 s is work after `done`;
        # runnable but not yet run is a loaded host's scheduler: its own CPU clock above decides, up to 10 s.
        if waited > 0.5 and not (waited < 10.0 and _runnable(pid)):
            if _blocked_in_read(pid):  # it reached its read between this loop's two looks: idle, not asleep
                break
            return refuse("asleep off its command pipe")
        time.sleep(0.0002)
    cpu1 = _thread_cpu_ns(pid)
    if cpu0 is None or cpu1 is None:
        return True
    if cpu1 - cpu0 > cpu_ms * 1e6:
        return refuse(f"{(cpu1 - cpu0) / 1e6:.2f} ms of CPU before its read, over {cpu_ms:g} ms")
    return True


def verify_isolation(pid: int, claimed: dict[str, Any] | None, enforced: bool) -> dict[str, Any]:
    """What the candidate process really is, read from /proc by this trusted process (`enforced`: the
    server isolates candidates)."""
    seen: dict[str, Any] = {"claimed": claimed, "enforced": enforced}
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("Uid:"):
                    seen["uid"] = int(line.split()[1])
    except OSError:
        pass
    own = {}
    for ns in ("pid", "mnt", "net", "ipc", "uts"):
        try:
            own[ns] = os.readlink(f"/proc/{pid}/ns/{ns}") != os.readlink(f"/proc/self/ns/{ns}")
        except OSError:
            own[ns] = None
    seen["own_namespaces"] = own
    # what it claims is information: only a list of short strings is kept, whatever it sent
    said = claimed.get("missing") if isinstance(claimed, dict) else None
    missing = [str(x)[:200] for x in said[:32]] if isinstance(said, list) else []
    missing += [f"no {ns} namespace" for ns, ok in own.items() if ok is False]
    if not enforced:
        missing.append("not isolated: the server is not root or WB_SANDBOX=off")
    seen["missing"] = missing
    if missing:
        log.warning("candidate isolation incomplete: %s", "; ".join(missing))
    return seen


class _End(Exception):
    """A step ended the job with this status and diagnosis."""

    def __init__(self, status: str, error: str) -> None:
        super().__init__(error)
        self.status, self.error = status, error


R = TypeVar("R", Prepared, BaselineReady, InputsShared, Filled, Verdict)


def _malformed(exc: Exception) -> _End:
    """A reply of the reference outside its type or its phase: the trusted side's fault, one line."""
    line = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:300]
    return _End("infra_error", f"the reference process sent a malformed reply: {line}")


class _JobRun:
    """One job's state across its numbered steps (`run_steps`)."""

    def __init__(self, server: Server, job: EvalRequest, res: JobResult, ref: Link, cand: Link,
                 stage: Path, sandbox: Path, timeout: float) -> None:
        self.server, self.job, self.res, self.ref, self.cand = server, job, res, ref, cand
        self.stage, self.sandbox, self.timeout = stage, sandbox, timeout
        self.deadline_ref = time.monotonic() + max(timeout, 600.0)
        self.saved: list[tuple[int, int]] = []
        self.null_s = 0.0
        self.dev_fd = -1
        self.inputs_fd = -1     # the reference's shelf of inputs (`inbox`), until passed on
        self.fill_s = 0.0       # waits on the reference filling the shelf

    def _sample_seed(self, k: int, i: int) -> int:
        """The seed of the positions a large timed output of round k, repetition i is judged at (`outbox`)."""
        return self.server._seeds(3, k, i + 1)[i]

    def _seeds_of(self, kind: int) -> Any:
        return lambda k, r: {"stage": k, "seeds": self.server._seeds(kind, k, r)}

    def _reply(self, kind: type[R]) -> R | ReferenceFailure:
        """The reference's next reply, typed (`trusted_messages.reference_reply`): `kind`, or its failure in
        its place. One outside its type or its phase ends the job as `infra_error` with one line."""
        try:
            return reference_reply(self.ref.recv(self.deadline_ref, expect=kind.KIND), kind)
        except (ProtocolError, WireError, RecursionError) as exc:  # the link's parse of a line nested too deep
            raise _malformed(exc) from None

    def prepare(self) -> None:
        srv, job, res = self.server, self.job, self.res
        self.ref.send(ReferenceJob(
            device=srv.device, spec_path=job.spec_path, overrides=job.overrides or {}, trials=job.trials,
            shapes=job.shapes, stage=str(self.stage), seed=srv.plan_seed,
            # judged outputs come back through a file this trusted process makes and holds open
            outbox_path=str(self.sandbox / _outbox.FILE_NAME) if srv.settings.outbox else None).to_wire())
        prep = self._reply(Prepared)
        if isinstance(prep, ReferenceFailure):
            if prep.spec_error:
                raise _End("bad_spec", prep.reference_error)
            raise _End("bad_spec", "the spec's Model or inputs failed: " + prep.reference_error)
        self.prep = prep
        self.dev_fd = self._device_outbox(prep.outbox)
        if prep.outbox and prep.outbox.get("device_error"):
            res.outbox_device_error = str(prep.outbox["device_error"])[:300]
        res.plan = prep.plan
        res.timing_basis = job.timing or prep.timing_basis
        res.timings_s.update(prep.timings_s)
        self.timed: int | None = prep.timed
        self.devgen = prep.devgen
        if prep.devgen_off:
            res.inputs_staged = prep.devgen_off[:200]  # why the host made them, not the GPU
        # Device time by graph replay needs the inputs made on the device (both contenders alike).
        self.graphs = self.devgen and srv.device == "cuda" and srv.settings.device_time
        device_stage = int(srv.settings.device_stage_mb * 2**20)
        self.slots = _rounds.device_slots(prep.set_bytes, int(device_stage / 2)) if self.graphs else 0
        if self.devgen:  # inputs made on the device by the reference, shared: bounded by device memory, no files
            self.plan = _rounds.RoundPlan.for_device(srv.device, prep.set_bytes, device_stage)
        else:
            self.plan = _rounds.RoundPlan.for_device(srv.device, prep.set_bytes, int(srv.settings.stage_mb * 2**20),
                                                     int(srv.settings.stage_total_mb * 2**20))

    def _device_outbox(self, box: dict[str, Any] | None) -> int:
        """The descriptor of the reference's device memory for the outbox (`devmem`), -1 without one: the
        candidate then writes the file (`box` loses its `device_bytes`)."""
        if not box or not box.get("device_bytes"):
            return -1
        try:
            fds = _descriptors_from(self.ref.sock)
            if len(fds) == 1:
                return fds[0]
            for fd in fds:
                os.close(fd)
        except OSError as exc:
            log.warning("no device outbox: %s", exc)
        box.pop("device_bytes", None)
        return -1

    def static_policy(self) -> None:
        if self.job.policy:
            found = _policy.check_source(self.job.candidate_source, self.prep.allowed_imports)
            if found:
                self.res.violations = found
                raise _End("rejected", "static policy: " + "; ".join(found[:6]))

    def baseline(self) -> None:
        srv, job, res = self.server, self.job, self.res
        if self.timed is None:
            return
        key = json.dumps([job.spec_path, job.overrides, job.shapes, srv.device, self.graphs],
                         sort_keys=True)
        if key not in srv.baselines:
            with device_clock(srv.device) as waited:  # the GPU's timed windows never overlap (clock.py)
                t1 = time.perf_counter()
                self.ref.send({"baseline": True})
                ready = self._reply(BaselineReady)
                if isinstance(ready, ReferenceFailure):
                    raise _End("bad_spec", "the spec's Model failed: " + ready.reference_error)
                try:
                    null_s = _rounds.null_round(self.ref, self.deadline_ref)
                    seeds = self._seeds_of(2)
                    stats, _, _ = _rounds.drive(self.ref, self.plan, self.deadline_ref, seeds, null_s=null_s,
                                                judge=False, record=False,
                                                device_stage=seeds if self.graphs else None,
                                                device_slots_n=self.slots)
                except _rounds.RoundFailure as e:  # the reference's failure in place of a round's reply
                    try:
                        failed = ReferenceFailure.from_wire(e.msg)
                    except WireError as exc:
                        raise _malformed(exc) from None
                    raise _End("bad_spec", "the spec's Model failed: " + failed.reference_error) from e
                res.timings_s["baseline_timing"] = time.perf_counter() - t1
            res.timings_s["clock_wait"] = res.timings_s.get("clock_wait", 0.0) + waited
            # Where the baseline's time went, beside the candidate's `rounds_*`: the reference makes its own
            # sets while it loads a round (`load_s`); what the phases leave of `baseline_timing` is the null
            # rounds and the device-time rounds (capture and 5 replays, their sets made the same way).
            for name, v in stats.pop("phases_s", {}).items():
                res.timings_s["baseline_rounds_" + name] = v
            srv.baselines[key], srv.null_s[key] = stats, null_s
        res.baseline = srv.baselines[key]
        self.null_s = srv.null_s[key]
        res.timings_s["null_round"] = self.null_s

    def candidate(self) -> dict[str, Any]:
        """Serve the candidate process until its `finished` report (returned); a broken protocol, a death,
        a timeout or the memory limit end the job."""
        srv, res, prep, plan, cand = self.server, self.res, self.prep, self.plan, self.cand
        # Its memory limit counts what it allocates itself: what the harness stages into its process (a
        # round's R sets, a trial set, their device copies' host side) comes on top.
        box = prep.outbox
        judge_total = int(box["timed_slots"]) if box else \
            int(max(3, min(1000, srv.settings.judge_mb * 2**20 // max(1, prep.set_bytes))))
        # Inputs made on the device stage nothing through host memory, but every saved output passes
        # through it (a GB output on the H200 killed honest drafts at 8 GiB): two outputs' worth on top.
        allowance = 2 * prep.set_bytes if self.devgen and srv.device == "cuda" else \
            2 * prep.set_bytes * (plan.r_max + 2)
        if cand.rss_limit:  # resident memory plus its writable tmpfs stay within the limit
            cand.rss_limit += allowance - srv.settings.sandbox_mb * 2**20
        # The sandbox's bound for this job: the outbox the reference laid out, as much again for outputs of
        # another layout (data-dependent sizes go to files), or without an outbox the judged outputs' files
        # (their inputs' bytes as a proxy), plus the candidate's own writable space.
        if box:
            judged_mb = 2 * int((box.get("layout") or {}).get("total", 0)) / 2**20
        else:
            judged_mb = (len(prep.shapes) * self.job.trials + judge_total) * prep.set_bytes / 2**20
        size_mb = int(judged_mb + srv.settings.sandbox_mb + 1)
        if srv.own_mounts and self.sandbox.is_mount() and not _sandbox.resize_box(self.sandbox, size_mb):
            log.warning("could not bound the sandbox tmpfs at %d MB", size_mb)
        deadline = time.monotonic() + self.timeout
        inputs_bytes = self._share_inputs() if self.devgen else 0
        cand_job = CandidateJob(
            device=srv.device, sandbox=str(self.sandbox), stage=str(self.stage),
            uid=srv.uid_lease.uid if srv.uid_lease else os.getuid(), spec_path=self.job.spec_path,
            shapes=prep.shapes, timed=self.timed, sig=prep.sig, allowed_ops=prep.allowed_ops,
            devgen=self.devgen, allowed_imports=list(prep.allowed_imports),
            allow_tf32=prep.allow_tf32, overrides=self.job.overrides or {}, outbox=box,
            # its writable tmpfs is host memory too: taken from what it may allocate
            mem_limit_gb=max(0.5, srv.settings.mem_limit_gb - srv.settings.sandbox_mb / 1024) + allowance / 2**30,
            inputs_bytes=inputs_bytes)
        pending = self.stage.parent / "pending"
        pending.mkdir(mode=0o700)
        # Timed sets go through the input cache only when the whole evaluation's fit in it (else it thrashes)
        # and a set is large enough that making it again costs more than writing it: every set is written, only
        # the judged ones (two a round) are read back, and each write scans the cache to evict (vector_add's
        # 33 KB sets on the CPU CI machine: 1.6-2.3 s of writes for 100 sets, where the judge's ~10 cost ms).
        staged_bytes = prep.set_bytes * (1 + plan.r_max * (plan.rounds + 2))
        stager = RoundStager(srv, self.ref, self.stage, pending, self.deadline_ref,
                             prep.set_bytes >= CACHE_MIN_SET_BYTES
                             and staged_bytes <= _input_cache_bytes(srv.settings))
        self._pass_memory(box)  # before its job: the candidate maps the memory first thing, still root
        try:
            cand.send(cand_job.to_wire())
            # Each message only in its phase: `isolated` once, first; `timing` once, for the timed shape,
            # after it; then `finished`. Anything else, a second `isolated` included, is a forged report.
            msg = cand.recv(deadline, expect="isolated")
            if msg.get("kind") == "finished":
                return msg
            res.isolation = verify_isolation(cand.watch_pid, msg["isolated"], srv.isolate)
            # Then, shape by shape, each trial's `inputs` (with shared inputs) in order, and `timing` once, after
            # the timed shape's trials; then `finished`, which may also come in place of any of them.
            for step in self._expected():
                msg = cand.recv(deadline, expect=step[0])
                if msg.get("kind") == "finished":
                    return msg
                if step[0] == "inputs":
                    if msg["inputs"] != list(step[1:]):
                        raise ProtocolError(f"inputs for {msg['inputs']}, expected {list(step[1:])}")
                    self._fill(f"trial {step[1]} {step[2]}", {"trial": list(step[1:])})
                    cand.send({"inputs": list(step[1:])})  # in the shelf now, at the shape's offsets
                    continue
                if msg["timing"] != self.timed:
                    raise ProtocolError(f"timing for shape {msg['timing']}, the timed shape is {self.timed}")
                self._timed_rounds(stager, deadline, judge_total)
            return cand.recv(deadline, expect="finished")
        except ChildGone as gone:
            status = srv._kill_and_status(cand)
            if gone.why == "timeout":
                raise _End("timeout", f"candidate exceeded the {self.timeout:g} s wall-clock limit") from gone
            if gone.why == "memory":
                raise _End("crashed", "candidate exceeded the resident memory limit "
                                      f"({srv.settings.mem_limit_gb:g} GiB beside what the harness staged)") from gone
            tail = (_tail_file(self.sandbox / "stdout.txt") + _tail_file(self.sandbox / "stderr.txt"))[-800:]
            raise _End("crashed", f"candidate process {status} before reporting (segfault, abort or "
                                  f"os._exit)\n{tail}") from gone
        except ProtocolError as e:
            srv._kill_and_status(cand)
            res.violations.append("forged_report")
            raise _End("rejected", f"the candidate process broke the harness protocol: {e}") from e
        except _rounds.RoundFailure as e:
            stager.drain()
            if "reference_error" in e.msg:
                srv._kill_and_status(cand)
                raise _End("bad_spec", "the spec's Model failed: " + e.msg["reference_error"]) from e
            return e.msg

    def _expected(self) -> list[tuple[Any, ...]]:
        """The candidate's messages after `isolated`, in their order: ("inputs", shape, trial) for each trial
        when its inputs are shared, ("timing",) after the timed shape's trials."""
        steps: list[tuple[Any, ...]] = []
        for si, shape in enumerate(self.prep.shapes):
            if self.devgen:
                steps.extend(("inputs", si, t) for t in range(len(shape["trials"])))
            if si == self.timed:
                steps.append(("timing",))
        return steps

    def _share_inputs(self) -> int:
        """The reference's shelf of inputs (`inbox`), made now for a round's sets (wall-clock or device) and
        its descriptor taken from the reference's socket: its size in bytes. A shelf that cannot be made
        after the probe said it could is the harness's failure (with the driver's words: out of memory)."""
        self.ref.send({"share_inputs": max(self.plan.r_max, self.slots, 1)})
        shared = self._reply(InputsShared)
        if isinstance(shared, ReferenceFailure):
            raise _End("infra_error", "the reference could not share the inputs: " + shared.reference_error[:2000])
        try:
            fds = _descriptors_from(self.ref.sock)
        except OSError as exc:
            raise _End("infra_error", f"the shared inputs' descriptor did not arrive: {exc}") from exc
        if len(fds) != 1:
            for fd in fds:
                os.close(fd)
            raise _End("infra_error", "the shared inputs' descriptor did not arrive")
        self.inputs_fd = fds[0]
        return shared.shared

    def _pass_memory(self, box: dict[str, Any] | None) -> None:
        """The reference's shared memory, passed to the candidate in one message before its job: the outbox's
        device memory (tag `o`) and the shelf of inputs (tag `i`), each where there is one."""
        tags, fds = b"", []
        if self.dev_fd >= 0:
            tags, fds = tags + b"o", fds + [self.dev_fd]
        if self.inputs_fd >= 0:
            tags, fds = tags + b"i", fds + [self.inputs_fd]
        if not fds:
            return
        sock = socket.socket(fileno=os.dup(self.cand.sock))
        try:
            socket.send_fds(sock, [tags], fds)
        except OSError as exc:
            if self.inputs_fd >= 0:
                raise _End("infra_error", f"the shared inputs were not passed on: {exc}") from exc
            log.warning("device outbox not passed on: %s", exc)
            if box is not None:
                box.pop("device_bytes", None)
        finally:
            sock.close()
            for fd in fds:
                os.close(fd)
            self.dev_fd = self.inputs_fd = -1

    def _fill(self, tag: str, order: dict[str, Any]) -> None:
        """The reference makes the sets of `order` (a trial's, or a round's seeds) into its shelf; its failure
        is the spec's (`RoundFailure` with its error, which the candidate step turns into `bad_spec`)."""
        t0 = time.perf_counter()
        self.ref.send({"fill": tag, **order})
        filled = self._reply(Filled)
        self.fill_s += time.perf_counter() - t0
        if isinstance(filled, ReferenceFailure):
            raise _rounds.RoundFailure({"reference_error": filled.reference_error})
        if filled.filled != tag:
            raise _malformed(ValueError(f"filled {filled.filled!r} when {tag!r} was asked for"))

    def _fill_round(self, k: int, r: int) -> dict[str, Any]:
        """Round k's r sets, made by the reference from seeds only it and this server know, into the shelf:
        the `stage` order names how many, never a seed."""
        self._fill(f"round {k}", {"seeds": self.server._seeds(1, k, r)})
        return {"stage": k, "sets": r}

    def _timed_rounds(self, stager: RoundStager, deadline: float, judge_total: int) -> None:
        srv, res, cand = self.server, self.res, self.cand
        after_done: list[str] = []
        # Only the timed rounds hold the device's clock: the candidate's compile and correctness trials (and
        # other jobs') overlap another evaluation's timing; the windows that give a time never do.
        with device_clock(srv.device) as waited:
            t2 = time.perf_counter()
            stats, self.saved, pviol = _rounds.drive(
                cand, self.plan, deadline, self._fill_round if self.devgen else stager, null_s=self.null_s,
                idle_check=lambda: idle_after_done(cand.watch_pid, srv.settings.after_done_cpu_ms, after_done),
                # without a mount namespace and a uid of its own the candidate could read `pending`: no staging
                ahead=stager.ahead if srv.isolate and not self.devgen else None,
                device_stage=self._fill_round if self.graphs else None, device_slots_n=self.slots,
                judge_total=judge_total,
                samples=lambda k, which: [self._sample_seed(k, i) for i in which], audit=self._audit_graph)
            res.timings_s["timing"] = time.perf_counter() - t2
        res.timings_s["clock_wait"] = res.timings_s.get("clock_wait", 0.0) + waited
        for name, v in stats.pop("phases_s", {}).items():
            res.timings_s["rounds_" + name] = v
        res.timings_s["rounds_reference_staging"] = stager.wait_s + self.fill_s
        stats["inputs"] = "made on the device" if self.devgen else "staged"
        if after_done:  # which rule fired on `done` (the first time), for the report
            stats["after_done"] = after_done[0]
            log.warning("after done: %s", after_done[0])
        res.timing = stats
        res.violations.extend(pviol)

    def _audit_graph(self, names: list[str] | None) -> list[str] | None:
        """The captured graph's kernels against the Triton kernels the candidate's source (and a spec's
        trusted packages) define: `graph_audit`. None: no audit possible, so no device clock."""
        if names is None:
            return None
        allowed = _graph_audit.triton_kernels_in(self.job.candidate_source)
        for mod in self.prep.allowed_imports:
            allowed |= _trusted_kernels(str(mod))
        found, unknown = _graph_audit.audit(names, allowed)
        if found:
            log.warning("captured graph holds kernels that are not the candidate's Triton: %s", found[:4])
            return found
        if unknown:  # neither allowed nor a known library's: no device clock, the wall clock decides
            log.warning("captured graph holds kernels the audit does not know: %s", unknown[:4])
            return None
        return found

    def accept(self, report: dict[str, Any]) -> None:
        """Its report (typed and bounded by `messages`) can fail it, never pass it: a pass needs the trusted
        verdict and the trusted clock. Its own times are information and never replace one the server took."""
        res = self.res
        res.violations = list(dict.fromkeys(res.violations + report.get("violations", [])))
        if "launches" in report:
            res.launches = report["launches"]
        if "aten_ops" in report:
            res.aten_ops = report["aten_ops"]
        for k, v in report.get("timings_s", {}).items():
            res.timings_s.setdefault(k, v)
        status = _messages.verdict_status(report.get("status", "crashed"), res.violations)
        if status != "passed":
            raise _End(status, report.get("error", "") or "rule broken")
        if self.timed is not None and res.timing is None:
            raise _End("incorrect", "the candidate finished without answering the timing rounds")

    def judge(self) -> None:
        t3 = time.perf_counter()
        timed_pairs = [(k, i, self.server._seeds(1, k, i + 1)[i], self._sample_seed(k, i)) for k, i in self.saved]
        self.ref.send({"judge": {"sandbox": str(self.sandbox), "timed": timed_pairs}})
        try:
            vmsg = self.ref.recv(self.deadline_ref, expect=Verdict.KIND)
        except (ProtocolError, ChildGone) as exc:  # the judge died on what the candidate left
            raise _End("incorrect", f"the judge could not read the candidate's outputs ({exc})") from exc
        except RecursionError as exc:  # the link's parse of a line nested too deep
            raise _malformed(exc) from None
        try:  # the reference bounds its verdict (`Verdict.bounded`): one outside its type is the server's fault
            verdict = reference_reply(vmsg, Verdict)
        except WireError as exc:
            raise _malformed(exc) from None
        if isinstance(verdict, ReferenceFailure):
            # The reference ran the same Model on the same inputs in `prepare` and the baseline: what breaks
            # it now is what the candidate left behind, so it is the candidate's failure, never `bad_spec`.
            raise _End("incorrect", "the judge failed on the candidate's outputs: " + verdict.reference_error[:2000])
        self.res.timings_s["judge"] = time.perf_counter() - t3
        self.res.judged = verdict.read
        self.res.max_abs_err = verdict.max_abs_err
        self.res.max_rel_err = verdict.max_rel_err
        if verdict.referee is not None:  # the reference's fp64 check of a mismatch: information
            self.res.referee = verdict.referee
        if not verdict.correct:
            raise _End("incorrect", "output mismatch: " + "\n".join(verdict.problems[:8]))


def _trusted_kernels(module: str) -> set[str]:
    """Triton kernels defined in a trusted package's source (a spec's `ALLOWED_IMPORTS`), read as text."""
    import importlib.util

    try:
        found = importlib.util.find_spec(module)
        if found is None or not found.origin or not found.origin.endswith(".py"):
            return set()
        with open(found.origin, encoding="utf-8") as f:
            return _graph_audit.triton_kernels_in(f.read())
    except (ImportError, ValueError, OSError):
        return set()


def _input_cache_bytes(settings: HarnessSettings) -> int:
    from workbench.harness.input_cache import InputCache

    cache = InputCache(writable=False, settings=settings)
    return cache.max_bytes if cache.dir is not None else 0


def _thread_cpu_ns(pid: int) -> int | None:
    """CPU time the process's main thread has run, in ns (`/proc/<pid>/task/<pid>/schedstat`)."""
    try:
        with open(f"/proc/{pid}/task/{pid}/schedstat") as f:
            return int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def _runnable(pid: int) -> bool:
    """Whether the main thread is running or waiting for a CPU (state R), not asleep."""
    try:
        with open(f"/proc/{pid}/task/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "R"
    except (OSError, IndexError):
        return False


def _descriptors_from(sock_fd: int) -> list[int]:
    """The file descriptors the reference passed on its socket (SCM_RIGHTS), waited for at most 30 s."""
    sock = socket.socket(fileno=os.dup(sock_fd))
    try:
        sock.settimeout(30.0)
        _, fds, _, _ = socket.recv_fds(sock, 16, 1)
    finally:
        sock.close()
    return fds


def _syscall(pid: int) -> str:
    """The main thread's system call now (`/proc/<pid>/syscall`'s first field), for a report."""
    try:
        with open(f"/proc/{pid}/syscall") as f:
            return (f.read().split() or ["?"])[0]
    except OSError:
        return "?"


def _blocked_in_read(pid: int) -> bool | None:
    """True when `pid` sits in read() on a pipe; None when /proc does not say (kernel without the file)."""
    try:
        with open(f"/proc/{pid}/syscall") as f:
            fields = f.read().split()
    except OSError:
        return None
    if not fields:
        return None
    return fields[0] == "0"
