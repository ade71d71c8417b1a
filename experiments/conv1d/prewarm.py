"""Lab book, frozen: ran at commit 7dd3557 as `case_studies.conv1d.prewarm`; results: none of its own (the parallel
compile tune_gpu.py ran first).
Nothing imports this file and it is not maintained: its imports name the modules as they were at 7dd3557;
to re-run it, check that commit out. The maintained benchmark is `benchmarks/case_studies/run.py`.

Compile the conv1d kernel for many (shape, dtype, config) cases in parallel processes before a
benchmark, so that the benchmark's autotuner finds every binary in Triton's on-disk cache.

A device lease pays for every second the GPU machine is held, and Triton compiles one kernel at a time
(1-3 s each): the benchmark's shapes times the autotune list times the dtypes is a minute of serial
compiling, a few seconds over the machine's cores. The compiled binaries are exactly what the first
launch would build (same arguments, same specialization), so nothing measured changes.

    python -m case_studies.conv1d.prewarm --jobs 12            # the BENCHMARK shapes x autotune configs
"""
from __future__ import annotations

import argparse
import logging
import os
import time
from concurrent.futures import ProcessPoolExecutor
from typing import Any

log = logging.getLogger(__name__)

Case = tuple[dict[str, Any], str, dict[str, Any] | None, bool]   # params, dtype, config (None: autotune list), probes


Task = tuple[dict[str, Any], str, dict[str, Any], int, int, bool]   # params, dtype, tiles, warps, stages, probes


def _tasks(cases: list[Case]) -> list[Task]:
    """One task per distinct compiled kernel (a case with config None: every autotune config)."""
    from case_studies.conv1d import kernel as ck

    out, seen = [], set()
    for p, dtype, config, probes in cases:
        if config is None:
            configs = [(dict(c.kwargs), c.num_warps, c.num_stages) for c in ck.autotune_configs()]
        else:
            cfg = dict(ck.fixed_config(), **config)
            configs = [({k: cfg[k] for k in ck.CONFIG_KEYS}, cfg["num_warps"], cfg["num_stages"])]
        for kw, nw, ns in configs:
            kw = ck.fit_config(kw, p["C_in"], p["C_out"])
            key = (tuple(sorted(p.items())), dtype, tuple(sorted(kw.items())), nw, ns, probes)
            if key not in seen:
                seen.add(key)
                out.append((p, dtype, kw, nw, ns, probes))
    return out


def _warm_one(task: Task) -> str:
    import torch

    from case_studies.conv1d import kernel as ck

    p, dtype, kw, nw, ns, probes = task
    dt = getattr(torch, dtype)
    n_total, meta = ck.launch_meta(p["B"], p["C_in"], p["L"], p["C_out"], p["K"], p["stride"], p["padding"],
                                   dt, True, probes)
    # warmup() compiles without launching: only dtype, alignment and n_total's specialization matter
    t = torch.empty(64, dtype=dt, device="cuda")
    try:
        ck._conv1d_kernel.warmup(t, t, t, t, n_total, grid=(1,), **meta, **kw, num_warps=nw, num_stages=ns)
    except Exception as e:   # an out-of-resources config fails here and at its launch alike
        return f"{p} {dtype} {kw}: {type(e).__name__}: {str(e)[:200]}"
    return ""


def warm(cases: list[Case], jobs: int = 8) -> list[str]:
    """Compile every case; returns the error lines (empty when all compiled)."""
    import multiprocessing

    t0 = time.perf_counter()
    tasks = _tasks(cases)
    with ProcessPoolExecutor(max_workers=jobs, mp_context=multiprocessing.get_context("spawn")) as ex:
        errs = [e for e in ex.map(_warm_one, tasks) if e]
    log.info("prewarm: %d kernels in %.1f s, %d errors", len(tasks), time.perf_counter() - t0, len(errs))
    return errs


def benchmark_cases() -> list[Case]:
    """Every shape and dtype of the declared benchmark with the autotune list, plus run_gpu_part1's
    correctness shapes with the fixed config (plain and probe-instrumented builds)."""
    from case_studies.conv1d.bench import BENCHMARK

    cases: list[Case] = []
    for sweep in BENCHMARK["sweeps"]:
        if "triton" not in sweep["contenders"]:
            continue
        for shape in sweep["shapes"]:
            p = {k: v for k, v in shape.items() if k != "name"}
            for dt in sweep["dtypes"]:
                cases.append((p, dt, None, False))
    for (b, ci, co, length, k, s, pad) in [(3, 5, 7, 123, 3, 1, 1), (4, 32, 17, 64, 3, 1, 1),
                                           (2, 96, 96, 200, 5, 1, 2)]:
        p = {"B": b, "C_in": ci, "C_out": co, "L": length, "K": k, "stride": s, "padding": pad}
        for dt in (("float16", "float32") if ci > 5 else ("bfloat16",)):
            cases += [(p, dt, {}, False), (p, dt, {}, True)]
    return cases


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", type=int, default=min(12, os.cpu_count() or 1))
    args = ap.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    for e in warm(benchmark_cases(), args.jobs):
        log.warning("prewarm: %s", e)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
