"""The harness on a GPU, in one run: both of its clocks beside a clean do_bench, its throughput, its rejections.

    python benchmarks/lowering_gpu.py stage --picks 1:0:100:4 --dir .cache/harness_gpu   # here, on the CPU
    PYTHONPATH=. python benchmarks/harness_gpu.py run --stage .cache/harness_gpu --out DIR --budget-s 400

1. harness: the bundled examples, the six case-study kernels and the staged lowered KernelBench problems
   (published sizes) through one warm `Harness`, one new candidate after another (compile included):
   status, device time (CUDA-graph replay), wall time per call, the baseline's two, client wall time,
   harness overhead (client wall beyond compile, trials and the two contenders' timed rounds);
2. clean: the same pairs in a fresh process outside the harness: `ModelNew` and `Model` built as the
   harness builds them, inputs from `plan.generate_on` at the timed shape, `triton.testing.do_bench`
   (median; it clears L2 before every call) and CUDA events around back-to-back calls;
3. rejection: a candidate the static policy refuses, through a `Harness` not yet started: client wall.

Writes `agreement.csv` (one row per pair, both sides) and `summary.json` (ratios harness/do_bench,
candidates per hour, rejection time, provenance). With `--device cpu` (the interpreter) it dry-runs
the same code path at the specs' CPU sizes, without do_bench.
"""
from __future__ import annotations

import argparse
import csv
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

CASES = ["conv1d", "event_truncate", "mapid", "mbdt", "optimized_fm", "pffn"]
FIELDS = ["kind", "name", "status", "timing_basis", "device_us", "wall_us", "base_device_us", "base_wall_us",
          "clean_cand_bench_us", "clean_cand_events_us", "clean_base_bench_us", "clean_base_events_us",
          "ratio_device", "ratio_wall", "ratio_base_device", "speedup_harness", "speedup_clean",
          "client_wall_s", "overhead_s", "inputs", "error"]
OWN = ("compile_and_first_call", "correctness", "timing", "baseline_timing")


def _items(stage: Path | None, limit: int) -> list[dict]:
    items = [{"kind": "example", "name": d.name, "spec": str(d / "spec.py"), "cand": str(d / "candidate.py")}
             for d in sorted((ROOT / "examples").iterdir()) if (d / "candidate.py").is_file()]
    items += [{"kind": "case_study", "name": c, "spec": str(ROOT / "case_studies" / c / "spec.py"),
               "cand": str(ROOT / "case_studies" / c / "kernel.py")} for c in CASES]
    if stage is not None and (stage / "manifest.json").is_file():
        for row in json.loads((stage / "manifest.json").read_text()):
            if row.get("candidate"):
                items.append({"kind": f"kernelbench_l{row['level']}", "name": row["problem"],
                              "spec": str(stage / row["spec"]), "cand": str(stage / row["candidate"])})
    return items[:limit] if limit else items


def _harness_part(items: list[dict], device: str, deadline: float) -> list[dict]:
    from workbench.harness import Harness

    rows = []
    with Harness(device=device) as h:
        h.start()
        for it in items:
            if time.monotonic() > deadline:
                rows.append({**it, "status": "not_run", "error": "budget spent"})
                continue
            res = h.evaluate(it["spec"], Path(it["cand"]), trials=2, timeout_s=240)
            t = res.timings_s
            rows.append({**it, "status": res.status.value, "timing_basis": res.timing_basis,
                         "device_us": res.device_time_us, "wall_us": res.wall_time_us,
                         "base_device_us": res.baseline_device_time_us, "base_wall_us": res.baseline_wall_time_us,
                         "speedup_harness": res.speedup or None, "client_wall_s": t.get("client_wall"),
                         "overhead_s": t.get("client_wall", 0.0) - sum(t.get(k, 0.0) for k in OWN),
                         "inputs": res.details.get("inputs"), "error": res.error[:200].replace("\n", " "),
                         "timings_s": {k: round(v, 4) for k, v in t.items() if isinstance(v, (int, float))},
                         "reps": res.details.get("reps"), "device_stats": res.details.get("device"),
                         "judged": res.details.get("judged"),
                         "outbox_device_error": res.details.get("outbox_device_error"),
                         "stderr_tail": res.stdout_tail[-400:] if (res.details.get("judged") or {}).get("way")
                         != "device" else ""})
            print(f"{it['kind']:16s} {it['name'][:40]:40s} {res.summary()[:110]}", flush=True)
    return rows


def clean_main(items_path: str, out_path: str, device: str) -> int:
    """In a fresh process: each pair outside the harness, timed as a clean do_bench would time it."""
    import torch
    import triton.testing

    from workbench.harness import plan as _plan
    from workbench.spec import load_spec

    out = []
    for it in json.loads(Path(items_path).read_text()):
        row = {"name": it["name"], "kind": it["kind"]}
        try:
            spec = load_spec(it["spec"])
            plan = _plan.make_plan(spec, device, 1, None)
            base = spec.constants()
            si = [n for n, _ in plan.shapes].index(plan.timed_shape)
            _plan.apply_shape(spec, base, plan.shapes[si][1])
            _plan.set_tf32(spec.allow_tf32)
            init = _plan.build_init_inputs(spec, plan.model_seed(si), device)
            torch.manual_seed(plan.model_seed(si))
            ref = spec.module.Model(*init).to(device)
            mod = _load_module(it["cand"], f"cand_{len(out)}")
            torch.manual_seed(plan.model_seed(si))
            cand = mod.ModelNew(*init).to(device)
            inputs = _plan.generate_on(spec, 12345, device)
            with torch.no_grad():
                for label, m in (("cand", cand), ("base", ref)):
                    fn = (lambda m=m, x=inputs: m(*x))  # noqa: E731
                    fn()
                    torch.cuda.synchronize()
                    row[f"clean_{label}_bench_us"] = triton.testing.do_bench(fn, warmup=25, rep=100,
                                                                             return_mode="median") * 1e3
                    row[f"clean_{label}_events_us"] = _events_us(fn)
        except Exception as exc:  # noqa: BLE001 - a row keeps its reason, the next pair runs
            row["clean_error"] = f"{type(exc).__name__}: {exc}"[:200]
        out.append(row)
        print(f"clean {it['name'][:40]:40s} {row}", flush=True)
        torch.cuda.empty_cache()
        Path(out_path).write_text(json.dumps(out))  # after every pair: a timeout keeps what was measured
    return 0


def _load_module(path: str, name: str):  # noqa: ANN202 - a module
    import importlib.util

    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    sys.modules[name] = mod
    spec.loader.exec_module(mod)  # type: ignore[union-attr]
    return mod


def _events_us(fn, reps: int = 50) -> float:  # noqa: ANN001
    """CUDA events around `reps` back-to-back calls, per call: host launch cost included when it dominates."""
    import torch

    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    vals = []
    for _ in range(5):
        s.record()
        for _ in range(reps):
            fn()
        e.record()
        torch.cuda.synchronize()
        vals.append(s.elapsed_time(e) * 1e3 / reps)
    return statistics.median(vals)


def _ratio(a, b):  # noqa: ANN001, ANN202
    return a / b if a and b else None


def run_main(args: argparse.Namespace) -> int:
    from benchmarks import common

    run = common.start(args)
    deadline = time.monotonic() + args.budget_s
    items = _items(Path(args.stage) if args.stage else None, args.limit)
    if args.kinds:
        items = [it for it in items if it["kind"].startswith(tuple(common.split_list(args.kinds)))]
    if args.names:  # a rerun of some pairs only
        items = [it for it in items if it["kind"] == "kernelbench_l1" or it["name"] in common.split_list(args.names)]
    # 3. rejection first: a Harness not started yet, nothing of the GPU touched
    from workbench.harness import Harness

    t0 = time.perf_counter()
    rej = Harness(device=args.device).evaluate(ROOT / "examples" / "vector_add" / "spec.py",
                                               ROOT / "tests" / "harness" / "exploits" / "ctypes_use.py")
    rejection = {"status": rej.status.value, "client_wall_s": time.perf_counter() - t0}
    # 1. the harness, budgeted so the clean part has its share
    rows = _harness_part(items, args.device, deadline - args.clean_share * args.budget_s)
    # 2. clean, in a fresh process (GPU only)
    clean: dict[str, dict] = {}
    if args.device == "cuda":
        ok = [it for it, r in zip(items, rows) if r["status"] == "passed"]
        ipath, opath = run.out / "items.json", run.out / "clean.json"
        ipath.write_text(json.dumps(ok))
        left = max(30.0, deadline - time.monotonic())
        try:
            subprocess.run([sys.executable, __file__, "clean", str(ipath), str(opath), args.device], timeout=left,
                           check=False)
        except subprocess.TimeoutExpired:
            pass
        if opath.is_file():
            clean = {r["name"]: r for r in json.loads(opath.read_text())}
            opath.unlink()
        ipath.unlink()
    for r in rows:
        c = clean.get(r["name"], {})
        r.update({k: v for k, v in c.items() if k.startswith("clean_")})
        r["ratio_device"] = _ratio(r.get("device_us"), c.get("clean_cand_bench_us"))
        r["ratio_wall"] = _ratio(r.get("wall_us"), c.get("clean_cand_events_us"))
        r["ratio_base_device"] = _ratio(r.get("base_device_us"), c.get("clean_base_bench_us"))
        r["speedup_clean"] = _ratio(c.get("clean_base_bench_us"), c.get("clean_cand_bench_us"))
        if c.get("clean_error"):
            r["error"] = (r.get("error") or "") + " | clean: " + c["clean_error"]
    with open(run.out / "agreement.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=FIELDS, extrasaction="ignore")
        w.writeheader()
        w.writerows(rows)
    within = [r for r in rows if r.get("ratio_device") is not None]
    l1 = [r for r in rows if r["kind"] == "kernelbench_l1" and r["status"] != "not_run" and r.get("client_wall_s")]
    summary = {
        "device": args.device, "pairs": len(rows), "passed": sum(r["status"] == "passed" for r in rows),
        "device_time_within_10pct": sum(0.9 <= r["ratio_device"] <= 1.1 for r in within),
        "device_time_compared": len(within),
        "baseline_device_within_10pct": sum(0.9 <= (r.get("ratio_base_device") or 0) <= 1.1 for r in within),
        "median_ratio_device": statistics.median(r["ratio_device"] for r in within) if within else None,
        "overhead_median_s": statistics.median(r["overhead_s"] for r in rows if r.get("overhead_s") is not None)
        if rows else None,
        "kernelbench_l1_candidates_per_hour": 3600 * len(l1) / sum(r["client_wall_s"] for r in l1) if l1 else None,
        "kernelbench_l1_evaluations": len(l1),
        "rejection": rejection, "wall_s": run.elapsed(),
    }
    run.write_json("summary.json", {"summary": summary, "rows": rows})
    print(json.dumps(summary, indent=1))
    return 0


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] == "clean":
        return clean_main(argv[1], argv[2], argv[3])
    from benchmarks import common

    ap = common.parser(__doc__)
    ap.add_argument("cmd", choices=["run"])
    ap.add_argument("--stage", default=".cache/harness_gpu", help="staged lowered problems (lowering_gpu.py stage)")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--budget-s", type=float, default=400.0)
    ap.add_argument("--clean-share", type=float, default=0.3, help="part of the budget kept for the clean timing")
    ap.add_argument("--limit", type=int, default=0, help="first N pairs only (0: all)")
    ap.add_argument("--kinds", default="", help="comma-separated kinds to run: example, case_study, kernelbench")
    ap.add_argument("--names", default="", help="example and case-study names to run (all staged problems run)")
    return run_main(ap.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
