"""Lab book, frozen: ran at commit 7c70478 as `case_studies.run_gpu_part2`; results:
results/case_studies/{mapid,mbdt,event_truncate}/ (bench.csv, bench_dispatch.csv, checks.csv).
Nothing imports this file and it is not maintained: its imports name the modules as they were at 7c70478;
to re-run it, check that commit out. The maintained benchmark is `benchmarks/case_studies/run.py`.

GPU driver for the preprocessing case studies (issue 7): MapId, MBDT, Batch Event Truncate.

    PYTHONPATH=. python3 case_studies/run_gpu_part2.py --out $OUT [--only mapid,mbdt,event_truncate]
                                                       [--budget-s 200] [--dispatch-csv-dir DIR] [--smoke]

For each case study, in one process:
1. correctness on the device: `kernel.ModelNew` against the spec's `Model`, bit for bit, on every
   named shape of the spec (edge shapes included) and on fresh random draws;
2. pass A, the declared benchmark (`<name>/bench.py`): every contender, plain launches and CUDA-graph
   replays, checked bit for bit against the paper's baseline -> `$OUT/<name>.csv`;
3. pass B, the dispatching module (reading pass A's CSV, or `--dispatch-csv-dir/<name>.csv`) measured
   next to the baseline, the vectorized formulation and the kernel -> `$OUT/<name>_dispatch.csv`;
4. a short table per case study on stdout.
Every CSV row carries provenance (`workbench.provenance.collect()`). `--smoke` runs tiny shapes on
the CPU (Triton's interpreter) to check the plumbing; its numbers are not speed results.
"""
from __future__ import annotations

import argparse
import copy
import importlib
import json
import logging
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from workbench.env import ensure_interpreter_if_no_gpu  # noqa: E402

ensure_interpreter_if_no_gpu()

import torch  # noqa: E402

from case_studies.common.preprocessing import outputs_identical, pick_rows, run_exact_benchmark  # noqa: E402
from case_studies.common.results import write_rows  # noqa: E402
from case_studies.common.runner import BenchmarkDecl  # noqa: E402

log = logging.getLogger("run_gpu_part2")
CASES = ("mapid", "mbdt", "event_truncate")

# tiny shapes for --smoke (CPU interpreter): same sweeps, same contenders minus torch.compile
SMOKE_SHAPES = {
    "mapid": [{"name": "smoke", "VOCAB_SIZE": 1000, "NUM_SAMPLES": 7, "IDS_PER_SAMPLE": 20, "NUM_IDS": 140,
               "UNKNOWN_RATE": 0.1}],
    "mbdt": [{"name": "smoke", "BATCH": 37, "FEATURES": 5, "BORDERS": 6}],
    "event_truncate": [{"name": "smoke", "NUM_FEATURES": 3, "BATCH": 9, "MAX_LEN": 5, "MAX_EVENTS": 12}],
}


# spec shapes small enough for the interpreter (--smoke); on a GPU every named shape is checked
SMOKE_SPEC_SHAPES = {"mapid": ("all_unknown", "all_known"), "mbdt": ("paper_64x2x2", "edge_odd"),
                     "event_truncate": ("keep_nothing", "empty_batch")}


def check_spec_shapes(name: str, device: str, fuzz: int, smoke: bool = False) -> list[dict[str, Any]]:
    """ModelNew vs Model on every named shape of the spec (plus `fuzz` fresh draws of each)."""
    spec = importlib.import_module(f"case_studies.{name}.spec")
    kernel = importlib.import_module(f"case_studies.{name}.kernel")
    base = {k: getattr(spec, k) for k in dir(spec) if k.isupper() and k not in ("SHAPES", "EXACT")}
    out = []
    shapes = [(k, v) for k, v in spec.SHAPES.items() if not smoke or k in SMOKE_SPEC_SHAPES[name]]
    for shape_name, over in [("default", {}), *shapes]:
        for k, v in {**base, **over}.items():
            setattr(spec, k, v)
        for draw in range(1 + fuzz):
            torch.manual_seed(100 + draw)
            init = [a.to(device) if isinstance(a, torch.Tensor) else a for a in spec.get_init_inputs()]
            inputs = [a.to(device) if isinstance(a, torch.Tensor) else a for a in spec.get_inputs()]
            t0 = time.perf_counter()
            try:
                ref = spec.Model(*init).to(device)(*inputs)
                got = kernel.ModelNew(*init).to(device)(*inputs)
                same, why = outputs_identical(got, ref)
            except Exception as e:  # keep the reason: a crash on one shape must not hide the others
                same, why = False, f"{type(e).__name__}: {e}"
            out.append({"case": name, "shape": shape_name, "draw": draw, "identical": same, "why": why,
                        "seconds": round(time.perf_counter() - t0, 3)})
            log.info("check %s %s draw %d: %s %s", name, shape_name, draw,
                     "identical" if same else "MISMATCH", why)
    for k, v in base.items():
        setattr(spec, k, v)
    return out


def summarize(name: str, rows: list[dict[str, Any]], kernels: list[str]) -> str:
    lines = [f"== {name}"]
    for mode in ("plain", "graph"):
        table = pick_rows(rows, mode)
        if not table:
            continue
        lines.append(f"-- {mode}: median us (speedup of the best kernel over each)")
        for shape, med in table.items():
            ks = {k: med[k] for k in kernels if k in med}
            if not ks:
                continue
            best = min(ks, key=ks.get)
            others = "  ".join(f"{c}={v:.1f}({v / ks[best]:.2f}x)" for c, v in med.items()
                               if c not in kernels)
            kern = " ".join(f"{k}={v:.1f}" for k, v in ks.items())
            lines.append(f"{shape:>22} | {kern} | {others}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True, type=Path)
    ap.add_argument("--only", default=",".join(CASES))
    ap.add_argument("--budget-s", type=float, default=200.0, help="time budget of each case study's pass A")
    ap.add_argument("--dispatch-budget-s", type=float, default=40.0)
    ap.add_argument("--dispatch-csv-dir", type=Path, default=None,
                    help="read dispatch decisions from DIR/<name>.csv instead of this run's pass A")
    ap.add_argument("--fuzz", type=int, default=2, help="fresh random draws per spec shape in the check")
    ap.add_argument("--smoke", action="store_true", help="tiny shapes, CPU allowed, no torch.compile")
    ap.add_argument("--commit", default=None,
                    help="git commit to record when the copy has no .git (device runs)")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    args.out.mkdir(parents=True, exist_ok=True)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    if device == "cpu" and not args.smoke:
        log.error("no CUDA device: use --smoke for a plumbing check on the CPU")
        return 2
    from workbench.provenance import collect

    prov = collect()
    if args.commit and prov.get("commit") in (None, "unknown"):
        prov["commit"] = f"{args.commit} (given on the command line: the copy has no .git)"
    log.info("provenance: %s", json.dumps(prov))
    checks: list[dict[str, Any]] = []
    report = []
    for name in args.only.split(","):
        bench = importlib.import_module(f"case_studies.{name}.bench")
        checks += check_spec_shapes(name, device, 0 if args.smoke else args.fuzz, args.smoke)
        decl_dict = copy.deepcopy(bench.BENCHMARK)
        if args.smoke:
            decl_dict["warmup_ms"], decl_dict["rep_ms"] = 1, 3
            for s in decl_dict["sweeps"]:
                s["shapes"] = copy.deepcopy(SMOKE_SHAPES[name])
                s["contenders"] = [c for c in s["contenders"] if "compile" not in c]
                s["modes"] = [m for m in s["modes"] if m == "plain" or device == "cuda"]
            decl_dict["sweeps"] = [s for s in decl_dict["sweeps"] if s["contenders"]][:1]
        decl = BenchmarkDecl.from_dict(decl_dict)
        rows_a = [r.to_dict() for r in run_exact_benchmark(decl, bench.case(), device=device,
                                                           time_budget_s=args.budget_s)]
        csv_a = write_rows(rows_a, args.out / f"{name}.csv", prov)
        # pass B: the dispatcher reads recorded results (this run's pass A unless told otherwise)
        disp_csv = (args.dispatch_csv_dir / f"{name}.csv") if args.dispatch_csv_dir else csv_a
        decl_b = copy.deepcopy(decl_dict)
        decl_b["name"] = f"{name}_dispatch"
        decl_b["sweeps"] = [s for s in decl_b["sweeps"] if not s["name"].startswith("compiled")]
        for s in decl_b["sweeps"]:
            s["contenders"] = list(bench.DISPATCH_CONTENDERS)
        rows_b = [r.to_dict() for r in run_exact_benchmark(BenchmarkDecl.from_dict(decl_b),
                                                           bench.case(dispatch_csv=disp_csv), device=device,
                                                           time_budget_s=args.dispatch_budget_s)]
        write_rows(rows_b, args.out / f"{name}_dispatch.csv", prov)
        report.append(summarize(name, rows_a, bench.KERNELS))
        report.append(summarize(f"{name} (dispatch pass)", rows_b, ["dispatch"]))
    write_rows(checks, args.out / "checks.csv", prov)
    bad = [c for c in checks if not c["identical"]]
    print("\n".join(report))
    print(f"correctness: {len(checks) - len(bad)}/{len(checks)} spec shape draws bit-identical")
    for c in bad:
        print(f"  MISMATCH {c['case']} {c['shape']} draw {c['draw']}: {c['why'][:200]}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
