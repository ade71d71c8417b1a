"""One staged problem of `benchmarks/lowering_gpu.py run`: check the draft against eager, then time.

Imported by the run's worker processes (spawned: each owns its CUDA context, so a candidate that breaks
its context takes only its own process down). On `cpu` the interpreter is set before triton is imported
(the dry run at small sizes); times are then wall clock, on `cuda` CUDA events (median).
"""
from __future__ import annotations

import json
import math
import os
import signal
import time
from pathlib import Path
from typing import Any

_FATAL = ("illegal memory access", "unspecified launch failure", "device-side assert", "CUDA error",
          "misaligned address", "an illegal instruction")
_OOM = "out of memory"  # a CUDA error that leaves the context usable: the allocation failed, nothing ran
_RETRY_LOCK: Any = None  # phase A's workers share the GPU: one retries an out-of-memory problem at a time


def init_worker(device: str, retry_lock: Any = None) -> None:
    global _RETRY_LOCK
    if device == "cpu":
        os.environ["TRITON_INTERPRET"] = "1"
    _RETRY_LOCK = retry_lock
    signal.signal(signal.SIGALRM, _alarm)


class ProblemTimeout(Exception):
    pass


def _alarm(signum: int, frame: Any) -> None:  # noqa: ARG001 - signal handler signature
    raise ProblemTimeout("the problem's time cap was reached")


def fatal(reason: str) -> bool:
    return _OOM not in reason and any(s in reason for s in _FATAL)


def out_of_memory(row: dict) -> bool:
    return _OOM in str(row.get("reason", "")) or _OOM in str(row.get("compile_reason", ""))


def _flat(o: Any) -> list[Any]:
    return [y for x in o for y in _flat(x)] if isinstance(o, (list, tuple)) else [o]


def _sync(device: str) -> None:
    import torch

    if device == "cuda":
        torch.cuda.synchronize()


def time_us(fn: Any, device: str, budget_s: float, max_reps: int) -> float:
    """Median microseconds of fn(): CUDA events around each call on cuda, perf_counter on cpu."""
    import torch

    fn()
    _sync(device)
    t0 = time.perf_counter()
    fn()
    _sync(device)
    once = time.perf_counter() - t0
    reps = max(3, min(max_reps, int(budget_s / max(once, 1e-6))))
    times = []
    for _ in range(reps):
        if device == "cuda":
            s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            s.record()
            fn()
            e.record()
            torch.cuda.synchronize()
            times.append(s.elapsed_time(e) * 1000.0)
        else:
            t0 = time.perf_counter()
            fn()
            times.append((time.perf_counter() - t0) * 1e6)
    times.sort()
    return times[len(times) // 2]


def count_launches(fn: Any) -> int:
    """Triton kernel launches of one call of fn (JITFunction.run, or the interpreter's run)."""
    from triton.runtime import interpreter, jit

    n = [0]
    saved = []
    for cls in (jit.JITFunction, interpreter.InterpretedFunction):
        orig = cls.run

        def run(self, *a, _orig=orig, **k):  # noqa: ANN001, ANN202
            n[0] += 1
            return _orig(self, *a, **k)
        saved.append((cls, orig))
        cls.run = run
    try:
        fn()
    finally:
        for cls, orig in saved:
            cls.run = orig
    return n[0]


def compare(want: list[Any], got: list[Any]) -> tuple[bool, float, str]:
    import torch

    from workbench.tolerances import tolerance_for

    if len(want) != len(got):
        return False, 0.0, f"{len(got)} outputs vs {len(want)}"
    worst = 0.0
    for j, (a, b) in enumerate(zip(want, got)):
        if not isinstance(a, torch.Tensor):
            if a != b:
                return False, worst, f"output {j}: {b!r} vs {a!r}"
            continue
        if not isinstance(b, torch.Tensor) or a.shape != b.shape:
            return False, worst, f"output {j}: shape {getattr(b, 'shape', type(b))} vs {tuple(a.shape)}"
        if a.dtype.is_floating_point or a.dtype.is_complex:
            atol, rtol = tolerance_for(a.dtype)
            err = (b.double() - a.double()).abs()
            both_nan = torch.isnan(a) & torch.isnan(b)
            err = torch.where(both_nan, torch.zeros_like(err), err)
            worst = max(worst, float(err.max()) if err.numel() else 0.0)
            bad = (err > atol + rtol * a.double().abs()) | (torch.isnan(err))
            if bool(bad.any()):
                n_bad = int(bad.sum())
                return False, worst, f"output {j}: {n_bad} of {a.numel()} elements differ (max abs {worst:.3g})"
        elif not torch.equal(a, b.to(a.dtype)):
            return False, worst, f"output {j}: integer/bool outputs differ"
    return True, worst, ""


def conditioning(model: Any, inputs: list[Any], want: list[Any], got: list[Any]) -> dict:
    """For a draft that does not match eager: is eager itself that far from the exact answer? The model
    and its inputs in fp64 stand in for exact. When eager's fp32 output fails the same tolerance against
    fp64, the reference is ill-conditioned (level 3 24_EfficientNetB2: training-mode BatchNorm over two
    values a channel makes each activation the sign of a difference), and no other summation order can
    match it; the row keeps both errors, the verdict stays incorrect."""
    import copy

    import torch

    if not any(isinstance(x, torch.Tensor) and x.dtype == torch.float32 for x in want):
        return {}
    try:
        m64 = copy.deepcopy(model).double()
        x64 = [x.double() if isinstance(x, torch.Tensor) and x.dtype.is_floating_point else x for x in inputs]
        exact = [y.float() if isinstance(y, torch.Tensor) and y.dtype == torch.float64 else y
                 for y in _flat(m64(*x64))]
        del m64, x64
    except Exception as exc:  # noqa: BLE001 - out of memory, an fp32-only op: the row says so, nothing else
        return {"fp64_check": f"not made: {_line(exc)}"[:120]}
    eager_ok, eager_err, _ = compare(exact, want)
    _, draft_err, _ = compare(exact, got)
    return {"eager_fp64_err": f"{eager_err:.3g}", "draft_fp64_err": f"{draft_err:.3g}",
            "ill_conditioned": not eager_ok}


def models_and_inputs(ref: Any, cand: Any, device: str) -> tuple[Any, Any, list[Any]]:
    """Model, ModelNew and the inputs, made on the device (KernelBench's published inputs reach 6 GB: a CPU
    randn of them takes seconds); Model and ModelNew from the same seed on the same device are identical."""
    import torch

    with torch.device(device):
        torch.manual_seed(7)
        init = ref.get_init_inputs()
        torch.manual_seed(8)
        model = ref.Model(*init).to(device)
        torch.manual_seed(8)
        model_new = cand.ModelNew(*init).to(device)
        torch.manual_seed(9)
        inputs = [x.to(device) if isinstance(x, torch.Tensor) else x for x in ref.get_inputs()]
    return model, model_new, inputs


def _load(d: Path, item: dict, tag: str) -> tuple[Any, Any]:
    import importlib.util
    import sys

    from workbench.spec import load_spec

    ref = load_spec(d / item["spec"], item.get("overrides") or {}, module_name=f"ref_{tag}").module
    spec = importlib.util.spec_from_file_location(f"cand_{tag}", d / item["candidate"])
    cand = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    sys.modules[f"cand_{tag}"] = cand
    spec.loader.exec_module(cand)  # type: ignore[union-attr]
    return ref, cand


def measure(job: dict) -> dict:
    """Check and time one problem. job: dir, item, device, cap_s, timing (s per contender), compile (bool),
    warm_only (bool: first calls only, to fill Triton's and Inductor's caches). A warm-up that runs out of
    GPU memory (the other workers' problems hold it: published inputs and outputs reach 10 GB each) is
    tried again, up to job["oom_retries"] times, holding the retry lock, after a pause that lets the
    others finish; the row says how many tries it took."""
    row = _measure(job)
    tries = int(job.get("oom_retries", 0)) if job.get("warm_only") else 0
    for k in range(tries):
        if not out_of_memory(row):
            break
        if _RETRY_LOCK is None:
            time.sleep(2.0 * (k + 1))
            row = _measure(job)
        else:
            with _RETRY_LOCK:
                time.sleep(2.0 * (k + 1))
                row = _measure(job)
        row["oom_tries"] = k + 1
    return row


def _measure(job: dict) -> dict:
    import torch

    device, item = job["device"], job["item"]
    row: dict[str, Any] = {}
    signal.alarm(max(1, int(job["cap_s"])))
    t_start = time.perf_counter()
    stage = "load"
    try:
        ref, cand = _load(Path(job["dir"]), item, f"{item['level']}_{item['problem']}".replace("-", "_"))
        tf32 = bool(getattr(ref, "ALLOW_TF32", False))
        if device == "cuda":
            torch.backends.cuda.matmul.allow_tf32 = tf32
            torch.backends.cudnn.allow_tf32 = tf32
        row["tf32"] = tf32
        stage = "init"
        model, model_new, inputs = models_and_inputs(ref, cand, device)
        with torch.no_grad():
            stage = "eager"
            want = _flat(model(*[x.clone() if isinstance(x, torch.Tensor) else x for x in inputs]))
            stage = "draft first call"
            t0 = time.perf_counter()
            got = _flat(model_new(*inputs))
            _sync(device)
            row["first_call_s"] = round(time.perf_counter() - t0, 2)
            ok, worst, why = compare(want, got)
            if not ok:
                stage = "fp64 check"
                row.update(conditioning(model, inputs, want, got))
                if row.get("ill_conditioned"):
                    why = (f"{why}; ill-conditioned reference: eager's own fp32 output is "
                           f"{row['eager_fp64_err']} (max abs) from its fp64 output, the draft's "
                           f"{row['draft_fp64_err']}")
            del got
            if not (ok and job.get("tune")):
                del want
            row.update(status="passed" if ok else "incorrect", correct=ok, max_abs_err=f"{worst:.3g}", reason=why)
            stage = "kernels"
            row["n_kernels"] = count_launches(lambda: model_new(*inputs))
            compiled = None
            if job["compile"]:
                stage = "torch.compile"
                t0 = time.perf_counter()
                try:
                    compiled = torch.compile(model)
                    compiled(*inputs)
                    _sync(device)
                    row["inductor_compile_s"] = round(time.perf_counter() - t0, 1)
                except Exception as exc:  # noqa: BLE001 - inductor's own failure: the row keeps the rest
                    compiled = None
                    row["compile_reason"] = f"torch.compile: {_line(exc)}"
            if job["warm_only"]:
                if ok and job.get("tune"):
                    stage = "tuning warm-up"
                    row["tune_warm"] = warm_configs(cand, Path(job["dir"]) / item["candidate"], model_new, inputs,
                                                    want, device, int(job["tune"]))
                return row
            b, reps = job["timing"], job.get("max_reps", 50)
            stage = "timing eager"
            row["eager_us"] = round(time_us(lambda: model(*inputs), device, b, reps), 2)
            stage = "timing draft"
            row["draft_us"] = round(time_us(lambda: model_new(*inputs), device, b, reps), 2)
            if compiled is not None:
                stage = "timing torch.compile"
                row["compile_us"] = round(time_us(lambda: compiled(*inputs), device, b, reps), 2)
            if ok and job.get("tune"):
                stage = "tuning"
                tune(row, cand, Path(job["dir"]) / item["candidate"], model_new, inputs, want, device, b, reps,
                     int(job["tune"]), job.get("tune_configs"))
    except ProblemTimeout:
        row.update(status=row.get("status", "timeout"), reason=row.get("reason") or
                   f"time cap {job['cap_s']:.0f} s reached during {stage}")
        row.setdefault("correct", False)
    except Exception as exc:  # noqa: BLE001 - the candidate's (or spec's) failure, with its reason
        status = "error" if stage not in ("load", "init", "eager") else f"error_in_{stage}"
        row.update(status=row.get("status", status), correct=row.get("correct", False),
                   reason=row.get("reason") or f"{stage}: {_line(exc)}")
    finally:
        signal.alarm(0)
        row["wall_s"] = round(time.perf_counter() - t_start, 1)
        if device == "cuda":
            try:
                torch.cuda.empty_cache()
            except Exception:  # noqa: BLE001 - a broken context: the parent replaces this worker
                row["fatal"] = True
    if fatal(str(row.get("reason", ""))):
        row["fatal"] = True
    return row


def warm_configs(cand: Any, path: Path, model_new: Any, inputs: list[Any], want: list[Any], device: str,
                 n: int) -> list[dict]:
    """Phase A of --tune: each config's first call (Triton compiles it into the shared cache) and its check
    against eager, in the parallel warm-up workers; the configs that ran and matched, for phase B to time."""
    import torch

    from workbench.lowering.tune import configs

    base = {k: getattr(cand, k) for k in getattr(cand, "TUNABLES", {})}
    good = []
    try:
        for cfg in configs(path.read_text(), n):
            for k, v in {**base, **cfg}.items():
                setattr(cand, k, v)
            try:
                with torch.no_grad():
                    got = _flat(model_new(*inputs))
                _sync(device)
            except ProblemTimeout:
                raise
            except Exception as exc:  # noqa: BLE001 - a config that does not compile or fit
                if fatal(_line(exc)):
                    raise
                continue
            if compare(want, got)[0]:
                good.append(cfg)
            del got
    finally:
        for k, v in base.items():
            setattr(cand, k, v)
    return good


def tune(row: dict, cand: Any, path: Path, model_new: Any, inputs: list[Any], want: list[Any], device: str,
         budget_s: float, reps: int, n: int, warm: list[dict] | None = None) -> None:
    """Time up to n configs of the draft (workbench/lowering/tune.py; `warm`: the ones phase A found
    correct), each checked against eager first; row gets tuned_draft_us (the fastest correct one, the
    untuned draft included), tuned_config and tune_tried/tune_ok. Written as it goes: the problem's time
    cap may end the loop."""
    import torch

    from workbench.lowering.tune import configs

    base = {k: getattr(cand, k) for k in getattr(cand, "TUNABLES", {})}
    best_us, best = float(row["draft_us"]), {}
    row.update(tuned_draft_us=round(best_us, 2), tuned_config="{}", tune_tried=0, tune_ok=0)
    try:
        for cfg in (warm if warm is not None else configs(path.read_text(), n))[:n]:
            for k, v in base.items():
                setattr(cand, k, v)
            for k, v in cfg.items():
                setattr(cand, k, v)
            row["tune_tried"] += 1
            try:
                with torch.no_grad():
                    got = _flat(model_new(*inputs))
                _sync(device)
                ok, _, _ = compare(want, got)
                del got
                if not ok:
                    continue
                us = time_us(lambda: model_new(*inputs), device, budget_s, reps)
            except ProblemTimeout:
                raise
            except Exception as exc:  # noqa: BLE001 - a config that does not compile or fit: the next one
                if fatal(_line(exc)):
                    raise
                continue
            row["tune_ok"] += 1
            if us < best_us:
                best_us, best = us, cfg
                row.update(tuned_draft_us=round(us, 2), tuned_config=json.dumps(best, sort_keys=True))
    finally:
        for k, v in base.items():
            setattr(cand, k, v)


def _line(exc: BaseException) -> str:
    lines = [x for x in f"{type(exc).__name__}: {exc}".splitlines() if x.strip()]
    return (lines[0] if lines else type(exc).__name__)[:300]


def geomean(xs: list[float]) -> float:
    xs = [x for x in xs if x > 0 and math.isfinite(x)]
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else float("nan")
