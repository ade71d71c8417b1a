"""Lab book, frozen: ran at commit 7513a75 as `case_studies.run_gpu_part1`; results:
results/case_studies/{conv1d,optimized_fm,pffn}/ (bench.csv, gpu_run*_checks.json, final_checks.json).
Nothing imports this file and it is not maintained: its imports name the modules as they were at 7513a75;
to re-run it, check that commit out. The maintained benchmark is `benchmarks/case_studies/run.py`.

One GPU call that checks and times the three compute case studies (conv1d, Optimized FM, PFFN).

    python case_studies/run_gpu_part1.py --out "$OUT" [--quick] [--budget-s 420] [--commit SHA]

1. correctness on the GPU: each kernel against its reference on small odd shapes in every dtype,
   through the fixed config, the autotuned path and the probe-instrumented build (PROBES=True);
2. the production sweeps of every case (eager, CUDA-graph replay, torch.compile default, our kernel),
   then conv1d's tuning table (every TMA autotune config at the production shapes), then the other
   sweeps, then the `max_autotune` sweeps, each phase under its share of the time budget (rows past
   the budget are recorded as skipped).

Writes `<case>.csv` (one row per shape x dtype x contender x launch mode, provenance on every row),
`checks.json` (correctness checks, the autotuner's choices, the conv1d tuning table) and `log.txt` to
`--out`. `--quick` runs only the production sweeps and no max-autotune (a first smoke run).
"""
from __future__ import annotations

import argparse
import json
import logging
import sys
import time
import traceback
from pathlib import Path
from typing import Any

import torch

from case_studies.common.results import write_rows
from case_studies.common.runner import BenchmarkDecl, run_benchmark
from case_studies.common.timing import bench

log = logging.getLogger("run_gpu_part1")
CASES = ("conv1d", "optimized_fm", "pffn")


def _case_modules(name: str) -> tuple[Any, Any, Any]:
    import importlib

    return (importlib.import_module(f"case_studies.{name}.bench"),
            importlib.import_module(f"case_studies.{name}.kernel"),
            importlib.import_module(f"case_studies.{name}.reference"))


def _gpu_checks(device: str = "cuda", which: tuple[str, ...] = CASES) -> list[dict[str, Any]]:
    """Each selected kernel against its reference on small odd shapes, every dtype, two build paths.
    Only the selected case studies are imported: one that does not build cannot stop the others' run."""
    g = torch.Generator().manual_seed(0)

    def rnd(*shape: int, scale: float = 1.0) -> torch.Tensor:
        return torch.randn(*shape, generator=g) * scale

    tol = {"float16": (1e-2, 1e-2), "bfloat16": (6e-2, 2e-2), "float32": (1e-2, 1e-2)}
    # (case, shape, kernel(tensors, cfg, probes), reference(tensors), tensors, dtypes)
    cases: list[tuple] = []
    # (kept small: every compile costs lease time; the benchmark re-checks every timed shape vs eager)
    conv_shapes = [(3, 5, 7, 123, 3, 1, 1), (4, 32, 17, 64, 3, 1, 1), (2, 96, 96, 200, 5, 1, 2),
                   (2, 32, 24, 29, 3, 1, 0)]   # padding 0 at odd L: wrong values on the H200 once (conv1d pad0_bug/)
    if "conv1d" in which:
        from case_studies.conv1d import kernel as ck
        from case_studies.conv1d.reference import conv1d_reference
    for (b, ci, co, l, k, s, p) in (conv_shapes if "conv1d" in which else []):
        for path in ("auto", "gather"):
            cases.append(("conv1d", f"B{b} Cin{ci} Cout{co} L{l} K{k} s{s} p{p} {path}",
                          lambda t, cfg, pr, s=s, p=p, path=path: ck.conv1d(*t, s, p, config=cfg, probes=pr,
                                                                            path=path),
                          lambda t, s=s, p=p: conv1d_reference(*t, s, p),
                          (rnd(b, ci, l), rnd(co, ci, k, scale=(ci * k) ** -0.5), rnd(co, scale=0.1)),
                          ("float16", "float32") if ci > 5 else ("bfloat16",)))
    if "optimized_fm" in which:
        from case_studies.optimized_fm import kernel as fk
        from case_studies.optimized_fm.reference import optimized_fm_reference
    for (b, n, d, kk) in ([(5, 5, 123, 7), (3, 128, 224, 64)] if "optimized_fm" in which else []):
        cases.append(("optimized_fm", f"B{b} N{n} D{d} K{kk}",
                      lambda t, cfg, pr: fk.optimized_fm(*t, config=cfg, probes=pr),
                      lambda t: optimized_fm_reference(*t),
                      (rnd(b, n, d, scale=d ** -0.25), rnd(n, kk, scale=n ** -0.5)), ("float16", "bfloat16")))
    if "pffn" in which:
        from case_studies.pffn import kernel as pk
        from case_studies.pffn.reference import pffn_reference
    for (n, b, d, kk) in ([(2, 5, 123, 48), (3, 70, 512, 256)] if "pffn" in which else []):
        cases.append(("pffn", f"N{n} B{b} D{d} K{kk}",
                      lambda t, cfg, pr: pk.pffn(*t, config=cfg, probes=pr),
                      lambda t: pffn_reference(*t),
                      (rnd(n, b, d), rnd(n, d, kk, scale=d ** -0.5), rnd(n, kk, d, scale=kk ** -0.5),
                       1 + rnd(kk, scale=0.1), 1 + rnd(d, scale=0.1)), ("float16", "bfloat16")))
    out = []
    for name, shape, run, ref_fn, tensors, dtypes in cases:
        for dt in dtypes:
            dev = [t.to(device, getattr(torch, dt)) for t in tensors]
            ref = ref_fn(dev).float()
            paths = [("fixed", {}, False)]
            if device == "cuda" and "gather" not in shape:   # the interpreter cannot run proton's probe ops
                paths.append(("probes", {}, True))
            for path, cfg, probes in paths:
                rec: dict[str, Any] = {"case": name, "dtype": dt, "shape": shape, "path": path}
                try:
                    o = run(dev, cfg, probes).float()
                    atol, rtol = tol[dt]
                    rec.update(ok=bool(torch.allclose(o, ref, atol=atol, rtol=rtol)),
                               max_abs_err=float((o - ref).abs().max()), max_ref=float(ref.abs().max()))
                except Exception as e:
                    rec.update(ok=False, error=f"{type(e).__name__}: {e}\n{traceback.format_exc()[-1500:]}")
                out.append(rec)
                if rec["ok"]:
                    log.info("check %s %s %s %s: ok (max abs err %.2e)", name, dt, shape, path,
                             rec["max_abs_err"])
                else:
                    log.error("check FAILED %s", rec)
    return out


_TMA_PROBE = """
import torch
from case_studies.conv1d.kernel import conv1d, tma_supported
from case_studies.conv1d.reference import conv1d_reference
torch.manual_seed(0)
# padding 0 first: no box can start below 0 there, so a failure there is not the negative-start suspect
for (b, ci, co, l, k, p, cfg) in [(4, 32, 32, 64, 1, 0, {}), (4, 32, 32, 64, 3, 1, {}),
                                  (3, 96, 96, 200, 5, 2, {}), (2048, 96, 96, 200, 3, 1, None)]:
    for dt in (torch.float16, torch.float32):
        x = torch.randn(b, ci, l, device="cuda", dtype=dt)
        w = torch.randn(co, ci, k, device="cuda", dtype=dt) / (ci * k) ** 0.5
        bias = torch.randn(co, device="cuda", dtype=dt)
        assert tma_supported(x, w, 1, p)
        y = conv1d(x, w, bias, 1, p, config=cfg, path="tma")
        r = conv1d_reference(x, w, bias, 1, p)
        torch.cuda.synchronize()
        err = (y.float() - r.float()).abs().max().item()
        print("TMA", b, ci, co, l, k, dt, "max abs err", err)
        assert err < 2e-2, err
"""


def _probe_tma(timeout_s: float = 150.0) -> dict[str, Any]:
    """Launch the TMA path in a child process first: an illegal instruction poisons the CUDA context of
    the process it happens in, and the rest of the run must survive it (the gather path is the default)."""
    import os
    import subprocess

    try:
        r = subprocess.run([sys.executable, "-c", _TMA_PROBE], capture_output=True, text=True,
                           timeout=timeout_s, env={**os.environ, "CONV1D_TMA": "1"})
        ok, tail = r.returncode == 0, (r.stdout + r.stderr)[-3000:]
    except subprocess.TimeoutExpired as e:
        ok, tail = False, f"timeout after {timeout_s} s: {e}"
    from case_studies.conv1d import kernel as ck

    ck.TMA_ENABLED = ok          # off by default (kernel.py): on for this run only if the probe passed
    if ok:
        os.environ["CONV1D_TMA"] = "1"
    log.info("TMA probe %s\n%s", "ok: conv1d uses the TMA path" if ok else
             "FAILED: conv1d uses the gather kernel", tail)
    return {"ok": ok, "output": tail}


def _conv1d_tuning_table() -> list[dict[str, Any]]:
    """Every conv1d TMA autotune config at the production shapes, plain launches (for the README and for
    the offline search to compare against)."""
    from case_studies.conv1d import bench as cb
    from case_studies.conv1d import kernel as ck

    rows = []
    p = {"B": 2048, "C_in": 96, "C_out": 96, "L": 200, "K": 3, "stride": 1, "padding": 1}
    for dt in ("float16", "float32"):
        inputs = cb.make_inputs(p, getattr(torch, dt), "cuda")
        for bl, bco, bci, nw, ns in (ck.TMA_AUTOTUNE_SPACE if ck.TMA_ENABLED else []):
            cfg = {"BLOCK_L": bl, "BLOCK_CO": bco, "BLOCK_CI": bci, "num_warps": nw, "num_stages": ns}
            try:
                t = bench(lambda cfg=cfg, inputs=inputs: ck.conv1d(*inputs, config=cfg, path="tma"),
                          warmup_ms=5, rep_ms=20)
                rows.append({"dtype": dt, **cfg, "median_us": t.median_us, "p20_us": t.p20_us,
                             "p80_us": t.p80_us})
            except Exception as e:
                rows.append({"dtype": dt, **cfg, "error": f"{type(e).__name__}: {e}"[:300]})
            log.info("tuning %s", rows[-1])
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--budget-s", type=float, default=420.0)
    ap.add_argument("--commit", default=None, help="the git commit (the device copy has no .git)")
    ap.add_argument("--cases", default=",".join(CASES))
    args = ap.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s",
                        handlers=[logging.StreamHandler(sys.stdout), logging.FileHandler(out / "log.txt")])
    t0 = time.perf_counter()
    if not torch.cuda.is_available():
        log.error("no CUDA device: this script measures on a GPU")
        return 2
    torch.backends.cudnn.benchmark = True    # as the baselines were measured
    from workbench.provenance import collect

    prov = collect()
    if args.commit:
        prov["commit"] = args.commit
    log.info("provenance %s", prov)
    checks: dict[str, Any] = {"provenance": prov, "quick": args.quick}
    cases = [c for c in args.cases.split(",") if c]

    def save_checks() -> None:
        (out / "checks.json").write_text(json.dumps(checks, indent=1, default=str))

    if "conv1d" in cases:
        checks["tma_probe"] = _probe_tma()
        save_checks()
    checks["correctness"] = _gpu_checks(which=tuple(cases))
    save_checks()
    log.info("checks done at %.0f s: %d/%d ok", time.perf_counter() - t0,
             sum(c["ok"] for c in checks["correctness"]), len(checks["correctness"]))

    rows: dict[str, list[dict[str, Any]]] = {c: [] for c in cases}
    # production shapes of every case first, then the sweeps, then max-autotune: a short lease that runs
    # out keeps the rows that matter most
    phases = [("production", lambda n: n.startswith("production")),
              ("sweeps", lambda n: not n.startswith("production") and n != "max_autotune"),
              ("max_autotune", lambda n: n == "max_autotune")]
    if args.quick:
        phases = phases[:1]
    n_slots = len(phases) * len(cases)
    slot = 0
    for phase, wanted in phases:
        for name in cases:
            slot += 1
            bench_mod, kernel_mod, _ = _case_modules(name)
            decl = BenchmarkDecl.load(bench_mod.BENCHMARK)
            decl.sweeps = [s for s in decl.sweeps if wanted(s.name)]
            left = args.budget_s - (time.perf_counter() - t0)
            share = left / (n_slots - slot + 1) * (2.0 if phase == "production" else 1.0)
            log.info("phase %s %s: %.0f s of budget (%.0f s left)", phase, name, share, left)
            try:
                got = run_benchmark(decl, bench_mod.case(), device="cuda", time_budget_s=max(share, 1.0))
                rows[name].extend(r.to_dict() for r in got)
            except Exception:
                log.exception("%s phase %s failed", name, phase)
                checks.setdefault("failures", []).append({"case": name, "phase": phase,
                                                          "error": traceback.format_exc()[-2000:]})
            checks.setdefault("autotuned", {})[name] = kernel_mod.best_config()
            checks["autotuned"][name] = {str(k): v for k, v in checks["autotuned"][name].items()}
            write_rows(rows[name], out / f"{name}.csv", prov)
            save_checks()
            if phase == "production" and name == "conv1d":
                checks["conv1d_tuning"] = _conv1d_tuning_table()
                save_checks()
    log.info("done in %.0f s", time.perf_counter() - t0)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
