"""The candidate process (hostile): the code that runs in the forked child that imports the candidate.

It never loads the spec, never runs its `get_inputs()` and never learns an input's seed: it confines
itself (namespaces, read-only file system, its own uid: `sandbox.py`) before anything of the candidate
exists, reads its inputs from the stage or, where the reference makes them on the device, from the
reference's shared memory (`inbox.py`), writes its outputs into the reference's outbox or its sandbox,
and answers the server's timing rounds. What it reports about itself is information (launch counts, ops,
its own violations: the second line of the rules), typed by `messages.py`; the verdict and the times come
from the trusted side (`reference_proc.py`, `job_pipeline.py`). Nothing trusted runs in this file's
process after the candidate's module is imported, except what `bound.py` bound before.
"""
from __future__ import annotations

import builtins
import importlib.util
import linecache
import os
import resource
import sys
import time
import traceback
from pathlib import Path
from typing import Any

import torch

from workbench.harness import bound, opcheck
from workbench.harness import compare as _compare
from workbench.harness import guards as _guards
from workbench.harness import inbox as _inbox
from workbench.harness import messages as _messages
from workbench.harness import outbox as _outbox
from workbench.harness import outfile as _outfile
from workbench.harness import plan as _plan
from workbench.harness import restrict as _restrict
from workbench.harness import rounds as _rounds
from workbench.harness import sandbox as _sandbox
from workbench.harness.channel import Channel, channel_recv, channel_send
from workbench.harness.compare import flatten_outputs
from workbench.harness.guards import Guard
from workbench.harness.opcheck import OpRecorder
from workbench.harness.proc_common import gpu_warm, same_values, sync, tail
from workbench.harness.settings import HarnessSettings
from workbench.harness.trusted_messages import CandidateJob
from workbench.spec import positional_signature


def _format_tb(exc: BaseException, hidden: list[str]) -> str:
    """`traceback.format_exc()` that reads no source line of the `hidden` files: the spec's, which the guards
    refuse to anyone in the candidate's process (a frame of it in a traceback), so the refusal never replaces
    the error being reported."""
    lines = ["Traceback (most recent call last):"]
    for frame, lineno in traceback.walk_tb(exc.__traceback__):
        fn = frame.f_code.co_filename
        lines.append(f'  File "{fn}", line {lineno}, in {frame.f_code.co_name}')
        if fn not in hidden and os.path.realpath(fn) not in hidden:
            src = linecache.getline(fn, lineno or 0).strip()
            if src:
                lines.append(f"    {src}")
    lines.extend(ln.rstrip("\n") for ln in traceback.format_exception_only(type(exc), exc))
    return "\n".join(lines)


_COMPILE_HINTS = ("constexpr", "must be", "incompatible", "not supported", "unsupported", "shape", "type")


def _classify(exc: BaseException) -> str:
    mod = type(exc).__module__ or ""
    if type(exc).__name__ == "InterpreterError":
        # The interpreter reports front-end errors (a GPU build's CompilationError) at run time.
        return "compile_error" if any(h in str(exc) for h in _COMPILE_HINTS) else "runtime_error"
    if isinstance(exc, (SyntaxError, ImportError, NameError)) or "triton.compiler" in mod or \
            type(exc).__name__ in ("CompilationError", "CompileTimeAssertionFailure"):
        return "compile_error"
    return "runtime_error"


def isolate(sandbox: Path, device: str, mem_limit_gb: float) -> None:
    """Own session, sandbox cwd, output to files, no secrets, caches inside the sandbox."""
    os.setsid()
    os.chdir(sandbox)
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    for fd, name in ((1, "stdout.txt"), (2, "stderr.txt")):
        f = os.open(sandbox / name, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        os.dup2(f, fd)
        os.close(f)
    sys.stdout = open(1, "w", buffering=1, closefd=False)
    sys.stderr = open(2, "w", buffering=1, closefd=False)
    from workbench.harness.environ import candidate_environ

    # allowed, not filtered: every name outside the allow-list is gone (`environ`)
    env = candidate_environ(dict(os.environ), str(sandbox))
    os.environ.clear()
    os.environ.update(env)
    (sandbox / "tmp").mkdir(exist_ok=True)
    import tempfile

    tempfile.tempdir = str(sandbox / "tmp")  # cached by the server before the fork: reset it
    sys.dont_write_bytecode = True
    if device == "cpu" and mem_limit_gb > 0:
        # An address-space cap works on the CPU platform; CUDA reserves huge virtual ranges, so
        # on the GPU the server watches resident memory instead.
        limit = _vm_size() + int(mem_limit_gb * 2**30)
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))


def _vm_size() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmSize:"):
                return int(line.split()[1]) * 1024
    return 0


def _load(path: Path, device: str) -> list[Any]:
    return list(_plan.to_device(torch.load(path, weights_only=True), device))


def _inputs_snapshot(inputs: list[Any]) -> list[Any]:
    return [x.detach().clone() if isinstance(x, torch.Tensor) else x for x in inputs]


def _exact_outputs(out: Any, guard: Guard, host: bool = True) -> list[Any]:
    """Outputs as plain, materialized tensors (CPU copies when `host`); anything else is an `output_type`
    violation."""
    outs = flatten_outputs(out)
    clean: list[Any] = []
    for o in outs:
        # `bound`: no method of the output looked up (the candidate may have added some to its class)
        if isinstance(o, bound.Tensor):
            if type(o) is not bound.Tensor:
                tag = f"output_type:{type(o).__name__}"
                if tag not in guard.violations:
                    guard.violations.append(tag)
                o = bound.as_subclass(o, bound.Tensor)
            if bound.device_type(o) == "meta" or bound.is_sparse(o):
                tag = "output_type:sparse/meta"
                if tag not in guard.violations:
                    guard.violations.append(tag)
            o = bound.detach(o)
            if host:
                o = bound.cpu(o) if bound.device_type(o) != "cpu" else bound.clone(o)  # one host copy, not two
            clean.append(o)
        else:
            clean.append(o)
    return clean


def _check_signature(sig: dict[str, Any], model_new: type) -> str | None:
    for meth in ("__init__", "forward"):
        na, va = sig[meth]
        nb, vb = positional_signature(getattr(model_new, meth))
        if vb or na == nb or (va and nb >= na):
            continue
        return f"ModelNew.{meth} takes {nb} positional arguments, Model.{meth} takes {na}"
    return None


def _flag(guard: Guard, tag: str) -> None:
    if tag not in guard.violations:
        guard.violations.append(tag)


def run_candidate(job: CandidateJob, chan: Channel, iso: _sandbox.Isolation | None, settings: HarnessSettings,
                  sock: int = -1) -> None:
    """Entry point of the candidate process: confine, guard, import, run the trials, serve the timed rounds."""
    run = _CandidateRun(job, chan, iso, settings, sock)
    run.confine()      # 1. namespaces, read-only view, its own uid: before anything of the candidate exists
    run.guard_up()     # 2. the second line: audit hook, patch detector, wrappers
    try:
        model_new = run.import_candidate()  # 3. its module, its `ModelNew`, the signatures
        if model_new is None:
            return
        for si, shape in enumerate(job.shapes):
            model = run.trials(si, shape, model_new)  # 4. every trial of every shape, outputs saved
            if run.guard.violations:
                break
            if si == job.timed:
                run.timed_rounds(si, shape, model)  # 5. the rounds the server clocks
        run.msg["aten_ops"] = sorted(run.all_ops)
        run.finish("passed")
    except PermissionError as exc:
        run.finish("rejected", f"{run.where}: {exc}")
    except BaseException as exc:  # the candidate's failure is the result, never a harness crash
        status = "timeout" if isinstance(exc, KeyboardInterrupt) else _classify(exc)
        if isinstance(exc, MemoryError):
            status = "crashed"
        run.finish(status, f"{run.where}: {type(exc).__name__}: {exc}\n{tail(_format_tb(exc, run.guard.private))}")


class _CandidateRun:
    """The candidate process's state across its numbered steps (`run_candidate`)."""

    def __init__(self, job: CandidateJob, chan: Channel, iso: _sandbox.Isolation | None, settings: HarnessSettings,
                 sock: int = -1) -> None:
        self.job, self.chan, self.iso, self.sock, self.settings = job, chan, iso, sock, settings
        self.msg: dict[str, Any] = {"finished": True, "status": "passed", "violations": [], "error": "",
                                    "timings_s": {}}
        self.t_start = time.perf_counter()
        self.device = job.device
        self.sandbox, self.stage = Path(job.sandbox), Path(job.stage)
        self.where = "import"
        self.all_ops: set[str] = set()
        self.allowed = frozenset(job.allowed_ops)
        self.first_call = True
        self.outbox: _outbox.Writer | None = None
        self.shared: Any = None
        self.trial_slot = 0   # slots in the order the reference laid them out: trials, then timed outputs
        self.trial_outputs: int | None = None  # the fewest output tensors a judged trial returned
        self.timed_slot = int((job.outbox or {}).get("trial_slots", 0))

    def confine(self) -> None:
        job, iso = self.job, self.iso
        self.shared, self.inputs = self._map_shared()  # the reference's memory, while still root
        # each shape's input layout in the shelf (`inbox`), decoded before any candidate code exists
        self.layouts = [_inbox.SetLayout.from_dict(sh["inputs"]) for sh in job.shapes] \
            if self.inputs is not None else None
        _plan.set_tf32(job.allow_tf32)  # the candidate is held to the reference's fp32 rule
        if iso is not None:
            _sandbox.confine_filesystem(iso, self.sandbox, self.stage, job.uid, job.allowed_imports)
            if "mount" in iso.namespaces:
                self.sandbox, self.stage = Path(_sandbox.SANDBOX_MOUNT), Path(_sandbox.STAGE_MOUNT)
        isolate(self.sandbox, self.device, job.mem_limit_gb)
        # Nothing the server held open (a lock file, a log, a socket) stays reachable: only the channel.
        _sandbox.close_inherited_fds({self.chan.cmd_fd, self.chan.report_fd}, iso)
        self.outbox = self._open_outbox()
        if iso is not None:
            for p in (self.sandbox / "tmp", self.sandbox / "stdout.txt", self.sandbox / "stderr.txt"):
                os.chown(p, job.uid, job.uid)  # made as root above: the candidate's uid writes them
            # the file-size limit leaves room for the outbox, which holds GB outputs at published sizes
            total = int(((job.outbox or {}).get("layout") or {}).get("total", 0))
            _sandbox.set_limits(file_size_gb=max(8.0, total / 2**30 + 1.0))
            _sandbox.drop_privileges(iso, job.uid)
        self.chan.send({"isolated": iso.to_dict() if iso is not None else None})

    def _open_outbox(self) -> _outbox.Writer | None:
        """The reference's outbox, opened while this process is still root and no candidate code exists."""
        desc = self.job.outbox
        if not desc:
            return None
        try:
            return _outbox.Writer(self.sandbox / _outbox.FILE_NAME, _outbox.Layout.from_dict(desc["layout"]),
                                  self.device, self.shared)
        except (OSError, KeyError, ValueError, TypeError):  # the judge then reads files, as without one
            return None

    def _map_shared(self) -> tuple[Any, Any]:
        """The memory the server passed over the socket in one message, mapped: the outbox's device memory
        (`devmem`; None: the file it is) and the reference's shelf of inputs (`inbox`; None: staged files)."""
        desc = self.job.outbox or {}
        want = {"o": int(desc.get("device_bytes") or 0), "i": int(self.job.inputs_bytes) if self.job.devgen else 0}
        if self.sock < 0:
            if want["i"]:
                raise RuntimeError("the shared inputs did not arrive: no socket")
            return None, None
        import socket

        got: dict[str, int] = {}
        with socket.socket(fileno=self.sock) as sock:
            self.sock = -1
            if not any(want.values()):
                return None, None
            sock.settimeout(30.0)
            try:
                data, fds, _, _ = socket.recv_fds(sock, 16, 2)
                got = dict(zip(data.decode("ascii", "replace"), fds))
            except OSError as exc:
                print(f"shared memory not received: {exc}", file=sys.stderr)
        shared = inputs = None
        if "o" in got:
            try:
                from workbench.harness import devmem

                shared = devmem.Shared.open(got.pop("o"), want["o"])
            except Exception as exc:  # noqa: BLE001 - the file, then: slower, not wrong
                print(f"device outbox not mapped: {type(exc).__name__}: {exc}", file=sys.stderr)
        if want["i"]:
            if "i" not in got:
                raise RuntimeError("the shared inputs did not arrive")
            inputs = _inbox.open_shared(self.device, got.pop("i"), want["i"])
        for fd in got.values():
            os.close(fd)
        return shared, inputs

    def save(self, slot: int | None, out: Any, fname: str, seed: int | None = None) -> None:
        """A judged output into its outbox slot (a large one: its values at the positions of `seed`); one of
        another layout into a file the judge reads bounded."""
        clean = _exact_outputs(out, self.guard, host=False)
        if self.outbox is not None and slot is not None and self.outbox.put(slot, clean, seed):
            return
        _outfile.write(self.sandbox / fname, clean)  # flat bytes the judge parses without trusting them

    def guard_up(self) -> None:
        self.cand_path = self.sandbox / "candidate.py"
        guard = self.guard = Guard(self.sandbox, self.cand_path, private_paths=[Path(self.job.spec_path)])
        opcheck.install_triton_wrappers()
        opcheck.install_host_read_counters()  # before the patch detector's snapshot: the wrappers are its base
        _guards.wrap_thread_start(guard)
        _guards.wrap_side_streams(guard, torch)
        import triton
        import triton.runtime.autotuner
        import triton.runtime.jit
        import triton.testing

        for label, obj in [("torch", torch), ("torch.Tensor", torch.Tensor),
                           ("torch.nn.functional", torch.nn.functional), ("torch.cuda", torch.cuda),
                           ("torch.nn.Module", torch.nn.Module), ("time", time), ("triton", triton),
                           ("triton.testing", triton.testing), ("os", os), ("builtins", builtins),
                           ("JITFunction", triton.runtime.jit.JITFunction),
                           ("Autotuner", triton.runtime.autotuner.Autotuner), ("harness.opcheck", opcheck),
                           ("harness.compare", _compare), ("harness.plan", _plan), ("harness.rounds", _rounds),
                           ("harness.inbox", _inbox),
                           ("harness.guards", _guards), ("Guard", Guard), ("OpRecorder", OpRecorder),
                           ("Channel", Channel), ("CandidateJob", CandidateJob)]:
            guard.watch(label, obj)
        if "triton.runtime.interpreter" in sys.modules:
            guard.watch("InterpretedFunction", sys.modules["triton.runtime.interpreter"].InterpretedFunction)
        guard.snapshot()

    def finish(self, status: str, error: str = "") -> None:
        msg, guard = self.msg, self.guard
        guard.active = False
        guard.check_patches()
        msg["violations"] = list(guard.violations)
        msg["launches"] = opcheck.STATE.launches
        if msg["violations"] and status in ("passed", "runtime_error", "incorrect"):
            status = "rejected"
        msg["status"] = status
        if error:
            msg["error"] = error
        msg["timings_s"]["candidate_total"] = time.perf_counter() - self.t_start
        self.chan.send(_messages.report("finished", **msg))

    def import_candidate(self) -> type | None:
        """`ModelNew`, or None once the failure is reported."""
        if self.settings.guards:  # WB_GUARDS=off: a trusted diagnosis of the guards' own cost
            self.guard.install()
        t0 = time.perf_counter()
        if self.settings.guards:  # the run-time allow-list (`restrict.py`)
            rules = _restrict.Rules(self.guard.refuse, tuple(self.job.allowed_imports))
            try:
                module = _restrict.load_module(self.cand_path.read_bytes(), str(self.cand_path), rules)
            except _restrict.Refused as exc:
                _flag(self.guard, f"{exc.rule}:{exc.what}"[:160])
                self.finish("rejected", f"import: refused by the run-time allow-list: {exc.rule}:{exc.what}")
                return None
        else:
            mspec = importlib.util.spec_from_file_location("candidate", self.cand_path)
            module = importlib.util.module_from_spec(mspec)  # type: ignore[arg-type]
            sys.modules["candidate"] = module
            mspec.loader.exec_module(module)  # type: ignore[union-attr]
        model_new = getattr(module, "ModelNew", None)
        if not isinstance(model_new, type):
            self.finish("compile_error", "candidate defines no `ModelNew` class")
            return None
        bad_sig = _check_signature(self.job.sig, model_new)
        if bad_sig:
            self.finish("compile_error", f"signature mismatch: {bad_sig}")
            return None
        self.msg["timings_s"]["import"] = time.perf_counter() - t0
        return model_new

    def reference_outputs(self, slot: int, out: Any) -> int:
        """The output tensors a judged trial may size by a count each: the reference's, from the outbox it
        laid out (`outbox.Layout`: one entry per output of that slot); without an outbox the trial's own,
        which the judge compares with the reference's count, so padding fails the trial anyway."""
        try:
            return len(self.job.outbox["layout"]["slots"][slot])  # type: ignore[index]
        except (TypeError, KeyError, IndexError):
            return len(flatten_outputs(out))

    def check_ops(self, rec: OpRecorder, outputs: int) -> None:
        self.all_ops.update(rec.ops)
        for op in rec.forbidden(self.allowed):
            _flag(self.guard, f"forbidden_torch_op:{op}")
        # values read into Python per call: a constant plus one per output tensor (`opcheck.VALUES_PER_OUTPUT`)
        for v in rec.python_compute(outputs):
            _flag(self.guard, v)

    def trials(self, si: int, shape: dict[str, Any], model_new: type) -> Any:
        """Build the model, run every trial (the last refilling the previous trial's buffers), save outputs."""
        guard, device, timings = self.guard, self.device, self.msg["timings_s"]
        name = shape["name"]
        self.where = f"shape {name}: build"
        init_inputs = _load(self.stage / shape["init"], device)
        torch.manual_seed(shape["model_seed"])
        model = model_new(*init_inputs).to(device)
        buffers: list[Any] | None = None
        for t, fname in enumerate(shape["trials"]):
            self.where = f"shape {name}: trial {t}"
            fresh = self.shared_trial(si, t) if self.layouts is not None else _load(self.stage / fname, device)
            last = t == len(shape["trials"]) - 1
            if self.layouts is not None:
                inputs = fresh  # every trial at the shelf's same offsets: the previous trial's buffers, refilled
            elif last and t > 0 and buffers is not None and _plan.same_layout(buffers, fresh):
                # Same buffers, new content: a candidate memoizing on pointers returns stale results.
                _plan.copy_into(buffers, fresh)
                inputs = buffers
            else:
                inputs = fresh
            before = _inputs_snapshot(inputs)
            rec = OpRecorder(poison=t % 2)
            t1 = time.perf_counter()
            with torch.no_grad(), rec:
                out = model(*inputs)
            sync(device)
            key = "compile_and_first_call" if self.first_call else "correctness"
            timings[key] = timings.get(key, 0.0) + time.perf_counter() - t1
            self.first_call = False
            guard.check_patches()
            outputs = self.reference_outputs(self.trial_slot, out)
            self.trial_outputs = outputs if self.trial_outputs is None else min(self.trial_outputs, outputs)
            self.check_ops(rec, outputs)
            for i, (a, b) in enumerate(zip(before, inputs)):
                if not same_values(a, b):
                    _flag(guard, f"input_mutated:arg{i}")
            samples = (self.job.outbox or {}).get("trial_samples") or []
            self.save(self.trial_slot, out, f"out_{si}_{t}.pt",
                      samples[self.trial_slot] if self.trial_slot < len(samples) else None)
            self.trial_slot += 1
            buffers = inputs
        if opcheck.STATE.launches == 0:
            _flag(guard, "no_triton_kernel")
        return model

    def shared_trial(self, si: int, t: int) -> list[Any]:
        """Trial t of shape si's inputs: asked of the server (`inputs`, in its phase), made by the reference
        into its shelf, read as views of it."""
        channel_send(self.chan, {"inputs": [si, t]})
        reply = channel_recv(self.chan)
        if reply.get("inputs") != [si, t]:
            raise RuntimeError(f"the server answered {str(reply)[:80]} to a request for trial inputs")
        return _inbox.views(self.inputs.tensor, self.layouts[si], 1)[0]

    def timed_rounds(self, si: int, shape: dict[str, Any], model: Any) -> None:
        device, stage, guard, layouts = self.device, self.stage, self.guard, self.layouts
        self.where = f"shape {shape['name']}: timing"
        self.chan.send({"timing": si})
        t2 = time.perf_counter()
        reader = _plan.RawReader(device)

        def load(order: dict[str, Any]) -> list[list[Any]]:
            if layouts is not None:  # made by the reference into its shelf: views of its first sets
                return _inbox.views(self.inputs.tensor, layouts[si], int(order["sets"]))
            if order["file"].endswith(".raw"):
                return reader.read(stage / order["file"])
            sets = torch.load(stage / order["file"], weights_only=True, mmap=True)  # no host copy
            return [list(_plan.to_device(s, device)) for s in sets]

        def save(k: int, which: list[int], outs: list[Any], seeds: list[int] | None) -> None:
            for n, i in enumerate(which):
                seed = int(seeds[n]) if seeds and n < len(seeds) else None
                self.save(self.timed_slot, outs[i], f"t_{k}_{i}.pt", seed)
                self.timed_slot += 1

        next_call = opcheck.next_call

        def call(inp: list[Any]) -> Any:
            next_call()  # a recorded round runs R calls: the values read into Python are bounded per call
            return model(*inp)

        recs = _rounds.serve(self.chan, call, load, save, lambda: sync(device),
                             OpRecorder, warm=lambda: gpu_warm(device, self.settings.warm_ms))
        self.msg["timings_s"]["timing"] = time.perf_counter() - t2
        guard.check_patches()
        for rec in recs:
            self.check_ops(rec, self.trial_outputs or 0)  # the judged trials' count, not a timed call's own
