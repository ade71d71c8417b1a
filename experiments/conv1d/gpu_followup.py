"""Lab book, frozen: ran at commit 8340f0e as `case_studies.conv1d.gpu_followup`; results:
results/case_studies/conv1d/ (gpu_run8_followup.csv, gpu_run8_followup.json, gpu_run8_log.txt, proton_gather_probes/).
Nothing imports this file and it is not maintained: its imports name the modules as they were at 8340f0e;
to re-run it, check that commit out. The maintained benchmark is `benchmarks/case_studies/run.py`.

A follow-up GPU call after the `final_gpu` benchmark: the cached plain-launch path of the gather kernel,
the rows it changes, inductor's max-autotune, and the probe profile that run could not finish.

    PYTHONPATH=. python -m case_studies.conv1d.gpu_followup --out "$OUT" --budget-s 150 --commit SHA

1. GPU checks of the recorded-plan path (`kernel.plan_key`): the second call of a signature (which goes
   straight to the compiled launcher) against F.conv1d, after an in-place weight update, with a new weight
   of the same shape, without bias;
2. the `batch` sweep again (B 256 was launch-bound with plain launches: 85 us against 28.5 as a graph);
3. the `max_autotune` sweep (conv2d + inductor max-autotune, fp16 and fp32), while the budget lasts;
4. the probe regions of the shipped gather kernel at the production shape in fp16, in a child process
   (the previous attempt ended the whole process inside the probe session).
Rows go to `conv1d_followup.csv` (merge into `bench.csv` with `--merge`), checks to `followup.json`.
"""
from __future__ import annotations

import argparse
import json
import logging
import subprocess
import sys
import tarfile
import time
import traceback
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F

from case_studies.conv1d.reference import conv1d_exact

log = logging.getLogger("conv1d.gpu_followup")
PLAN_SHAPES = [(2048, 96, 96, 200, 3, 1, 1), (256, 96, 96, 200, 3, 1, 1), (3, 5, 7, 123, 3, 1, 1),
               (2, 40, 24, 29, 3, 2, 1)]




def _check(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor | None, s: int, p: int,
           atol: float) -> tuple[float, bool]:
    from case_studies.conv1d import kernel as ck

    y, r = ck.conv1d(x, w, b, s, p).float(), conv1d_exact(x, w, b, s, p)
    return float((y - r).abs().max()), bool(torch.allclose(y, r, atol=atol, rtol=1e-2))


def plan_checks() -> list[dict[str, Any]]:
    from case_studies.conv1d import kernel as ck

    g = torch.Generator().manual_seed(1)
    out = []
    for (bsz, ci, co, length, k, s, p) in PLAN_SHAPES:
        for dt, atol in (("float16", 1e-2), ("bfloat16", 6e-2)):
            dtype = getattr(torch, dt)
            x = torch.randn(bsz, ci, length, generator=g).to("cuda", dtype)
            w = (torch.randn(co, ci, k, generator=g) * (ci * k) ** -0.5).to("cuda", dtype)
            b = (torch.randn(co, generator=g) * 0.1).to("cuda", dtype)
            rec: dict[str, Any] = {"shape": (bsz, ci, co, length, k, s, p), "dtype": dt}
            try:
                n0 = len(ck._plans.plans)
                ck.conv1d(x, w, b, s, p)                        # records the plan
                rec["recorded"] = len(ck._plans.plans) > n0
                res = {"hit": _check(x, w, b, s, p, atol)}
                w.mul_(-0.5)                                      # in place: the pack cache must repack
                res["in_place"] = _check(x, w, b, s, p, atol)
                w2 = torch.randn_like(w) * (ci * k) ** -0.5       # a new weight of the same shape
                res["new_weight"] = _check(x, w2, b, s, p, atol)
                ck.conv1d(x, w2, None, s, p)                      # records the no-bias plan
                res["no_bias"] = _check(x, w2, None, s, p, atol)
                torch.cuda.synchronize()
                rec.update({n: e for n, (e, _) in res.items()}, ok=all(ok for _, ok in res.values()))
            except Exception as e:
                rec.update(ok=False, error=f"{type(e).__name__}: {e}"[:400])
            out.append(rec)
            log.log(logging.INFO if rec["ok"] else logging.ERROR, "plan check %s", rec)
    return out


def host_cost(n: int = 200) -> dict[str, float]:
    """Host microseconds a call at B 256 fp16 (GPU idle between calls: synchronize each time)."""
    from case_studies.conv1d import bench as cb
    from case_studies.conv1d import kernel as ck

    p = {"B": 256, "C_in": 96, "C_out": 96, "L": 200, "K": 3, "stride": 1, "padding": 1}
    x, w, b, s, pad = cb.make_inputs(p, torch.float16, "cuda")
    res = {}
    def unplanned() -> torch.Tensor:
        ck.PLAN_CACHE = False
        try:
            return ck.conv1d(x, w, b, s, pad)
        finally:
            ck.PLAN_CACHE = True

    for name, fn in (("plan", lambda: ck.conv1d(x, w, b, s, pad)), ("triton_launch", unplanned),
                     ("eager", lambda: F.conv1d(x, w, b, stride=s, padding=pad))):
        fn()
        torch.cuda.synchronize()
        ts = []
        for _ in range(n):
            t0 = time.perf_counter()
            fn()
            ts.append(time.perf_counter() - t0)
            torch.cuda.synchronize()
        ts.sort()
        res[name] = ts[len(ts) // 2] * 1e6
    return res


def probes_child(out: Path) -> None:
    """Runs in a child process: the probe regions of the autotuned gather config at the production shape."""
    import profiling
    from case_studies.conv1d import bench as cb
    from case_studies.conv1d import kernel as ck

    p = {"B": 2048, "C_in": 96, "C_out": 96, "L": 200, "K": 3, "stride": 1, "padding": 1}
    x, w, b, s, pad = cb.make_inputs(p, torch.float16, "cuda")
    cfg = dict(ck.fixed_config(), path="gather")       # the autotuned winner (AUTOTUNE_SPACE's first row)
    ck.conv1d(x, w, b, s, pad, config=cfg, probes=True)
    torch.cuda.synchronize()
    with profiling.probe_session(out / "conv1d_gather_probes", kernel_times=True):
        for _ in range(2):
            ck.conv1d(x, w, b, s, pad, config=cfg, probes=True)
        torch.cuda.synchronize()
    prof = profiling.load(out / "conv1d_gather_probes.hatchet")
    (out / "probe_summary.txt").write_text(profiling.summarize(prof))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--budget-s", type=float, default=150.0)
    ap.add_argument("--commit", default=None)
    ap.add_argument("--probes-child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    if args.probes_child:
        probes_child(out)
        return 0
    t0 = time.perf_counter()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s",
                        handlers=[logging.StreamHandler(sys.stdout), logging.FileHandler(out / "log.txt")])
    torch.backends.cudnn.benchmark = True
    from case_studies.conv1d.final_gpu import configs_for

    from case_studies.common.launch import warm_compile_cache
    from case_studies.common.results import write_rows
    from case_studies.common.runner import BenchmarkDecl, run_benchmark
    from case_studies.conv1d import bench as cb
    from workbench.provenance import collect

    prov = collect()
    if args.commit:
        prov["commit"] = args.commit
    res: dict[str, Any] = {"provenance": prov}

    def left() -> float:
        return args.budget_s - (time.perf_counter() - t0)

    def save() -> None:
        (out / "followup.json").write_text(json.dumps(res, indent=1, default=str))

    jobs = [("conv1d", {k: v for k, v in shp.items() if k != "name"}, dt, c)
            for sw in cb.BENCHMARK["sweeps"] if sw["name"] == "batch" for shp in sw["shapes"]
            for dt in sw["dtypes"] for c in configs_for({k: v for k, v in shp.items() if k != "name"}, dt)]
    jobs += [("conv1d", {"B": bsz, "C_in": ci, "C_out": co, "L": length, "K": k, "stride": s, "padding": p}, dt, c)
             for (bsz, ci, co, length, k, s, p) in PLAN_SHAPES for dt in ("float16", "bfloat16")
             for c in configs_for({"B": bsz, "C_in": ci, "C_out": co, "L": length, "K": k, "stride": s,
                                   "padding": p}, dt)]
    warm = warm_compile_cache(jobs, timeout_s=30.0)
    res["prewarm"] = {"jobs": len(jobs), "s": time.perf_counter() - t0, "errors": [r for r in warm if r[2]]}
    res["plan_checks"] = plan_checks()
    res["host_us_b256_fp16"] = host_cost()
    log.info("plan checks %d/%d ok; host us %s", sum(c["ok"] for c in res["plan_checks"]),
             len(res["plan_checks"]), res["host_us_b256_fp16"])
    save()

    rows: list[dict[str, Any]] = []
    for phase, share in (("batch", 0.4), ("max_autotune", 1.0)):
        budget = (left() - 35.0) * share      # 35 s kept for the probe child
        if budget < 15:
            res[phase] = f"skipped: {left():.0f} s left"
            continue
        decl = BenchmarkDecl.load(cb.BENCHMARK)
        decl.sweeps = [s for s in decl.sweeps if s.name == phase]
        try:
            rows.extend(r.to_dict() for r in run_benchmark(decl, cb.case(), device="cuda",
                                                           time_budget_s=budget))
        except Exception:
            res.setdefault("failures", []).append({"phase": phase, "error": traceback.format_exc()[-2000:]})
        write_rows(rows, out / "conv1d_followup.csv", prov)
        save()

    try:
        cp = subprocess.run([sys.executable, "-m", "case_studies.conv1d.gpu_followup", "--out", str(out / "proton"),
                             "--probes-child"], capture_output=True, text=True, timeout=max(left() - 3, 10))
        res["probes"] = {"rc": cp.returncode, "stderr_tail": cp.stderr[-2500:]}
    except subprocess.TimeoutExpired:
        res["probes"] = {"rc": None, "error": "timed out"}
    if (out / "proton").exists():
        with tarfile.open(out / "proton_followup.tar.gz", "w:gz") as tf:
            tf.add(out / "proton", arcname="proton")
    res["total_s"] = time.perf_counter() - t0
    save()
    log.info("done in %.0f s", res["total_s"])
    return 0


def merge(followup_csv: Path, bench_csv: Path) -> int:
    """Replace the bench.csv rows of every (sweep, shape, dtype) group the follow-up measured with its rows
    (a group's contenders were measured side by side in one run); returns the number of rows replaced."""
    from case_studies.common.results import read_rows

    new = read_rows(followup_csv)
    groups = {(r["sweep"], r["shape"], r["dtype"]) for r in new}
    old = read_rows(bench_csv)
    kept = [r for r in old if (r["sweep"], r["shape"], r["dtype"]) not in groups]
    fields: list[str] = []
    for r in old + new:
        fields.extend(k for k in r if k not in fields)
    import csv

    with bench_csv.open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=fields)
        w.writeheader()
        for r in kept + new:
            w.writerow({k: ("" if r.get(k) is None else r.get(k)) for k in fields})
    return len(old) - len(kept)


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "--merge":
        print(merge(Path(sys.argv[2]), Path(sys.argv[3])))
        raise SystemExit(0)
    raise SystemExit(main())
