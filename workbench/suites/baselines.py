"""torch.compile baselines (GPU), timed in a trusted process of our own and cached per problem and shape.

The harness times the candidate against eager only. For fast_p against torch.compile, a child of
the suite (the spec is the user's trusted code, no candidate runs there) builds the spec's model and
inputs at the problem's sizes and times eager and `torch.compile(model)` (default mode) side by side
with one protocol: warm-up (compilation included there), then CUDA events around each call, the
median of the repetitions. The suite applies the compile/eager ratio to the harness's eager-based
speedup. Cached in the run's store under (spec digest, sizes, device, torch version).
"""
from __future__ import annotations

import gc
import hashlib
import json
import logging
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)


def _key(spec_path: str, overrides: dict[str, Any], device: str) -> str:
    import torch

    digest = hashlib.sha256(Path(spec_path).read_bytes()).hexdigest()[:16]
    return f"compile:{digest}:{json.dumps(overrides, sort_keys=True)}:{device}:{torch.__version__}"


def _median_us(fn: Any, device: str, reps: int, warmup: int) -> float:
    import statistics
    import time

    import torch

    for _ in range(warmup):
        fn()
    times = []
    if device == "cuda":
        torch.cuda.synchronize()
        for _ in range(reps):
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record()
            fn()
            b.record()
            b.synchronize()
            times.append(a.elapsed_time(b) * 1e3)
    else:
        for _ in range(reps):
            t0 = time.perf_counter()
            fn()
            times.append((time.perf_counter() - t0) * 1e6)
    return statistics.median(times)


def time_eager_and_compile(spec_path: str, overrides: dict[str, Any], device: str, reps: int = 50) -> dict[str, Any]:
    """Runs in the child: eager and torch.compile medians (us) of the spec's model at `overrides`, holding
    the GPU's memory lock shared (beside the harness's evaluations); once more, alone on the GPU, when it
    ran out of memory beside them."""
    import torch

    from platforms.clock import device_memory

    try:
        with device_memory(device):
            return _time_both(spec_path, overrides, device, reps)
    except torch.OutOfMemoryError as exc:
        first = f"{type(exc).__name__}: {exc}".splitlines()[0][:200]
    gc.collect()  # the failed attempt's tensors, out of the traceback's frames now
    torch.cuda.empty_cache()
    with device_memory(device, exclusive=True):
        got = _time_both(spec_path, overrides, device, reps)
    return {**got, "reran_alone": first}


def _time_both(spec_path: str, overrides: dict[str, Any], device: str, reps: int) -> dict[str, Any]:
    import torch

    from platforms.clock import device_busy, device_clock
    from workbench.harness.plan import set_tf32
    from workbench.spec import load_spec

    spec = load_spec(spec_path, overrides, module_name="wb_compile_baseline")
    set_tf32(spec.allow_tf32)  # the harness's rule for the reference: IEEE fp32 unless the spec allows TF32
    torch.manual_seed(1234)
    with device_busy(device):  # GPU work, untimed: never beside another's timed window (`platforms.clock`)
        inputs = [x.to(device) if isinstance(x, torch.Tensor) else x for x in spec.module.get_inputs()]
        model = spec.module.Model(*spec.module.get_init_inputs()).to(device).eval()
        if device == "cuda":
            torch.cuda.synchronize()
    compiled = torch.compile(model)
    with torch.no_grad():
        # Compiled outside the clock, shared or not: compiles of other problems go on meanwhile, and a
        # network's compile (minutes) holding it shared would hold off every timed window. Its first run and
        # Inductor's benchmarks of its kernels' configs run inside that call: the one GPU work of the suite
        # not under the clock (docs/harness.md, still not covered).
        compiled(*inputs)
        if device == "cuda":
            torch.cuda.synchronize()
        with device_clock(device) as waited:  # no other timing on this GPU meanwhile (the harness's included)
            eager_us = _median_us(lambda: model(*inputs), device, reps, warmup=3)
            compile_us = _median_us(lambda: compiled(*inputs), device, reps, warmup=3)
            eager2_us = _median_us(lambda: model(*inputs), device, reps, warmup=1)  # drift check
    eager = min(eager_us, eager2_us)
    return {"ok": True, "eager_us": eager, "compile_us": compile_us, "compile_over_eager": compile_us / eager,
            "eager_drift": abs(eager_us - eager2_us) / eager, "reps": reps, "mode": "default",
            "clock_wait_s": round(waited, 3)}


def compile_baseline(runner: Any, spec_path: str, overrides: dict[str, Any], device: str,
                     timeout_s: float) -> dict[str, Any]:
    """The cached compile baseline, or a new one timed in a child of the runner's fork server (a
    `SuiteRunner`: `.store`, `.call_isolated`); `ok` False with a reason."""
    key = _key(spec_path, overrides, device)
    hit = runner.store.baseline(key)
    if hit is not None:
        return {**hit, "cached": True}
    got = runner.call_isolated("compile_baseline", {"spec_path": spec_path, "overrides": overrides,
                                                    "device": device}, timeout_s)
    if got.get("ok"):
        runner.store.put_baseline(key, got)
    else:
        log.warning("torch.compile baseline of %s failed: %s", spec_path, got.get("diagnosis"))
    return {**got, "cached": False}
