"""Code that runs in the forked children: the candidate process and the reference process.

The candidate process never holds a reference output: it runs the candidate on seeded inputs,
saves its outputs in its sandbox and reports. The reference process starts only after the
candidate process is gone; it rebuilds the same inputs, runs `Model`, and judges.
"""
from __future__ import annotations

import builtins
import importlib.util
import json
import os
import resource
import sys
import time
import traceback
from pathlib import Path
from typing import Any, Callable

import torch

from workbench.harness import compare as _compare
from workbench.harness import guards as _guards
from workbench.harness import opcheck
from workbench.harness import plan as _plan
from workbench.harness import timing as _timing
from workbench.harness.compare import compare_outputs, flatten_outputs
from workbench.harness.guards import Guard
from workbench.harness.input_cache import InputCache
from workbench.harness.opcheck import OpRecorder
from workbench.harness.plan import N_TIMING_SETS
from workbench.spec import SpecError, load_spec

_TB_LINES = 25


def _tail(tb: str, n: int = _TB_LINES) -> str:
    return "\n".join(tb.strip().splitlines()[-n:])


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
        f = os.open(sandbox / name, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        os.dup2(f, fd)
        os.close(f)
    sys.stdout = open(1, "w", buffering=1, closefd=False)
    sys.stderr = open(2, "w", buffering=1, closefd=False)
    from workbench.env import is_secret_name

    for k in [k for k in os.environ if is_secret_name(k)]:
        del os.environ[k]
    os.environ["HOME"] = str(sandbox)
    os.environ["TMPDIR"] = str(sandbox / "tmp")
    os.environ["TRITON_CACHE_DIR"] = str(sandbox / "triton-cache")
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = str(sandbox / "inductor-cache")
    (sandbox / "tmp").mkdir(exist_ok=True)
    import tempfile

    tempfile.tempdir = str(sandbox / "tmp")  # cached by the server before the fork: reset it
    sys.dont_write_bytecode = True
    if device == "cpu" and mem_limit_gb > 0:
        # An address-space cap works on the CPU platform; CUDA reserves huge virtual ranges, so
        # on the GPU the server watches resident memory instead.
        cur = _vm_size()
        limit = cur + int(mem_limit_gb * 2**30)
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))


def _vm_size() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmSize:"):
                return int(line.split()[1]) * 1024
    return 0


def _send(fd: int, msg: dict[str, Any]) -> None:
    data = (json.dumps(msg) + "\n").encode()
    while data:
        n = os.write(fd, data)
        data = data[n:]


def _save_outputs(outs: list[Any], path: Path) -> None:
    torch.save([o.detach().cpu() if isinstance(o, torch.Tensor) else o for o in outs], path)


def _inputs_snapshot(inputs: list[Any]) -> list[Any]:
    return [x.detach().clone() if isinstance(x, torch.Tensor) else x for x in inputs]


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, torch.Tensor):
        if a.dtype.is_floating_point:
            return bool(torch.equal(torch.nan_to_num(a, nan=0.0), torch.nan_to_num(b, nan=0.0))
                        and torch.equal(torch.isnan(a), torch.isnan(b)))
        return bool(torch.equal(a, b))
    return True


def run_candidate(job: dict[str, Any], sandbox: Path, result_fd: int) -> None:
    """Entry point of the candidate process (forked from the server)."""
    msg: dict[str, Any] = {"status": "passed", "violations": [], "error": "", "outputs": [], "timings_s": {}}
    t_start = time.perf_counter()
    device = job["device"]
    icache = InputCache(writable=False)  # before isolate(): its TMPDIR is the sandbox
    try:
        isolate(sandbox, device, job.get("mem_limit_gb", 8.0))
        spec = load_spec(job["spec_path"], job.get("overrides") or {})
        plan = _plan.make_plan(spec, device, job["trials"], job.get("shapes"), job.get("seed", 1234))
        base = spec.constants()
        icache.prime(spec)  # reads the spec's folder now: the guard keeps the spec private later
        msg["plan"] = {"shapes": [n for n, _ in plan.shapes], "timed": plan.timed_shape}
        msg["timings_s"]["setup"] = time.perf_counter() - t_start
    except SpecError as exc:
        _send(result_fd, {"status": "bad_spec", "error": str(exc), "violations": []})
        return
    cand_path = sandbox / "candidate.py"
    guard = Guard(sandbox, cand_path, private_paths=[Path(job["spec_path"])])
    opcheck.install_triton_wrappers()
    _guards.wrap_thread_start(guard)
    _guards.wrap_side_streams(guard, torch)
    # Calling the spec's Model from the candidate is a named violation, not merely slow.
    ref_forward = spec.module.Model.forward

    def tripwire(self: Any, *a: Any, **k: Any) -> Any:
        if "calls_reference_model" not in guard.violations:
            guard.violations.append("calls_reference_model")
        return ref_forward(self, *a, **k)

    spec.module.Model.forward = tripwire
    import triton
    import triton.runtime.autotuner
    import triton.runtime.jit
    import triton.testing

    for label, obj in [("torch", torch), ("torch.Tensor", torch.Tensor), ("torch.nn.functional", torch.nn.functional),
                       ("torch.cuda", torch.cuda), ("torch.nn.Module", torch.nn.Module), ("time", time),
                       ("triton", triton), ("triton.testing", triton.testing), ("os", os), ("builtins", builtins),
                       ("JITFunction", triton.runtime.jit.JITFunction),
                       ("Autotuner", triton.runtime.autotuner.Autotuner), ("harness.opcheck", opcheck),
                       ("harness.timing", _timing), ("harness.compare", _compare), ("harness.plan", _plan),
                       ("harness.guards", _guards), ("Guard", Guard), ("OpRecorder", OpRecorder),
                       ("InputCache", InputCache),
                       ("spec.Model", spec.module.Model)]:
        guard.watch(label, obj)
    if "triton.runtime.interpreter" in sys.modules:
        guard.watch("InterpretedFunction", sys.modules["triton.runtime.interpreter"].InterpretedFunction)
    guard.snapshot()
    stage = "import"

    def finish(status: str, error: str = "") -> None:
        guard.active = False
        guard.check_patches()
        msg["violations"] = list(guard.violations)
        msg["launches"] = opcheck.STATE.launches
        if msg["violations"] and status in ("passed", "runtime_error", "incorrect"):
            status = "rejected"
        msg["status"] = status
        if error:
            msg["error"] = error
        msg["timings_s"]["candidate_total"] = time.perf_counter() - t_start
        _send(result_fd, msg)

    try:
        guard.install()
        t0 = time.perf_counter()
        mspec = importlib.util.spec_from_file_location("candidate", cand_path)
        module = importlib.util.module_from_spec(mspec)  # type: ignore[arg-type]
        sys.modules["candidate"] = module
        mspec.loader.exec_module(module)  # type: ignore[union-attr]
        model_new = getattr(module, "ModelNew", None)
        if not isinstance(model_new, type):
            return finish("compile_error", "candidate defines no `ModelNew` class")
        from workbench.spec import check_candidate_signature

        bad_sig = check_candidate_signature(spec.module.Model, model_new, ref_forward)
        if bad_sig:
            return finish("compile_error", f"signature mismatch: {bad_sig}")
        msg["timings_s"]["import"] = time.perf_counter() - t0
        allowed = frozenset(spec.allowed_ops)
        all_ops: set[str] = set()
        first_call = True
        for si, (shape_name, shape_over) in enumerate(plan.shapes):
            stage = f"shape {shape_name}: build"
            _plan.apply_shape(spec, base, shape_over)
            init_inputs = _plan.build_init_inputs(spec, plan.model_seed(si), device)
            torch.manual_seed(plan.model_seed(si))
            model = model_new(*init_inputs).to(device)
            buffers: list[Any] | None = None
            for t in range(plan.trials):
                stage = f"shape {shape_name}: trial {t}"
                t_in = time.perf_counter()
                fresh = _plan.build_inputs(spec, plan.trial_seed(si, t), device, icache)
                msg["timings_s"]["inputs"] = msg["timings_s"].get("inputs", 0.0) + time.perf_counter() - t_in
                if t == plan.trials - 1 and t > 0 and buffers is not None and _plan.same_layout(buffers, fresh):
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
                if device == "cuda":
                    torch.cuda.synchronize()
                dt = time.perf_counter() - t1
                key = "compile_and_first_call" if first_call else "correctness"
                msg["timings_s"][key] = msg["timings_s"].get(key, 0.0) + dt
                first_call = False
                guard.check_patches()
                all_ops.update(rec.ops)
                for op in rec.forbidden(allowed):
                    tag = f"forbidden_torch_op:{op}"
                    if tag not in guard.violations:
                        guard.violations.append(tag)
                for i, (a, b) in enumerate(zip(before, inputs)):
                    if not _same(a, b):
                        tag = f"input_mutated:arg{i}"
                        if tag not in guard.violations:
                            guard.violations.append(tag)
                outs = flatten_outputs(out)
                for i, o in enumerate(outs):
                    if isinstance(o, torch.Tensor) and type(o) is not torch.Tensor:
                        guard.violations.append(f"output_type:{type(o).__name__}")
                        outs[i] = o.as_subclass(torch.Tensor)
                fname = f"out_{si}_{t}.pt"
                t_sv = time.perf_counter()
                _save_outputs(outs, sandbox / fname)
                tm = msg["timings_s"]
                tm["save_outputs"] = tm.get("save_outputs", 0.0) + time.perf_counter() - t_sv
                msg["outputs"].append({"shape": shape_name, "shape_idx": si, "trial": t, "file": fname})
                buffers = inputs
            if opcheck.STATE.launches == 0 and "no_triton_kernel" not in guard.violations:
                guard.violations.append("no_triton_kernel")
            if guard.violations:
                break
            if shape_name == plan.timed_shape and not job.get("skip_timing"):
                stage = f"shape {shape_name}: timing"
                t_in = time.perf_counter()
                sets = [_plan.build_inputs(spec, plan.timing_seed(j), device, icache) for j in range(N_TIMING_SETS)]
                msg["timings_s"]["inputs"] = msg["timings_s"].get("inputs", 0.0) + time.perf_counter() - t_in
                last: dict[str, Any] = {}
                rot = _plan.Rotation(sets)

                def call(last: dict[str, Any] = last, model: Any = model, rot: _plan.Rotation = rot) -> None:
                    last["out"] = model(*rot.current)

                t2 = time.perf_counter()
                with torch.no_grad():
                    stats = _timing.time_callable(call, rot.prepare, device)
                msg["timings_s"]["timing"] = time.perf_counter() - t2
                guard.check_patches()
                _save_outputs(flatten_outputs(last["out"]), sandbox / "out_timing.pt")
                msg["timing"] = stats
                msg["timing_check"] = {"file": "out_timing.pt", "set": stats["last_rep"] % N_TIMING_SETS,
                                       "shape_idx": si}
        msg["aten_ops"] = sorted(all_ops)
        finish("passed")
    except PermissionError as exc:
        finish("rejected", f"{stage}: {exc}")
    except BaseException as exc:  # the candidate's failure is the result, never a harness crash
        status = "timeout" if isinstance(exc, KeyboardInterrupt) else _classify(exc)
        if isinstance(exc, MemoryError):
            status = "crashed"
        finish(status, f"{stage}: {type(exc).__name__}: {exc}\n{_tail(traceback.format_exc())}")


def run_reference(job: dict[str, Any], read_go: Callable[[], bytes], cand_dir: Path, result_fd: int,
                  cached_baseline: dict[str, float] | None) -> None:
    """Entry point of the reference process.

    Forked at the start of the job, it prepares while the candidate runs (CUDA context, spec,
    seeded inputs on the host: nothing secret exists yet), then waits for the candidate's report
    and only then runs `Model`, compares and times the baseline.
    """
    device = job["device"]
    out: dict[str, Any] = {"correct": True, "problems": [], "max_abs_err": 0.0, "max_rel_err": 0.0, "timings_s": {}}
    t0 = time.perf_counter()
    try:
        os.setsid()
        spec = load_spec(job["spec_path"], job.get("overrides") or {})
        plan = _plan.make_plan(spec, device, job["trials"], job.get("shapes"), job.get("seed", 1234))
        base = spec.constants()
        icache = InputCache(writable=True)  # this trusted process is the only writer
        if device == "cuda":
            torch.zeros(1, device="cuda")  # create the context while the candidate runs
        host: dict[tuple[int, int], list[Any]] = {}
        for si, (_name, shape_over) in enumerate(plan.shapes):
            _plan.apply_shape(spec, base, shape_over)
            for t in range(plan.trials):
                host[(si, t)] = _plan.build_inputs(spec, plan.trial_seed(si, t), "cpu", icache)
        out["timings_s"]["reference_prepare"] = time.perf_counter() - t0
        line = read_go()  # blocks until the candidate process is gone; EOF means abort
        if not line.strip():
            return
        cand = json.loads(line)
        t0 = time.perf_counter()
        # What must be judged comes from this process's own plan, not from the candidate's report.
        check = cand.get("timing_check")
        for si, (shape_name, shape_over) in enumerate(plan.shapes):
            _plan.apply_shape(spec, base, shape_over)
            init_inputs = _plan.build_init_inputs(spec, plan.model_seed(si), device)
            torch.manual_seed(plan.model_seed(si))
            model = spec.module.Model(*init_inputs).to(device)
            todo = [(t, f"out_{si}_{t}.pt") for t in range(plan.trials)]
            timed_here = shape_name == plan.timed_shape and not job.get("skip_timing")
            if timed_here:
                if not check or not (cand_dir / "out_timing.pt").exists():
                    out["correct"] = False
                    out["problems"].append(f"shape {shape_name}: the timed repetitions left no output to check")
                    continue
                todo.append((-1, "out_timing.pt"))
            for trial, fname in todo:
                if not (cand_dir / fname).exists():
                    out["correct"] = False
                    out["problems"].append(f"shape {shape_name}: no output saved for trial {trial}")
                    continue
                if trial == -1:
                    seed = plan.timing_seed(int(check["set"]) % N_TIMING_SETS)
                    inputs = _plan.build_inputs(spec, seed, device, icache)
                else:
                    inputs = _plan.to_device(host.pop((si, trial)), device)
                with torch.no_grad():
                    ref = flatten_outputs(model(*inputs))
                # Candidate-written file: weights_only refuses pickled code.
                got = torch.load(cand_dir / fname, weights_only=True, map_location=device)
                cmp = compare_outputs(got, ref, tol_overrides=spec.tolerances, allow_tf32=spec.allow_tf32,
                                      exact=spec.exact)
                out["max_abs_err"] = max(out["max_abs_err"], cmp.max_abs_err)
                out["max_rel_err"] = max(out["max_rel_err"], cmp.max_rel_err)
                if not cmp.ok:
                    out["correct"] = False
                    where = "timed repetition" if trial == -1 else f"trial {trial}"
                    out["problems"].extend(f"shape {shape_name}, {where}: {p}" for p in cmp.problems)
            if shape_name == plan.timed_shape and check and not out["problems"]:
                if cached_baseline:
                    out["baseline"] = cached_baseline
                else:
                    sets = [_plan.build_inputs(spec, plan.timing_seed(j), device, icache) for j in range(N_TIMING_SETS)]
                    rot = _plan.Rotation(sets)
                    t1 = time.perf_counter()
                    with torch.no_grad():
                        out["baseline"] = _timing.time_callable(lambda m=model, r=rot: m(*r.current), rot.prepare,
                                                                device)
                    out["timings_s"]["baseline_timing"] = time.perf_counter() - t1
    except SpecError as exc:
        out = {"bad_spec": str(exc)}
    except BaseException as exc:
        out = {"reference_error": f"{type(exc).__name__}: {exc}\n{_tail(traceback.format_exc())}"}
    out.setdefault("timings_s", {})["reference_total"] = time.perf_counter() - t0
    _send(result_fd, out)
