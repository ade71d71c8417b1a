"""Lab book, frozen: ran at commit 7513a75 as `case_studies.conv1d.final_gpu`; results: results/case_studies/conv1d/
(bench.csv, gpu_run7_checks.json, gpu_run7_log.txt, proton/conv1d_kernels*).
Nothing imports this file and it is not maintained: its imports name the modules as they were at 7513a75;
to re-run it, check that commit out. The maintained benchmark is `benchmarks/case_studies/run.py`.

The conv1d benchmark in one short GPU call: what `case_studies/run_gpu_part1.py --cases conv1d` records,
fitted into a lease of about 100 s.

    PYTHONPATH=. python -m case_studies.conv1d.final_gpu --out "$OUT" --budget-s 85 --commit SHA

1. every kernel the benchmark's autotuners will time (and the checks' builds) compiled in parallel
   worker processes first (Triton's disk cache), instead of serially inside the timed run;
2. small odd shapes against F.conv1d in fp32 (TF32 off), every dtype, the shipped path and the gather path;
3. the declared benchmark (`bench.BENCHMARK`): production, then the kernel-size / batch / out-of-
   distribution sweeps, then inductor's max-autotune only if time is left; rows to `conv1d.csv`;
4. Proton: a kernel-level profile (time per kernel: the channels-last path is two kernels) and the probe
   regions of the shipped kernels at the production shape, as `proton_conv1d.tar.gz`.
"""
from __future__ import annotations

import argparse
import json
import logging
import sys
import tarfile
import time
import traceback
from pathlib import Path
from typing import Any

import torch

from case_studies.conv1d.reference import conv1d_exact

log = logging.getLogger("conv1d.final_gpu")

CHECK_SHAPES = [(3, 5, 7, 123, 3, 1, 1), (4, 32, 17, 64, 3, 1, 1), (2, 96, 96, 200, 5, 1, 2),
                (2, 40, 24, 29, 3, 2, 1),
                (2, 32, 24, 29, 3, 1, 0)]   # padding 0 at odd L: wrong values on the H200 once (pad0_bug/)


def configs_for(params: dict[str, Any], dtype: str) -> list[dict[str, Any]]:
    """The configs the shipped path's autotuner times at this shape (as `kernel.conv1d` configs)."""
    from case_studies.conv1d import kernel as ck
    from case_studies.conv1d import tma

    path = ck.choose_path(params["B"], params["C_in"], params["L"], params["C_out"], params["K"],
                          params["stride"], params["padding"], getattr(torch, dtype))
    if path == "cl":
        return [{**dict(zip(tma.TMA_CONFIG_KEYS, row[:-1])), "num_warps": row[-1], "path": "cl"}
                for row in tma.CL_AUTOTUNE_SPACE]
    return [{**c.kwargs, "num_warps": c.num_warps, "num_stages": c.num_stages, "path": "gather"}
            for c in ck.autotune_configs()]


def chosen_config(dtype: torch.dtype) -> dict[str, Any]:
    """The config the shipped path's autotuner chose at the production shape (K = 3), as a conv1d config."""
    from case_studies.conv1d import kernel as ck
    from case_studies.conv1d import tma

    path = ck.choose_path(2048, 96, 200, 96, 3, 1, 1, dtype)
    tuner = tma._conv1d_tma_autotuned if path == "cl" else ck._conv1d_autotuned
    prod = (96, 96, 200, 200, 3) if path == "cl" else (96, 96, 200, 200, 1, 3)
    for key, c in tuner.cache.items():
        if tuple(key[:len(prod)]) == prod and str(dtype) in map(str, key):
            extra = {"num_stages": c.num_stages} if path == "gather" else {}
            return {**c.kwargs, "num_warps": c.num_warps, **extra, "path": path}
    return {"path": path}




def checks() -> list[dict[str, Any]]:
    from case_studies.conv1d import kernel as ck

    g = torch.Generator().manual_seed(0)
    out = []
    for (b, ci, co, length, k, s, p) in CHECK_SHAPES:
        x0 = torch.randn(b, ci, length, generator=g)
        w0 = torch.randn(co, ci, k, generator=g) * (ci * k) ** -0.5
        b0 = torch.randn(co, generator=g) * 0.1
        for dt in ("float16", "float32", "bfloat16"):
            x, w, bb = (t.to("cuda", getattr(torch, dt)) for t in (x0, w0, b0))
            r = conv1d_exact(x, w, bb, s, p)
            for path in ("auto", "gather"):
                rec: dict[str, Any] = {"shape": (b, ci, co, length, k, s, p), "dtype": dt, "path": path}
                try:
                    y = ck.conv1d(x, w, bb, s, p, config={}, path=path).float()
                    atol = {"float16": 1e-2, "bfloat16": 6e-2, "float32": 1e-2}[dt]
                    rec.update(ok=bool(torch.allclose(y, r, atol=atol, rtol=1e-2)),
                               max_abs_err=float((y - r).abs().max()),
                               took=ck.choose_path(b, ci, length, co, k, s, p, x.dtype) if path == "auto" else path)
                except Exception as e:
                    rec.update(ok=False, error=f"{type(e).__name__}: {e}"[:400])
                out.append(rec)
                log.log(logging.INFO if rec["ok"] else logging.ERROR, "check %s", rec)
    return out


def proton(out: Path) -> dict[str, Any]:
    """Kernel times and probe regions of the shipped path at the production shape, fp16 and fp32."""
    import profiling
    from case_studies.conv1d import bench as cb
    from case_studies.conv1d import kernel as ck

    pdir = out / "proton"
    pdir.mkdir(exist_ok=True)
    p = {"B": 2048, "C_in": 96, "C_out": 96, "L": 200, "K": 3, "stride": 1, "padding": 1}
    ins = {dt: cb.make_inputs(p, getattr(torch, dt), "cuda") for dt in ("float16", "float32")}
    flush = torch.empty(256 * 2**20 // 4, dtype=torch.int32, device="cuda")
    res: dict[str, Any] = {}
    for dt in ins:
        ck.conv1d(*ins[dt])
    torch.cuda.synchronize()
    try:
        with profiling.kernel_session(pdir / "conv1d_kernels") as s:
            for dt, inputs in ins.items():
                for _ in range(10):
                    flush.zero_()
                    with s.scope(dt):
                        ck.conv1d(*inputs)
            torch.cuda.synchronize()
        prof = profiling.load(pdir / "conv1d_kernels.hatchet")
        res["kernel_summary"] = profiling.summarize(prof, max_kernels=8)
        res["kernels_table"] = prof.kernels.to_dict("records")
    except Exception as e:
        res["kernel_error"] = f"{type(e).__name__}: {e}\n{traceback.format_exc()[-1000:]}"
    try:
        # the configs the autotuners chose, rebuilt with probe regions (compiled before the session opens)
        pinned = {}
        for dt, (x, w, b, s_, pad) in ins.items():
            pinned[dt] = chosen_config(x.dtype)
            ck.conv1d(x, w, b, s_, pad, config=pinned[dt], probes=True)
        torch.cuda.synchronize()
        res["probe_configs"] = pinned
        with profiling.probe_session(pdir / "conv1d_probes", kernel_times=True):
            for dt, inputs in ins.items():
                for _ in range(2):
                    ck.conv1d(*inputs, config=pinned[dt], probes=True)
            torch.cuda.synchronize()
        res["probe_summary"] = profiling.summarize(profiling.load(pdir / "conv1d_probes.hatchet"))
    except Exception as e:
        res["probe_error"] = f"{type(e).__name__}: {e}\n{traceback.format_exc()[-1000:]}"
    with tarfile.open(out / "proton_conv1d.tar.gz", "w:gz") as tf:
        tf.add(pdir, arcname="proton")
    return res


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--budget-s", type=float, default=85.0)
    ap.add_argument("--commit", default=None)
    args = ap.parse_args()
    t0 = time.perf_counter()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s",
                        handlers=[logging.StreamHandler(sys.stdout), logging.FileHandler(out / "log.txt")])
    torch.backends.cudnn.benchmark = True    # as the baselines were measured
    from case_studies.common.launch import warm_compile_cache
    from case_studies.common.results import write_rows
    from case_studies.common.runner import BenchmarkDecl, run_benchmark
    from case_studies.conv1d import bench as cb
    from case_studies.conv1d import kernel as ck
    from workbench.provenance import collect

    prov = collect()
    if args.commit:
        prov["commit"] = args.commit
    res: dict[str, Any] = {"provenance": prov}

    def save() -> None:
        (out / "checks.json").write_text(json.dumps(res, indent=1, default=str))

    def left() -> float:
        return args.budget_s - (time.perf_counter() - t0)

    jobs = []
    for sweep in cb.BENCHMARK["sweeps"]:
        if "triton" in sweep["contenders"]:
            for shape in sweep["shapes"]:
                p = {k: v for k, v in shape.items() if k != "name"}
                jobs += [("conv1d", p, dt, c) for dt in sweep["dtypes"] for c in configs_for(p, dt)]
    for (b, ci, co, length, k, s, pad) in CHECK_SHAPES:
        p = {"B": b, "C_in": ci, "C_out": co, "L": length, "K": k, "stride": s, "padding": pad}
        jobs += [("conv1d", p, dt, {"path": path}) for dt in ("float16", "float32", "bfloat16")
                 for path in ("auto", "gather")]
    warm = warm_compile_cache(jobs, timeout_s=min(40.0, max(5.0, left() - 50)))
    res["prewarm"] = {"jobs": len(jobs), "s": time.perf_counter() - t0, "errors": [r for r in warm if r[2]]}
    log.info("prewarm: %d jobs in %.0f s, %d errors", len(jobs), res["prewarm"]["s"], len(res["prewarm"]["errors"]))
    save()

    res["correctness"] = checks()
    log.info("checks at %.0f s: %d/%d ok", time.perf_counter() - t0, sum(c["ok"] for c in res["correctness"]),
             len(res["correctness"]))
    save()

    rows: list[dict[str, Any]] = []
    phases = [("production", lambda n: n == "production", 0.45),
              ("sweeps", lambda n: n not in ("production", "max_autotune"), 0.75),
              ("max_autotune", lambda n: n == "max_autotune", 1.0)]
    reserve = 12.0    # for the profile
    for phase, wanted, share in phases:
        budget = (left() - reserve) * share
        if phase == "max_autotune" and budget < 25:
            log.info("max_autotune skipped: %.0f s left", left())
            res["max_autotune"] = f"skipped: {left():.0f} s of the budget left"
            continue
        decl = BenchmarkDecl.load(cb.BENCHMARK)
        decl.sweeps = [s for s in decl.sweeps if wanted(s.name)]
        log.info("phase %s: %.0f s", phase, budget)
        try:
            got = run_benchmark(decl, cb.case(), device="cuda", time_budget_s=max(budget, 1.0))
            rows.extend(r.to_dict() for r in got)
        except Exception:
            log.exception("phase %s failed", phase)
            res.setdefault("failures", []).append({"phase": phase, "error": traceback.format_exc()[-2000:]})
        res["autotuned"] = {str(k): v for k, v in ck.best_config().items()}
        write_rows(rows, out / "conv1d.csv", prov)
        save()

    try:
        res["proton"] = proton(out)
    except Exception as e:
        res["proton"] = {"error": f"{type(e).__name__}: {e}\n{traceback.format_exc()[-1500:]}"}
    res["total_s"] = time.perf_counter() - t0
    save()
    log.info("done in %.0f s; autotuned %s", res["total_s"], res.get("autotuned"))
    pr = res["proton"]
    log.info("%s\n%s", pr.get("kernel_summary", pr.get("kernel_error", ""))[:2500],
             pr.get("probe_summary", pr.get("probe_error", ""))[:2500])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
