"""The case studies' benchmark driver: device checks, the declared benchmark, the dispatch pass, and the
new numbers next to the recorded ones.

    PYTHONPATH=. python benchmarks/case_studies/run.py --case conv1d --out OUT
        [--case all | conv1d,pffn,...] [--shapes production,b256_d256,...] [--modes plain,graph] [--compile]
        [--budget-s 60] [--fuzz 2] [--dispatch-from recorded|run] [--profile] [--commit SHA] [--smoke]

For each case study (`registry.py`), in one process:
1. on a GPU, every kernel build the run will need compiled first in parallel worker processes (Triton's
   disk cache), instead of serially inside the timed part;
2. correctness on the device (`case_studies.common.checks`): float kernels on small odd shapes in every
   dtype, fixed tiles, other paths and the probe build, against the reference at the dtype's tolerance;
   exact kernels (`ModelNew` against the spec's `Model`, bit for bit) on every named spec shape plus
   `--fuzz` fresh draws;
3. the declared benchmark (`<case>/bench.py: BENCHMARK`), reduced to the sweeps or shapes named by
   `--shapes` and the launch modes of `--modes`; torch.compile contenders only with `--compile` (tens of
   seconds of compilation a shape); every contender's output checked against the baseline's;
4. exact cases: the dispatching module measured next to the baseline and the kernel, deciding from the
   recorded CSV under `results/` (`--dispatch-from recorded`, what users get) or from this run's rows,
   on the benchmark's shapes and on shapes the recorded CSV lacks (`bench.DISPATCH_UNRECORDED`);
5. every row next to the recorded row of the same (shape, dtype, contender, mode) in
   `results/case_studies/<case>/bench.csv`: the ratio new / recorded;
6. `--profile` (float cases, GPU): Proton kernel times and probe regions at the benchmark's first shape.

Writes `<case>.csv`, `<case>_dispatch.csv`, `<case>_vs_recorded.csv` (provenance on every row),
`checks.json` (checks, the autotuners' picks, failures, seconds per phase), `summary.md` and `log.txt` to
`--out`. Exit status 0 when every check passed and no row is incorrect or failed, 1 otherwise, 2 on bad
usage. `--smoke` runs tiny shapes on the CPU (Triton's interpreter) to check the plumbing; its numbers are
not speed results.
"""
from __future__ import annotations

import copy
import json
import logging
import sys
import time
import traceback
from pathlib import Path
from typing import Any

if __package__ in (None, ""):   # run as a script: the repository root on the path, as with PYTHONPATH=.
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from workbench.env import ensure_interpreter_if_no_gpu  # noqa: E402  (before anything imports triton)

ensure_interpreter_if_no_gpu()

import torch  # noqa: E402
from tqdm import tqdm  # noqa: E402

from benchmarks import common  # noqa: E402
from benchmarks.case_studies.registry import CASES, CaseConfig, get_case  # noqa: E402

log = logging.getLogger("benchmarks.case_studies.run")
RESULTS = common.REPO / "results" / "case_studies"
DRIFT = 0.15      # a ratio new / recorded outside 1 +- DRIFT is flagged in the summary


def _ours(contender: str) -> bool:
    return contender.startswith(("triton", "dispatch"))


def select(benchmark: dict[str, Any], shapes: list[str], modes: list[str], with_compile: bool,
           smoke: CaseConfig | None = None) -> dict[str, Any]:
    """`benchmark` reduced to the sweeps named in `shapes` (all their shapes) or the shapes named there,
    the launch modes in `modes`, and no torch.compile contender unless `with_compile`. `smoke`: one sweep
    on that case's tiny shape, plain launches, short timings."""
    decl = copy.deepcopy(benchmark)
    kept = []
    for sweep in decl["sweeps"]:
        if shapes and sweep["name"] not in shapes:
            sweep["shapes"] = [s for s in sweep["shapes"] if s["name"] in shapes]
        if modes:
            sweep["modes"] = [m for m in sweep["modes"] if m in modes]
        if not with_compile:
            left = [c for c in sweep["contenders"] if "compile" not in c]
            # a sweep that was there for torch.compile (max_autotune, compiled_*) goes unless it still has
            # ours and a PyTorch contender to measure it against
            whole = left == sweep["contenders"] or (any(map(_ours, left)) and not all(map(_ours, left)))
            sweep["contenders"] = left if whole else []
        if sweep["shapes"] and sweep["modes"] and sweep["contenders"]:
            kept.append(sweep)
    decl["sweeps"] = kept
    if smoke is not None:
        decl["warmup_ms"], decl["rep_ms"] = 1, 3
        decl["sweeps"] = [dict(s, shapes=[{"name": "smoke", **smoke.smoke_shape}], modes=["plain"])
                          for s in kept[:1]]
    return decl


def warm_jobs(cfg: CaseConfig, decl: dict[str, Any], with_checks: bool) -> list[tuple]:
    """The compile jobs of a float case: its checks' builds and every config the autotuners will time."""
    from case_studies.common.checks import float_check_jobs

    configs_for = getattr(cfg.kernel(), "configs_for", None)
    jobs = float_check_jobs(cfg.name) if with_checks else []
    for sweep in decl["sweeps"]:
        if "triton" not in sweep["contenders"] or configs_for is None:
            continue
        for shape in sweep["shapes"]:
            p = {k: v for k, v in shape.items() if k != "name"}
            jobs += [(cfg.name, p, dt, c) for dt in sweep["dtypes"] for c in configs_for(p, dt)]
    return jobs


def recorded_rows(case: str, name: str = "bench.csv") -> list[dict[str, Any]]:
    from case_studies.common.results import read_rows

    path = RESULTS / case / name
    return read_rows(path) if path.exists() else []


def versus_recorded(rows: list[dict[str, Any]], recorded: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each "ok" row of this run next to the recorded median of the same (shape, dtype, contender, mode);
    a cell recorded twice (two sweeps) keeps its faster median."""
    def key(r: dict[str, Any]) -> tuple:
        return (r["shape"], r["dtype"], r["contender"], r["mode"])

    old: dict[tuple, dict[str, Any]] = {}
    for r in recorded:
        if r.get("status") == "ok" and r.get("median_us") is not None:
            if key(r) not in old or float(r["median_us"]) < float(old[key(r)]["median_us"]):
                old[key(r)] = r
    out = []
    for r in rows:
        if r.get("status") != "ok" or r.get("median_us") is None or key(r) not in old:
            continue
        o = old[key(r)]
        out.append({"shape": r["shape"], "dtype": r["dtype"], "contender": r["contender"], "role": r["role"],
                    "mode": r["mode"], "median_us": r["median_us"], "recorded_us": float(o["median_us"]),
                    "ratio": float(r["median_us"]) / float(o["median_us"]),
                    "recorded_commit": o.get("prov_commit"), "recorded_date": o.get("prov_date")})
    return out


def summary_table(case: str, rows: list[dict[str, Any]], kernels: tuple[str, ...], baseline: str = "eager") -> str:
    """Per (shape, dtype, mode): the baseline, the fastest of our kernels, the dispatcher, the speedups."""
    cells: dict[tuple, dict[str, float]] = {}
    for r in rows:
        if r.get("status") == "ok" and r.get("median_us") is not None:
            c = cells.setdefault((r["shape"], r["dtype"], r["mode"]), {})
            c[r["contender"]] = min(float(r["median_us"]), c.get(r["contender"], float("inf")))
    lines = [f"| {case} shape | dtype | mode | {baseline} us | best kernel | us | x {baseline} | dispatch us | "
             f"x {baseline} (dispatch) |", "|---|---|---|---|---|---|---|---|---|"]
    for (shape, dtype, mode), med in sorted(cells.items()):
        ours = {k: v for k, v in med.items() if k in kernels}
        if not ours or baseline not in med:
            continue
        best = min(ours, key=ours.get)
        disp = med.get("dispatch")
        lines.append(f"| {shape} | {dtype} | {mode} | {med[baseline]:.1f} | {best} | {ours[best]:.1f} | "
                     f"{med[baseline] / ours[best]:.2f}x | {'-' if disp is None else f'{disp:.1f}'} | "
                     f"{'-' if disp is None else f'{med[baseline] / disp:.2f}x'} |")
    return "\n".join(lines)


def dispatch_vs_eager(rows: list[dict[str, Any]], floor: float = 0.98) -> dict[str, Any]:
    """eager / dispatch per (shape, mode) measured in the dispatch pass: the rule is that the dispatching
    module is never below `floor` of eager."""
    med: dict[tuple, dict[str, float]] = {}
    for r in rows:
        if r.get("status") == "ok" and r.get("median_us") is not None:
            med.setdefault((r["shape"], r["mode"]), {})[r["contender"]] = float(r["median_us"])
    ratios = {f"{s} {m}": c["eager"] / c["dispatch"] for (s, m), c in med.items() if "eager" in c and "dispatch" in c}
    worst = min(ratios, key=ratios.get) if ratios else None
    return {"ratios": ratios, "min": ratios[worst] if worst else None, "worst": worst, "floor": floor,
            "holds": bool(ratios) and all(v >= floor for v in ratios.values())}


def drift_lines(case: str, vs: list[dict[str, Any]]) -> list[str]:
    if not vs:
        return [f"{case}: no row of this run matches a recorded row"]
    ratios = sorted(v["ratio"] for v in vs)
    med = ratios[len(ratios) // 2]
    out = [f"{case}: {len(vs)} rows matched the recorded ones; new / recorded median {med:.2f} "
           f"(range {ratios[0]:.2f}-{ratios[-1]:.2f})"]
    out += [f"  {v['shape']} {v['dtype']} {v['contender']} {v['mode']}: {v['median_us']:.1f} us, recorded "
            f"{v['recorded_us']:.1f} ({v['ratio']:.2f}x)" for v in vs if abs(v["ratio"] - 1) > DRIFT]
    return out


def profile(cfg: CaseConfig, decl: dict[str, Any], out: Path) -> dict[str, Any]:
    """Proton at the benchmark's first shape in each of its first sweep's dtypes: kernel times (CUPTI)
    of the shipped call, and the probe regions of the probe build at the fixed tiles."""
    import tarfile

    import profiling
    from case_studies.common.contenders import torch_dtype

    bench = cfg.bench()
    sweep = decl["sweeps"][0]
    params = {k: v for k, v in sweep["shapes"][0].items() if k != "name"}
    pdir = out / f"proton_{cfg.name}"
    pdir.mkdir(exist_ok=True)
    res: dict[str, Any] = {"shape": sweep["shapes"][0]["name"]}
    for dt in sweep["dtypes"]:
        inputs = bench.make_inputs(params, torch_dtype(dt), "cuda")
        bench.check_kernel(inputs, {}, True)        # compile the probe build outside the session
        torch.cuda.synchronize()
        try:
            with profiling.kernel_session(pdir / f"{dt}_kernels"):
                for _ in range(10):
                    bench.check_kernel(inputs, None, False)
                torch.cuda.synchronize()
            with profiling.probe_session(pdir / f"{dt}_probes", kernel_times=True):
                for _ in range(2):
                    bench.check_kernel(inputs, {}, True)
                torch.cuda.synchronize()
            res[dt] = {"kernels": profiling.summarize(profiling.load(pdir / f"{dt}_kernels.hatchet")),
                       "probes": profiling.summarize(profiling.load(pdir / f"{dt}_probes.hatchet",
                                                                    on_error="warn"))}
        except Exception as e:   # the benchmark's rows stand without the profile: report, go on
            res[dt] = {"error": f"{type(e).__name__}: {e}\n{traceback.format_exc()[-1000:]}"}
    with tarfile.open(out / f"proton_{cfg.name}.tar.gz", "w:gz") as tf:
        tf.add(pdir, arcname=pdir.name)
    return res


def run_case(cfg: CaseConfig, args: Any, run: common.Run, device: str, doc: dict[str, Any]) -> bool:
    """Steps 1-6 for one case; returns whether everything was correct. `doc` (checks.json) is filled in."""
    from case_studies.common.checks import exact_checks, float_checks
    from case_studies.common.launch import warm_compile_cache
    from case_studies.common.preprocessing import run_exact_benchmark
    from case_studies.common.results import write_rows
    from case_studies.common.runner import BenchmarkDecl, run_benchmark

    bench = cfg.bench()
    rec: dict[str, Any] = doc.setdefault("cases", {}).setdefault(cfg.name, {"seconds": {}})
    t = time.perf_counter()
    decl = select(bench.BENCHMARK, args.shapes, args.modes, args.compile and not args.smoke,
                  cfg if args.smoke else None)
    rec["sweeps"] = [{"name": s["name"], "shapes": [x["name"] for x in s["shapes"]], "dtypes": s["dtypes"],
                      "contenders": s["contenders"], "modes": s["modes"]} for s in decl["sweeps"]]
    if hasattr(bench, "PRECOMPILE"):
        bench.PRECOMPILE = False     # the driver warms only what this run will build (below)
    if not cfg.exact and device == "cuda":
        jobs = warm_jobs(cfg, decl, not args.no_checks)
        warm = warm_compile_cache(jobs, timeout_s=args.warm_timeout_s)
        rec["warm"] = {"jobs": len(jobs), "errors": [w for w in warm if w[2]]}
    rec["seconds"]["warm"] = round(time.perf_counter() - t, 1)

    ok = True
    t = time.perf_counter()
    if not args.no_checks:
        if cfg.exact:
            checks = exact_checks(cfg.name, device, 0 if args.smoke else args.fuzz,
                                  cfg.smoke_spec_shapes if args.smoke else None)
        else:
            checks = float_checks(cfg.name, device, limit=1 if args.smoke else None)
        rec["checks"] = checks
        rec["checks_ok"] = f"{sum(c['ok'] for c in checks)}/{len(checks)}"
        ok &= all(c["ok"] for c in checks)
        run.write_json("checks.json", doc)
    rec["seconds"]["checks"] = round(time.perf_counter() - t, 1)

    t = time.perf_counter()
    rows: list[dict[str, Any]] = []
    try:
        if cfg.exact:
            got = run_exact_benchmark(BenchmarkDecl.from_dict(decl), bench.case(), device=device,
                                      time_budget_s=args.budget_s)
        else:
            got = run_benchmark(BenchmarkDecl.from_dict(decl), bench.case(), device=device,
                                time_budget_s=args.budget_s)
        rows = [r.to_dict() for r in got]
    except Exception:
        log.exception("%s: benchmark failed", cfg.name)
        rec.setdefault("failures", []).append({"phase": "benchmark", "error": traceback.format_exc()[-2000:]})
        ok = False
    csv_a = write_rows(rows, run.out / f"{cfg.name}.csv", run.provenance)
    best = getattr(cfg.kernel(), "best_config", None)
    if best is not None:
        rec["autotuned"] = {str(k): v for k, v in best().items()}
    rec["seconds"]["benchmark"] = round(time.perf_counter() - t, 1)

    disp_rows: list[dict[str, Any]] = []
    if cfg.exact and hasattr(bench, "DISPATCH_CONTENDERS") and not args.no_dispatch:
        t = time.perf_counter()
        decl_b = copy.deepcopy(decl)
        decl_b["name"] = f"{cfg.name}_dispatch"
        decl_b["sweeps"] = [s for s in decl_b["sweeps"] if not s["name"].startswith("compiled")]
        if getattr(bench, "DISPATCH_UNRECORDED", None) and decl_b["sweeps"] and not args.smoke:
            # shapes the recorded CSV lacks: what the dispatcher decides there is measured too
            decl_b["sweeps"].append(dict(decl_b["sweeps"][0], name="unrecorded",
                                         shapes=copy.deepcopy(bench.DISPATCH_UNRECORDED)))
        for s in decl_b["sweeps"]:
            s["contenders"] = [c for c in bench.DISPATCH_CONTENDERS if args.compile or "compile" not in c]
        source = csv_a if args.dispatch_from == "run" else None     # None: the dispatch module's shipped table
        rec["dispatch_from"] = str(source) if source else "recorded (the dispatch module's DISPATCH_CSV)"
        try:
            disp_rows = [r.to_dict() for r in run_exact_benchmark(
                BenchmarkDecl.from_dict(decl_b), bench.case(dispatch_csv=source), device=device,
                time_budget_s=args.dispatch_budget_s)]
        except Exception:
            log.exception("%s: dispatch pass failed", cfg.name)
            rec.setdefault("failures", []).append({"phase": "dispatch", "error": traceback.format_exc()[-2000:]})
            ok = False
        write_rows(disp_rows, run.out / f"{cfg.name}_dispatch.csv", run.provenance)
        rec["seconds"]["dispatch"] = round(time.perf_counter() - t, 1)

    if disp_rows:
        rec["dispatch_vs_eager"] = dispatch_vs_eager(disp_rows)
    bad = [r for r in rows + disp_rows if r["status"] in ("incorrect", "error")]
    rec["bad_rows"] = [{k: r[k] for k in ("sweep", "shape", "dtype", "contender", "mode", "status", "error")}
                       for r in bad]
    ok &= not bad
    vs = versus_recorded(rows, recorded_rows(cfg.name)) + versus_recorded(
        disp_rows, recorded_rows(cfg.name, "bench_dispatch.csv"))
    write_rows(vs, run.out / f"{cfg.name}_vs_recorded.csv", run.provenance)
    rec["vs_recorded"] = drift_lines(cfg.name, vs)
    rec["table"] = summary_table(cfg.name, rows + disp_rows, cfg.kernel_names())
    if args.profile and not cfg.exact and device == "cuda" and decl["sweeps"]:
        t = time.perf_counter()
        try:
            rec["profile"] = profile(cfg, decl, run.out)
        except Exception as e:
            rec["profile"] = {"error": f"{type(e).__name__}: {e}\n{traceback.format_exc()[-1500:]}"}
        rec["seconds"]["profile"] = round(time.perf_counter() - t, 1)
    rec["ok"] = ok
    run.write_json("checks.json", doc)
    return ok


def main(argv: list[str] | None = None) -> int:
    ap = common.parser(__doc__)
    ap.add_argument("--case", required=True, help=f"all, or a comma list of: {', '.join(CASES)}")
    ap.add_argument("--shapes", default="", help="sweep or shape names of the declared benchmark (default all)")
    ap.add_argument("--modes", default="plain,graph", help="launch modes: plain, graph")
    ap.add_argument("--compile", action="store_true", help="include the torch.compile contenders")
    ap.add_argument("--budget-s", type=float, default=120.0, help="time budget of each case's benchmark")
    ap.add_argument("--dispatch-budget-s", type=float, default=40.0)
    ap.add_argument("--dispatch-from", choices=("recorded", "run"), default="recorded")
    ap.add_argument("--fuzz", type=int, default=2, help="exact cases: fresh draws per spec shape in the checks")
    ap.add_argument("--warm-timeout-s", type=float, default=60.0)
    ap.add_argument("--no-checks", action="store_true")
    ap.add_argument("--no-dispatch", action="store_true")
    ap.add_argument("--profile", action="store_true", help="Proton profiles of the float cases (GPU)")
    ap.add_argument("--smoke", action="store_true", help="tiny shapes on the CPU: the plumbing, not speed")
    args = ap.parse_args(argv)
    args.shapes, args.modes = common.split_list(args.shapes), common.split_list(args.modes)
    names = list(CASES) if args.case == "all" else common.split_list(args.case)
    try:
        cases = [get_case(n) for n in names]
    except KeyError as e:
        print(f"run.py: {e.args[0]}", file=sys.stderr)
        return 2
    if bad_modes := [m for m in args.modes if m not in ("plain", "graph")]:
        print(f"run.py: unknown launch mode(s) {bad_modes}: plain, graph", file=sys.stderr)
        return 2
    device = "cuda" if torch.cuda.is_available() else "cpu"
    if device == "cpu" and not args.smoke:
        print("run.py: no CUDA device: this driver measures on a GPU (use --smoke for a CPU plumbing check)",
              file=sys.stderr)
        return 2
    run = common.start(args)
    if device == "cuda":
        torch.backends.cudnn.benchmark = True    # as the baselines were measured
    doc: dict[str, Any] = {"argv": sys.argv[1:] if argv is None else argv, "device": device}
    ok = True
    for cfg in tqdm(cases, desc="case studies", unit="case"):
        try:
            ok &= run_case(cfg, args, run, device, doc)
        except Exception:          # one case that cannot even start must not cost the others their rows
            log.exception("%s failed", cfg.name)
            doc.setdefault("cases", {}).setdefault(cfg.name, {})["error"] = traceback.format_exc()[-2000:]
            ok = False
    doc["total_s"] = round(run.elapsed(), 1)
    run.write_json("checks.json", doc)
    lines = [f"# Case studies on {run.provenance.get('gpu', device)} ({run.provenance.get('date')}, commit "
             f"{run.provenance.get('commit')})", ""]
    for name, rec in doc.get("cases", {}).items():
        lines += [f"## {name}: {'ok' if rec.get('ok') else 'FAILED'}; checks {rec.get('checks_ok', '-')}; "
                  f"seconds {json.dumps(rec.get('seconds', {}))}", "", rec.get("table", ""), "",
                  *rec.get("vs_recorded", []), ""]
        if "dispatch_vs_eager" in rec:
            dv = rec["dispatch_vs_eager"]
            lines += [f"dispatch vs eager: min {dv['min']:.2f}x ({dv['worst']}) over {len(dv['ratios'])} cells; "
                      f"the >= {dv['floor']}x rule {'holds' if dv['holds'] else 'FAILS'}", ""] if dv["min"] else []
        lines += [f"- bad row: {json.dumps(b)[:300]}" for b in rec.get("bad_rows", [])]
        lines += [f"- failure in {f['phase']}: {f['error'].splitlines()[-1]}" for f in rec.get("failures", [])]
    (run.out / "summary.md").write_text("\n".join(lines) + "\n")
    log.info("\n".join(lines))
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
