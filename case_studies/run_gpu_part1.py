"""One GPU call that checks and times the three compute case studies (conv1d, Optimized FM, PFFN).

    python case_studies/run_gpu_part1.py --out "$OUT" [--quick] [--budget-s 420] [--commit SHA]

1. correctness on the GPU: each kernel against its reference on small odd shapes in every dtype,
   through the fixed config, the autotuned path and the probe-instrumented build (PROBES=True);
2. phase A: every declared sweep except `max_autotune` (eager, CUDA-graph replay, torch.compile
   default, our kernel), under a time budget;
3. conv1d only: every autotune config timed at the production shapes (the tuning table);
4. phase B: the `max_autotune` sweeps with what is left of the budget.

Writes `<case>.csv` (one row per shape x dtype x contender x launch mode, provenance on every row),
`checks.json` (correctness checks, the autotuner's choices, the conv1d tuning table) and `log.txt` to
`--out`. `--quick` runs only the production sweeps without torch.compile (a first smoke run).
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


def _gpu_checks(device: str = "cuda") -> list[dict[str, Any]]:
    """Each kernel against its reference on small odd shapes, every dtype, three build paths."""
    from case_studies.conv1d import kernel as ck
    from case_studies.conv1d.reference import conv1d_reference
    from case_studies.optimized_fm import kernel as fk
    from case_studies.optimized_fm.reference import optimized_fm_reference
    from case_studies.pffn import kernel as pk
    from case_studies.pffn.reference import pffn_reference

    g = torch.Generator().manual_seed(0)

    def rnd(*shape: int, scale: float = 1.0) -> torch.Tensor:
        return torch.randn(*shape, generator=g) * scale

    tol = {"float16": (1e-2, 1e-2), "bfloat16": (6e-2, 2e-2), "float32": (1e-2, 1e-2)}
    cases: list[tuple] = []   # (case, shape text, kernel(tensors, cfg, probes), reference(tensors), tensors)
    for (b, ci, co, l, k, s, p) in [(3, 5, 7, 123, 3, 1, 1), (2, 96, 96, 200, 5, 1, 2), (4, 33, 17, 64, 1, 2, 0)]:
        cases.append(("conv1d", f"B{b} Cin{ci} Cout{co} L{l} K{k} s{s} p{p}",
                      lambda t, cfg, pr, s=s, p=p: ck.conv1d(*t, s, p, config=cfg, autotune=cfg is None and not pr,
                                                             probes=pr),
                      lambda t, s=s, p=p: conv1d_reference(*t, s, p),
                      (rnd(b, ci, l), rnd(co, ci, k, scale=(ci * k) ** -0.5), rnd(co, scale=0.1))))
    for (b, n, d, kk) in [(5, 5, 123, 7), (7, 24, 224, 16), (3, 128, 224, 64)]:
        cases.append(("optimized_fm", f"B{b} N{n} D{d} K{kk}",
                      lambda t, cfg, pr: fk.optimized_fm(*t, config=cfg, autotune=cfg is None and not pr, probes=pr),
                      lambda t: optimized_fm_reference(*t),
                      (rnd(b, n, d, scale=d ** -0.25), rnd(n, kk, scale=n ** -0.5))))
    for (n, b, d, kk) in [(2, 5, 123, 48), (3, 70, 512, 256), (2, 64, 100, 256)]:
        cases.append(("pffn", f"N{n} B{b} D{d} K{kk}",
                      lambda t, cfg, pr: pk.pffn(*t, config=cfg, autotune=cfg is None and not pr, probes=pr),
                      lambda t: pffn_reference(*t),
                      (rnd(n, b, d), rnd(n, d, kk, scale=d ** -0.5), rnd(n, kk, d, scale=kk ** -0.5),
                       1 + rnd(kk, scale=0.1), 1 + rnd(d, scale=0.1))))
    out = []
    for dt in ("float16", "bfloat16", "float32"):
        for name, shape, run, ref_fn, tensors in cases:
            dev = [t.to(device, getattr(torch, dt)) for t in tensors]
            ref = ref_fn(dev).float()
            paths = [("fixed", {}, False), ("autotuned", None, False)]
            if device == "cuda":   # the interpreter cannot run proton's probe ops
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
                    log.info("check %s %s %s %s: ok (max abs err %.2e)", name, dt, shape, path, rec["max_abs_err"])
                else:
                    log.error("check FAILED %s", rec)
    return out


def _conv1d_tuning_table() -> list[dict[str, Any]]:
    """Every conv1d autotune config at the production shapes, plain launches (for the README and for the
    offline search to compare against)."""
    from case_studies.conv1d import bench as cb
    from case_studies.conv1d import kernel as ck

    rows = []
    p = {"B": 2048, "C_in": 96, "C_out": 96, "L": 200, "K": 3, "stride": 1, "padding": 1}
    for dt in ("float16", "float32"):
        inputs = cb.make_inputs(p, getattr(torch, dt), "cuda")
        for bn, bco, bci, nw, ns in ck.AUTOTUNE_SPACE:
            cfg = {"BLOCK_N": bn, "BLOCK_CO": bco, "BLOCK_CI": bci, "num_warps": nw, "num_stages": ns}
            try:
                t = bench(lambda cfg=cfg: ck.conv1d(*inputs, config=cfg), warmup_ms=10, rep_ms=40)
                rows.append({"dtype": dt, **cfg, "median_us": t.median_us, "p20_us": t.p20_us, "p80_us": t.p80_us})
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

    checks["correctness"] = _gpu_checks()
    save_checks()
    log.info("checks done at %.0f s: %d/%d ok", time.perf_counter() - t0,
             sum(c["ok"] for c in checks["correctness"]), len(checks["correctness"]))

    rows: dict[str, list[dict[str, Any]]] = {c: [] for c in cases}
    for phase in ("A", "B"):
        if phase == "B" and args.quick:
            break
        for name in cases:
            bench_mod, kernel_mod, _ = _case_modules(name)
            decl = BenchmarkDecl.load(bench_mod.BENCHMARK)
            if phase == "A":
                decl.sweeps = [s for s in decl.sweeps if s.name != "max_autotune"]
                if args.quick:
                    decl.sweeps = [s for s in decl.sweeps if s.name.startswith("production")]
                    for s in decl.sweeps:
                        s.contenders = [c for c in s.contenders if "compile" not in c]
            else:
                decl.sweeps = [s for s in decl.sweeps if s.name == "max_autotune"]
            left = args.budget_s - (time.perf_counter() - t0)
            # phase A keeps a share of the budget for the cases after this one and for phase B
            share = left / (len(cases) - cases.index(name) + (1 if phase == "A" and not args.quick else 0))
            log.info("phase %s %s: %.0f s of budget (%.0f s left)", phase, name, share, left)
            try:
                got = run_benchmark(decl, bench_mod.case(), device="cuda", time_budget_s=max(share, 1.0))
                rows[name].extend(r.to_dict() for r in got)
            except Exception:
                log.exception("%s phase %s failed", name, phase)
                checks.setdefault("failures", []).append({"case": name, "phase": phase,
                                                          "error": traceback.format_exc()[-2000:]})
            checks.setdefault("autotuned", {})[name] = {str(k): v for k, v in kernel_mod.best_config().items()}
            write_rows(rows[name], out / f"{name}.csv", prov)
            save_checks()
            if phase == "A" and name == "conv1d":
                checks["conv1d_tuning"] = _conv1d_tuning_table()
                save_checks()
    log.info("done in %.0f s", time.perf_counter() - t0)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
