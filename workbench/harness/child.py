"""Code that runs in the forked children: the candidate process (hostile) and the reference process (trusted).

The reference process loads the spec, builds every input from seeds the candidate never learns, writes
them into the job's stage directory, times the baseline under the server's clock, and at the end judges
the outputs the candidate left in its sandbox, after the candidate is dead.

The candidate process never loads the spec: it confines itself (namespaces, read-only file system, its
own uid: `sandbox.py`) before anything of the candidate exists, reads its inputs from the stage, writes
its outputs into its sandbox, and answers the server's timing rounds. What it reports about itself is
information (launch counts, ops, its own violations: the second line of the rules); the verdict and the
times come from the trusted side.
"""
from __future__ import annotations

import builtins
import importlib.util
import linecache
import os
import random
import resource
import secrets
import sys
import time
import traceback
from pathlib import Path
from typing import Any

import torch

from workbench.harness import bound, opcheck
from workbench.harness import compare as _compare
from workbench.harness import guards as _guards
from workbench.harness import messages as _messages
from workbench.harness import outbox as _outbox
from workbench.harness import outfile as _outfile
from workbench.harness import plan as _plan
from workbench.harness import restrict as _restrict
from workbench.harness import rounds as _rounds
from workbench.harness import safeio as _safeio
from workbench.harness import sandbox as _sandbox
from workbench.harness.channel import Channel
from workbench.harness.compare import compare_outputs, flatten_outputs
from workbench.harness.guards import Guard
from workbench.harness.input_cache import InputCache
from workbench.harness.opcheck import OpRecorder
from workbench.harness.referee import fp64_referee
from workbench.spec import SpecError, load_spec, positional_signature

_TB_LINES = 25


def _tail(tb: str, n: int = _TB_LINES) -> str:
    return "\n".join(tb.strip().splitlines()[-n:])


def _format_tb(exc: BaseException, hidden: list[str]) -> str:
    """`traceback.format_exc()` that reads no source line of the `hidden` files: the spec's, which the guards
    refuse to anyone in the candidate's process (its inputs, made here on the GPU, put its frames in a
    traceback), so the refusal never replaces the error being reported."""
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


def _sync(device: str) -> None:
    bound.synchronize(device)  # bound at import: no candidate code runs in it, before `done` or after


_WARM: dict[str, Any] = {}
_MM = torch.mm  # bound at import: the warm-up before `go` runs no function a candidate put on torch


def gpu_warm(device: str, matmuls: int = 6) -> None:
    """Keep the GPU busy before a round: after seconds of host-side staging its clocks are down, and a
    round of a few short repetitions would run at idle clocks. Both contenders run it, the same way:
    `matmuls` fp16 4096^3 products (about 1 ms on an H200), or with `WB_WARM_MS` set, products until that
    many milliseconds of wall time have passed (a diagnosis knob of the timing bias, docs/harness.md)."""
    if device != "cuda":
        return
    if "w" not in _WARM:
        _WARM["w"] = torch.ones(4096, 4096, dtype=torch.float16, device="cuda")
        _WARM["o"] = torch.empty_like(_WARM["w"])
    warm_s = float(os.environ.get("WB_WARM_MS", "0") or 0) / 1000.0
    if warm_s <= 0:
        for _ in range(matmuls):
            _MM(_WARM["w"], _WARM["w"], out=_WARM["o"])
        return
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < warm_s:
        for _ in range(4):
            _MM(_WARM["w"], _WARM["w"], out=_WARM["o"])
        torch.cuda.synchronize()


def _load(path: Path, device: str) -> list[Any]:
    return list(_plan.to_device(torch.load(path, weights_only=True), device))


def _inputs_snapshot(inputs: list[Any]) -> list[Any]:
    return [x.detach().clone() if isinstance(x, torch.Tensor) else x for x in inputs]


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, torch.Tensor):
        if a.dtype.is_floating_point:
            return bool(torch.equal(torch.nan_to_num(a, nan=0.0), torch.nan_to_num(b, nan=0.0))
                        and torch.equal(torch.isnan(a), torch.isnan(b)))
        return bool(torch.equal(a, b))
    return True


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


def run_candidate(job: dict[str, Any], chan: Channel, iso: _sandbox.Isolation | None, sock: int = -1) -> None:
    """Entry point of the candidate process: confine, guard, import, run the trials, serve the timed rounds."""
    run = _CandidateRun(job, chan, iso, sock)
    run.confine()      # 1. namespaces, read-only view, its own uid: before anything of the candidate exists
    run.guard_up()     # 2. the second line: audit hook, patch detector, wrappers
    try:
        model_new = run.import_candidate()  # 3. its module, its `ModelNew`, the signatures
        if model_new is None:
            return
        for si, shape in enumerate(job["shapes"]):
            model = run.trials(si, shape, model_new)  # 4. every trial of every shape, outputs saved
            if run.guard.violations:
                break
            if si == job.get("timed"):
                run.timed_rounds(si, shape, model)  # 5. the rounds the server clocks
        run.msg["aten_ops"] = sorted(run.all_ops)
        run.finish("passed")
    except PermissionError as exc:
        run.finish("rejected", f"{run.where}: {exc}")
    except BaseException as exc:  # the candidate's failure is the result, never a harness crash
        status = "timeout" if isinstance(exc, KeyboardInterrupt) else _classify(exc)
        if isinstance(exc, MemoryError):
            status = "crashed"
        run.finish(status, f"{run.where}: {type(exc).__name__}: {exc}\n{_tail(_format_tb(exc, run.guard.private))}")


class _CandidateRun:
    """The candidate process's state across its numbered steps (`run_candidate`)."""

    def __init__(self, job: dict[str, Any], chan: Channel, iso: _sandbox.Isolation | None, sock: int = -1) -> None:
        self.job, self.chan, self.iso, self.sock = job, chan, iso, sock
        self.msg: dict[str, Any] = {"finished": True, "status": "passed", "violations": [], "error": "",
                                    "timings_s": {}}
        self.t_start = time.perf_counter()
        self.device = job["device"]
        self.sandbox, self.stage = Path(job["sandbox"]), Path(job["stage"])
        self.where = "import"
        self.all_ops: set[str] = set()
        self.allowed = frozenset(job.get("allowed_ops", []))
        self.first_call = True
        self.outbox: _outbox.Writer | None = None
        self.shared: Any = None
        self.trial_slot = 0   # slots in the order the reference laid them out: trials, then timed outputs
        self.timed_slot = int((job.get("outbox") or {}).get("trial_slots", 0))

    def confine(self) -> None:
        job, iso = self.job, self.iso
        self.shared = self._map_device_outbox()  # the reference's device memory, while still root
        self.gen = _InputMaker(job) if job.get("devgen") else None  # loads the spec before it is out of sight
        _plan.set_tf32(bool(job.get("allow_tf32")))  # the candidate is held to the reference's fp32 rule
        if iso is not None:
            _sandbox.confine_filesystem(iso, self.sandbox, self.stage, job["uid"], job.get("allowed_imports", ()))
            if "mount" in iso.namespaces:
                self.sandbox, self.stage = Path(_sandbox.SANDBOX_MOUNT), Path(_sandbox.STAGE_MOUNT)
        isolate(self.sandbox, self.device, job.get("mem_limit_gb", 8.0))
        # Nothing the server held open (a lock file, a log, a socket) stays reachable: only the channel.
        _sandbox.close_inherited_fds({self.chan.cmd_fd, self.chan.report_fd}, iso)
        self.outbox = self._open_outbox()
        if iso is not None:
            for p in (self.sandbox / "tmp", self.sandbox / "stdout.txt", self.sandbox / "stderr.txt"):
                os.chown(p, job["uid"], job["uid"])  # made as root above: the candidate's uid writes them
            # the file-size limit leaves room for the outbox, which holds GB outputs at published sizes
            total = int(((job.get("outbox") or {}).get("layout") or {}).get("total", 0))
            _sandbox.set_limits(file_size_gb=max(8.0, total / 2**30 + 1.0))
            _sandbox.drop_privileges(iso, job["uid"])
        self.chan.send({"isolated": iso.to_dict() if iso is not None else None})

    def _open_outbox(self) -> _outbox.Writer | None:
        """The reference's outbox, opened while this process is still root and no candidate code exists."""
        desc = self.job.get("outbox")
        if not desc:
            return None
        try:
            return _outbox.Writer(self.sandbox / _outbox.FILE_NAME, _outbox.Layout.from_dict(desc["layout"]),
                                  self.device, self.shared)
        except (OSError, KeyError, ValueError, TypeError):  # the judge then reads files, as without one
            return None

    def _map_device_outbox(self) -> Any:
        """The device memory the server passed over the socket (`devmem`), mapped; None: the file it is."""
        desc = self.job.get("outbox") or {}
        if self.sock < 0:
            return None
        import socket

        try:
            with socket.socket(fileno=self.sock) as sock:
                self.sock = -1
                if not desc.get("device_bytes"):
                    return None
                sock.settimeout(30.0)
                _, fds, _, _ = socket.recv_fds(sock, 16, 1)
            if len(fds) != 1:
                return None
            from workbench.harness import devmem

            return devmem.Shared.open(fds[0], int(desc["device_bytes"]))
        except Exception as exc:  # noqa: BLE001 - the file, then: slower, not wrong
            print(f"device outbox not mapped: {type(exc).__name__}: {exc}", file=sys.stderr)
            return None

    def save(self, slot: int | None, out: Any, fname: str, seed: int | None = None) -> None:
        """A judged output into its outbox slot (a large one: its values at the positions of `seed`); one of
        another layout into a file the judge reads bounded."""
        clean = _exact_outputs(out, self.guard, host=False)
        if self.outbox is not None and slot is not None and self.outbox.put(slot, clean, seed):
            return
        _outfile.write(self.sandbox / fname, clean)  # flat bytes the judge parses without trusting them

    def guard_up(self) -> None:
        self.cand_path = self.sandbox / "candidate.py"
        guard = self.guard = Guard(self.sandbox, self.cand_path, private_paths=[Path(self.job["spec_path"])])
        if self.gen is not None:
            self.gen.guard = guard
        opcheck.install_triton_wrappers()
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
                           ("harness.guards", _guards), ("Guard", Guard), ("OpRecorder", OpRecorder),
                           ("Channel", Channel)]:
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
        if os.environ.get("WB_GUARDS", "on") != "off":  # off: a trusted diagnosis of the guards' own cost
            self.guard.install()
        t0 = time.perf_counter()
        if os.environ.get("WB_GUARDS", "on") != "off":  # the run-time allow-list (`restrict.py`)
            rules = _restrict.Rules(self.guard.refuse, tuple(self.job.get("allowed_imports", ())))
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
        bad_sig = _check_signature(self.job["sig"], model_new)
        if bad_sig:
            self.finish("compile_error", f"signature mismatch: {bad_sig}")
            return None
        self.msg["timings_s"]["import"] = time.perf_counter() - t0
        return model_new

    def check_ops(self, rec: OpRecorder) -> None:
        self.all_ops.update(rec.ops)
        for op in rec.forbidden(self.allowed):
            _flag(self.guard, f"forbidden_torch_op:{op}")

    def trials(self, si: int, shape: dict[str, Any], model_new: type) -> Any:
        """Build the model, run every trial (the last refilling the previous trial's buffers), save outputs."""
        guard, device, gen, timings = self.guard, self.device, self.gen, self.msg["timings_s"]
        name = shape["name"]
        self.where = f"shape {name}: build"
        init_inputs = _load(self.stage / shape["init"], device)
        if gen is not None:
            gen.shape(si)
        torch.manual_seed(shape["model_seed"])
        model = model_new(*init_inputs).to(device)
        buffers: list[Any] | None = None
        for t, fname in enumerate(shape["trials"]):
            self.where = f"shape {name}: trial {t}"
            fresh = gen.make(fname) if gen is not None else _load(self.stage / fname, device)
            last = t == len(shape["trials"]) - 1
            if last and t > 0 and buffers is not None and _plan.same_layout(buffers, fresh):
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
            _sync(device)
            key = "compile_and_first_call" if self.first_call else "correctness"
            timings[key] = timings.get(key, 0.0) + time.perf_counter() - t1
            self.first_call = False
            guard.check_patches()
            self.check_ops(rec)
            for i, (a, b) in enumerate(zip(before, inputs)):
                if not _same(a, b):
                    _flag(guard, f"input_mutated:arg{i}")
            samples = (self.job.get("outbox") or {}).get("trial_samples") or []
            self.save(self.trial_slot, out, f"out_{si}_{t}.pt",
                      samples[self.trial_slot] if self.trial_slot < len(samples) else None)
            self.trial_slot += 1
            buffers = inputs
        if opcheck.STATE.launches == 0:
            _flag(guard, "no_triton_kernel")
        return model

    def timed_rounds(self, si: int, shape: dict[str, Any], model: Any) -> None:
        device, gen, stage, guard = self.device, self.gen, self.stage, self.guard
        self.where = f"shape {shape['name']}: timing"
        self.chan.send({"timing": si})
        t2 = time.perf_counter()
        reader = _plan.RawReader(device)

        def load(order: dict[str, Any]) -> list[list[Any]]:
            if gen is not None:  # made here, on the device, from the round's seeds
                return [gen.make(s) for s in order["seeds"]]
            if order["file"].endswith(".raw"):
                return reader.read(stage / order["file"])
            sets = torch.load(stage / order["file"], weights_only=True, mmap=True)  # no host copy
            return [list(_plan.to_device(s, device)) for s in sets]

        def save(k: int, which: list[int], outs: list[Any], seeds: list[int] | None) -> None:
            for n, i in enumerate(which):
                seed = int(seeds[n]) if seeds and n < len(seeds) else None
                self.save(self.timed_slot, outs[i], f"t_{k}_{i}.pt", seed)
                self.timed_slot += 1

        recs = _rounds.serve(self.chan, lambda inp: model(*inp), load, save, lambda: _sync(device),
                             OpRecorder, warm=lambda: gpu_warm(device))
        self.msg["timings_s"]["timing"] = time.perf_counter() - t2
        guard.check_patches()
        for rec in recs:
            self.check_ops(rec)


class _InputMaker:
    """The candidate process's inputs made on its device from seeds (`plan.generate_on`), when the
    reference process found the spec's `get_inputs()` can (`_Reference._device_generation`). The spec is
    loaded before the process confines itself and before any candidate code exists; the candidate's own
    code cannot import it (static policy) or open its file (guards)."""

    def __init__(self, job: dict[str, Any]) -> None:
        self.device = job["device"]
        self.spec = load_spec(job["spec_path"], job.get("overrides") or {})
        self.base = self.spec.constants()
        self.shapes = [sh["over"] for sh in job["shapes"]]
        self.guard: Guard | None = None

    def shape(self, si: int) -> None:
        _plan.apply_shape(self.spec, self.base, self.shapes[si])

    def make(self, seed: int) -> list[Any]:
        # The spec's own code runs here, not the candidate's: the guards (which refuse any read of the
        # spec's file, a warning's source line included) stand aside while it does.
        was = self.guard.active if self.guard is not None else False
        if self.guard is not None:
            self.guard.active = False
        try:
            return _plan.generate_on(self.spec, int(seed), self.device)
        finally:
            # `torch.initial_seed()` would otherwise say the seed these inputs came from: a fresh one from
            # the OS CSPRNG replaces it (and the generators' state) before candidate code runs again
            torch.manual_seed(secrets.randbits(63))
            if self.guard is not None:
                self.guard.active = was


class _FileOpens:
    """The files opened while it is entered (an audit hook, installed once, in the trusted reference's
    process only: the candidate's has the guards' own)."""
    _current: list[str] | None = None
    _installed = False

    def __enter__(self) -> _FileOpens:
        if not _FileOpens._installed:
            sys.addaudithook(_FileOpens._hook)
            _FileOpens._installed = True
        self.paths: list[str] = []
        _FileOpens._current = self.paths
        return self

    def __exit__(self, *exc: object) -> None:
        _FileOpens._current = None

    @staticmethod
    def _hook(event: str, args: tuple) -> None:
        if event == "open" and _FileOpens._current is not None and args and isinstance(args[0], (str, bytes)):
            _FileOpens._current.append(os.fsdecode(args[0]))


class _Reference:
    """The trusted reference process's state for one job."""

    def __init__(self, job: dict[str, Any], sock: int = -1) -> None:
        self.job, self.sock = job, sock
        self.device = job["device"]
        self.stage = Path(job["stage"])
        self.spec = load_spec(job["spec_path"], job.get("overrides") or {})
        _plan.set_tf32(self.spec.allow_tf32)  # the judge's reference computes in IEEE fp32 (spec: ALLOW_TF32)
        self.plan = _plan.make_plan(self.spec, self.device, job["trials"], job.get("shapes"), job["seed"])
        self.base = self.spec.constants()
        self.icache = InputCache(writable=True)  # this trusted process is the only writer
        self.host: dict[tuple[int, int], list[Any]] = {}
        names = [n for n, _ in self.plan.shapes]
        self.timed = names.index(self.plan.timed_shape)
        self.models: dict[int, Any] = {}
        self._devgen: bool | None = None
        self.devgen_off = ""  # why the inputs are staged rather than made on the device, when they are
        self.cache_timed = False  # the candidate's timed sets went through the input cache
        self.arena: _outbox.Arena | None = None
        self.device_error = ""  # why the GPU outbox is a file (the result says)
        self.trial_samples: list[int | None] = []

    def prepare(self) -> dict[str, Any]:
        """Write every shape's init inputs and trial inputs into the stage; describe the job."""
        shapes = []
        set_bytes = 0
        _plan.apply_shape(self.spec, self.base, self.plan.shapes[self.timed][1])
        devgen = self._device_generation()
        for si, (name, over) in enumerate(self.plan.shapes):
            _plan.apply_shape(self.spec, self.base, over)
            init = _plan.build_init_inputs(self.spec, self.plan.model_seed(si), "cpu")
            torch.save(init, self.stage / f"init_{si}.pt")
            trials: list[Any] = []
            for t in range(self.plan.trials):
                seed = self.plan.trial_seed(si, t)
                if devgen:  # the candidate makes the same values on its device from the seed
                    inputs = _plan.generate_on(self.spec, seed, self.device)
                    trials.append(seed)
                else:
                    inputs = _plan.build_inputs(self.spec, seed, "cpu", self.icache)
                    torch.save(inputs, self.stage / f"in_{si}_{t}.pt")
                    trials.append(f"in_{si}_{t}.pt")
                if not devgen:  # made again from the seed when needed: held, GBs would sit on the device
                    self.host[(si, t)] = inputs
                if si == self.timed:
                    set_bytes = sum(x.numel() * x.element_size() for x in inputs if isinstance(x, torch.Tensor))
            shapes.append({"name": name, "init": f"init_{si}.pt", "trials": trials,
                           "model_seed": self.plan.model_seed(si), "over": over})
        for p in self.stage.iterdir():
            os.chmod(p, 0o644)
        outbox = self._make_outbox()
        sig = {m: list(positional_signature(getattr(self.spec.module.Model, m))) for m in ("__init__", "forward")}
        return {"shapes": shapes, "timed": self.timed, "set_bytes": set_bytes, "sig": sig, "devgen": devgen,
                "devgen_off": self.devgen_off,
                "allow_tf32": self.spec.allow_tf32, "timing_basis": str(getattr(self.spec.module, "TIMING", "device")),
                "allowed_ops": list(self.spec.allowed_ops), "allowed_imports": list(self.spec.allowed_imports),
                "plan": {"shapes": [n for n, _ in self.plan.shapes], "timed": self.plan.timed_shape},
                "outbox": outbox}

    def _make_outbox(self) -> dict[str, Any] | None:
        """The job's outbox (`outbox.py`), laid out from one reference forward per shape: None (outputs then
        travel as files) when the server named no place for it or an output is not a dense tensor."""
        where = self.job.get("outbox_path")
        if not where:
            return None
        metas: list[_outbox.Meta] = []
        for si in range(len(self.plan.shapes)):
            with torch.no_grad():
                outs = flatten_outputs(self.model(si)(*_plan.to_device(self.trial_inputs(si, 0), self.device)))
            meta = _outbox.describe(outs)
            del outs
            if meta is None:
                return None
            metas.append(meta)
        trial_slots = [metas[si] for si in range(len(metas)) for _ in range(self.plan.trials)]
        # each shape's first trial in full; a large output's later trials on a sample (`outbox`)
        rng = random.SystemRandom()
        self.trial_samples = [rng.getrandbits(62) if t > 0 and _outbox.sampled(metas[si]) else None
                              for si in range(len(metas)) for t in range(self.plan.trials)]
        timed_sampled = _outbox.sampled(metas[self.timed])
        out_bytes = _outbox.Layout.build([metas[self.timed]], [timed_sampled]).total
        timed = _outbox.judged_outputs(out_bytes)
        layout = _outbox.Layout.build(trial_slots + [metas[self.timed]] * timed,
                                      [s is not None for s in self.trial_samples] + [timed_sampled] * timed)
        shared = self._share_device_memory(layout.total)
        self.arena = _outbox.Arena(Path(where), layout, self.device, shared)
        return {"layout": layout.to_dict(), "trial_slots": len(trial_slots), "timed_slots": timed,
                "out_bytes": out_bytes, "trial_samples": self.trial_samples,
                "device_bytes": shared.size if shared is not None else 0, "device_error": self.device_error}

    def _share_device_memory(self, nbytes: int) -> Any:
        """On the GPU, the outbox's slots as device memory (`devmem`), its descriptor sent to the server;
        None (the file, then) on the CPU, with `WB_DEVICE_OUTBOX=off`, or when the driver refuses."""
        if self.device != "cuda" or self.sock < 0 or os.environ.get("WB_DEVICE_OUTBOX", "on") == "off":
            return None
        import socket

        from workbench.harness import devmem

        try:
            shared, fd = devmem.Shared.create(nbytes)
        except Exception as exc:  # noqa: BLE001 - the driver refused: the file, then
            self.device_error = f"{type(exc).__name__}: {exc}"
            return None
        try:
            with socket.socket(fileno=os.dup(self.sock)) as sock:
                socket.send_fds(sock, [b"o"], [fd])
        except OSError as exc:
            self.device_error = f"descriptor not sent: {exc}"
            return None
        finally:
            os.close(fd)
        return shared

    def trial_inputs(self, si: int, t: int) -> list[Any]:
        """Trial t of shape si's inputs: the staged ones, or made again on the device from their seed."""
        if (si, t) in self.host:
            return self.host[(si, t)]
        _plan.apply_shape(self.spec, self.base, self.plan.shapes[si][1])
        return _plan.generate_on(self.spec, self.plan.trial_seed(si, t), self.device)

    def model(self, si: int) -> Any:
        if si not in self.models:
            _plan.apply_shape(self.spec, self.base, self.plan.shapes[si][1])
            init = _plan.build_init_inputs(self.spec, self.plan.model_seed(si), self.device)
            torch.manual_seed(self.plan.model_seed(si))
            self.models[si] = self.spec.module.Model(*init).to(self.device)
        return self.models[si]

    def _device_generation(self) -> bool:
        """On the GPU, timed inputs are generated there (`get_inputs()` under `torch.device`): host RNG
        costs seconds per evaluation for large inputs (2 x 16M randn: about 0.3 s a set). Decided once per
        job, so the judge regenerates exactly what was staged; for specs whose `get_inputs()` fails there or
        returns anything but device tensors and scalars, or is not the same twice from one seed, the
        host's. On by default on the GPU (`WB_DEVICE_INPUTS=off` turns it off); on the CPU only when asked
        (the tests run the same path there). With it, the candidate makes its inputs the same way
        (`_InputMaker`): nothing is staged through files or host memory."""
        if self._devgen is None:
            self._devgen = False
            default = "on" if self.device == "cuda" else "off"  # on the CPU: a test of the same path
            if os.environ.get("WB_DEVICE_INPUTS", default) == "on":
                try:
                    with _FileOpens() as opened:
                        probe = _plan.generate_on(self.spec, self.plan.timing_seed(0), self.device)
                    again = _plan.generate_on(self.spec, self.plan.timing_seed(0), self.device)
                    self._devgen = all(_same(a, b) for a, b in zip(probe, again)) and all(
                        x.device.type == self.device if isinstance(x, torch.Tensor)
                        else isinstance(x, (bool, int, float, str, type(None))) for x in probe)
                    del probe, again
                    # The candidate makes the same inputs once confined, where the spec's data files (the
                    # ATen suite's samples beside it) are out of sight: such a spec's inputs are staged.
                    code = _sandbox.code_paths(self.job.get("allowed_imports", ()))
                    unseen = [f for f in opened.paths if not _sandbox.seen_when_confined(f, code)]
                    if unseen and self._devgen:
                        self._devgen = False
                        self.devgen_off = f"get_inputs() reads {Path(unseen[0]).name}, out of the candidate's sight"
                except Exception as exc:  # noqa: BLE001 - the spec's inputs need the host: generate them there
                    self._devgen = False
                    self.devgen_off = f"get_inputs() fails on the device: {type(exc).__name__}"
        return self._devgen

    def timed_sets(self, seeds: list[int], cache: bool = False) -> list[list[Any]]:
        """The timed shape's inputs of `seeds`: on the device when `_device_generation`, else on the host
        (through the input cache only when `cache`: a secret seed is worth keeping only when every set of
        the evaluation fits in the cache, else it just costs a write per set)."""
        _plan.apply_shape(self.spec, self.base, self.plan.shapes[self.timed][1])
        if self._device_generation():
            return [_plan.generate_on(self.spec, s, self.device) for s in seeds]
        return [_plan.build_inputs(self.spec, s, "cpu", self.icache if cache else None) for s in seeds]

    def baseline(self, chan: Channel) -> None:
        model = self.model(self.timed)

        def load(order: dict[str, Any]) -> list[list[Any]]:
            return [list(_plan.to_device(s, self.device)) for s in self.timed_sets(order["seeds"])]

        _rounds.serve(chan, lambda inp: model(*inp), load, lambda k, w, o, s: None, lambda: _sync(self.device),
                      OpRecorder, warm=lambda: gpu_warm(self.device))

    def make_round(self, k: int, seeds: list[int], where: Path, cache: bool) -> str:
        """Write round k's sets into `where` (the server renames the file into the stage when round k
        begins): the flat format when every input allows it, else torch.save."""
        self.cache_timed = self.cache_timed or cache
        sets = self.timed_sets(seeds, cache)
        host = [[x.to("cpu", non_blocking=True) if isinstance(x, torch.Tensor) else x for x in st] for st in sets]
        _sync(self.device)
        if _plan.raw_layout_ok(host):
            name = f"round_{k}.raw"
            _plan.write_raw(where / name, host)
        else:
            name = f"round_{k}.pt"
            torch.save(host, where / name)
        os.chmod(where / name, 0o644)
        return name

    def judge(self, sandbox: Path, timed: list[tuple[int, int, int, int]]) -> dict[str, Any]:
        """Compare the candidate's saved outputs (it is dead by now) with the reference's, on the same inputs."""
        out: dict[str, Any] = {"correct": True, "problems": [], "max_abs_err": 0.0, "max_rel_err": 0.0}
        # inputs or a timed set's seed, the outbox slot, the seed of a sampled slot's positions
        todo: list[tuple[int, str, str, Any, int, int | None]] = []
        n_trial = len(self.plan.shapes) * self.plan.trials
        for si, (name, _) in enumerate(self.plan.shapes):
            for t in range(self.plan.trials):
                slot = si * self.plan.trials + t
                todo.append((si, f"shape {name}, trial {t}", f"out_{si}_{t}.pt", (si, t), slot,
                             self.trial_samples[slot] if slot < len(self.trial_samples) else None))
            if si == self.timed:
                if not timed:
                    out["correct"] = False
                    out["problems"].append(f"shape {name}: no timed repetition left an output to check")
                for j, (k, i, seed, sample) in enumerate(timed):
                    # regenerated one at a time below: all at once they would hold every judged set
                    todo.append((si, f"shape {name}, timed round {k} repetition {i}", f"t_{k}_{i}.pt", seed,
                                 n_trial + j, sample))
        read = {"outbox": 0, "files": 0, "sampled": 0}
        for si, where, fname, host, slot, sample in todo:
            if isinstance(host, int):
                host = self.timed_sets([host], self.cache_timed)[0]
            else:
                host = self.trial_inputs(*host)
            with torch.no_grad():
                ref = flatten_outputs(self.model(si)(*_plan.to_device(host, self.device)))
            self._judging = (si, host)  # the fp64 referee's model and inputs, should this output mismatch
            try:
                self._judge_one(out, read, where, fname, slot, sample, ref, sandbox)
            except Exception as exc:  # noqa: BLE001 - whatever the candidate left that breaks the judge fails it
                out["correct"] = False
                out["problems"].append(f"{where}: output refused ({type(exc).__name__}: {str(exc)[:200]})")
        read["way"] = self.arena.way() if self.arena is not None else "files"  # device memory or the file
        out["read"] = read
        return out

    def _judge_one(self, out: dict[str, Any], read: dict[str, int], where: str, fname: str, slot: int,
                   sample: int | None, ref: list[Any], sandbox: Path) -> None:
        """One judged output, from trusted buffers only: the outbox slot through this process's own
        descriptor when the layout has one (a file the candidate planted beside it is never looked at), else
        the flat output file, read bounded by the reference's own outputs and parsed without trusting it
        (`outfile`: no pickle, no zip, nothing decompressed)."""
        slots = self.arena.layout.slots if self.arena is not None else ()
        if self.arena is not None and slot < len(slots) and _fits_slot(ref, slots[slot]):
            try:
                got = self.arena.read(slot)  # through this process's own descriptor, never a path
            except OSError as exc:  # the candidate truncated the file: its failure, not the spec's
                out["correct"] = False
                out["problems"].append(f"{where}: output refused ({exc})")
                return
            expect = self.arena.expected(slot, ref, sample)
            select = None
            if expect is not ref:
                read["sampled"] += int(any(e[3] for e in self.arena.layout.slots[slot]))
                select = lambda full: self.arena.expected(slot, full, sample)  # noqa: E731 - same positions
            self._compare(out, where, got, expect, select)
            read["outbox"] += 1
            return
        bound = sum(r.numel() * r.element_size() for r in ref if isinstance(r, torch.Tensor)) \
            + _outfile.MAX_HEADER + len(_outfile.MAGIC) + 8
        try:
            data = _safeio.read_bounded(sandbox, fname, bound)
        except FileNotFoundError:
            out["correct"] = False
            out["problems"].append(f"{where}: no output saved")
            return
        except OSError as exc:
            out["correct"] = False
            out["problems"].append(f"{where}: output refused ({exc})")
            return
        try:
            got = _outfile.parse(data)
        except _outfile.OutputFileError as exc:
            out["correct"] = False
            out["problems"].append(f"{where}: unreadable output ({exc})")
            return
        read["files"] += 1
        self._compare(out, where, [g.to(self.device) if isinstance(g, torch.Tensor) else g for g in got], ref)

    def _compare(self, out: dict[str, Any], where: str, got: list[Any], ref: list[Any],
                 select: Any = None) -> None:
        spec = self.spec
        cmp = compare_outputs(got, ref, tol_overrides=spec.tolerances, allow_tf32=spec.allow_tf32, exact=spec.exact)
        out["max_abs_err"] = max(out["max_abs_err"], cmp.max_abs_err)
        out["max_rel_err"] = max(out["max_rel_err"], cmp.max_rel_err)
        if not cmp.ok:
            out["correct"] = False
            out["problems"].extend(f"{where}: {p}" for p in cmp.problems)
            if "referee" not in out and getattr(self, "_judging", None) is not None:
                out["referee"] = self._referee(got, ref, select)

    def _referee(self, got: list[Any], ref: list[Any], select: Any) -> dict[str, Any]:
        """The first mismatch's fp64 referee (`referee.py`): is eager itself as far from the exact result?
        Information beside the verdict, which stays incorrect; it never raises."""
        si, host = self._judging
        try:
            inputs = list(_plan.to_device(host, self.device))
        except Exception as exc:  # noqa: BLE001 - information only
            return {"error": f"{type(exc).__name__}: {exc}".splitlines()[0][:200]}
        return fp64_referee(self.model(si), inputs, got, ref, flatten_outputs, select)


def _fits_slot(ref: list[Any], entries: Any) -> bool:
    """Whether the reference's own outputs have the slot's layout: then a right answer is in the slot, and
    the judge reads the slot only; else (sizes that depend on the data) only the flat output file."""
    return len(ref) == len(entries) and all(
        isinstance(r, torch.Tensor) and str(r.dtype).removeprefix("torch.") == e[0] and tuple(r.shape) == tuple(e[1])
        for r, e in zip(ref, entries))


def _release_cache(device: str) -> None:
    """Give the blocks the reference freed back to the driver: its caching allocator would otherwise keep
    GBs of inputs it made (a probe, the baseline's rounds) from the candidate that runs next (a 16 GB
    KernelBench input ran the H200 out of memory)."""
    if device == "cuda":
        torch.cuda.empty_cache()


def run_reference(job: dict[str, Any], chan: Channel, sock: int = -1) -> None:
    """Entry point of the reference process: prepare, time the baseline, stage rounds, judge."""
    t0 = time.perf_counter()
    try:
        os.setsid()
        ref = _Reference(job, sock)
        if ref.device == "cuda":
            torch.zeros(1, device="cuda")
        prepared = ref.prepare()
        _release_cache(ref.device)
        prepared["timings_s"] = {"reference_prepare": time.perf_counter() - t0}
        chan.send({"prepared": prepared})
    except SpecError as exc:
        chan.send({"prepared": None, "bad_spec": str(exc)})
        return
    except BaseException as exc:  # noqa: BLE001 - the spec's own code failed: the spec is at fault
        chan.send({"prepared": None, "reference_error": f"{type(exc).__name__}: {exc}\n"
                                                        f"{_tail(traceback.format_exc())}"})
        return
    while True:
        try:
            cmd = chan.recv()
        except EOFError:
            return
        try:
            if "baseline" in cmd:
                chan.send({"baseline_ready": True})
                ref.baseline(chan)
                _release_cache(ref.device)
            elif "make_round" in cmd:
                where = Path(cmd.get("dir") or ref.stage)
                chan.send({"made": cmd["make_round"], "file": ref.make_round(cmd["make_round"], cmd["seeds"], where,
                                                                             bool(cmd.get("cache")))})
            elif "judge" in cmd:
                verdict = ref.judge(Path(cmd["judge"]["sandbox"]), [tuple(x) for x in cmd["judge"]["timed"]])
                chan.send({"verdict": verdict})
                return
        except BaseException as exc:  # noqa: BLE001 - reported; the server turns it into bad_spec
            chan.send({"failure": True, "reference_error": f"{type(exc).__name__}: {exc}\n"
                                                           f"{_tail(traceback.format_exc())}"})
            return
