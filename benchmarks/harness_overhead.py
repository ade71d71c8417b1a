"""Harness overhead per candidate: wall time beyond the candidate's own compile and timed runs.

Usage: python benchmarks/harness_overhead.py [--device auto] [--repeat 3] [--out results/harness]
Writes overhead_<device>.json (per evaluation rows + medians) with provenance, and, with
--eval-json, the full `EvalResult` JSON of each bundled example (what `workbench eval --json` prints).
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from workbench.env import ensure_interpreter_if_no_gpu  # noqa: E402

ensure_interpreter_if_no_gpu()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--device", default="auto")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--out", default=str(ROOT / "results" / "harness"))
    ap.add_argument("--eval-json", action="store_true")
    args = ap.parse_args()
    from workbench.harness import Harness
    from workbench.provenance import collect

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    rows, evals = [], {}
    t0 = time.perf_counter()
    with Harness(device=args.device) as h:
        h.start()
        startup = h.startup_s
        for rep in range(args.repeat):
            for spec in sorted((ROOT / "examples").glob("*/spec.py")):
                res = h.evaluate(spec, spec.parent / "candidate.py")
                t = res.timings_s
                phases = ("compile_and_first_call", "correctness", "timing", "baseline_timing")
                own = sum(t.get(k, 0.0) for k in phases)
                rows.append({"example": spec.parent.name, "rep": rep, "status": res.status.value,
                             "fitness": res.fitness, "client_wall_s": t.get("client_wall"),
                             "compile_and_first_call_s": t.get("compile_and_first_call"),
                             "correctness_s": t.get("correctness"), "timing_s": t.get("timing"),
                             "baseline_timing_s": t.get("baseline_timing", 0.0),
                             "reference_total_s": t.get("reference_total"),
                             "overhead_s": t.get("harness_overhead"),
                             "overhead_beyond_compile_and_timed_runs_s": t.get("client_wall", 0.0) - own,
                             "phases_s": dict(t)})
                if args.eval_json and rep == 0:
                    evals[spec.parent.name] = res.to_dict()
                print(f"{spec.parent.name:12s} rep {rep}: {res.summary()} overhead {t.get('harness_overhead'):.3f} s",
                      flush=True)
        device = h.device
    from workbench.harness.input_cache import cache_dir

    med = statistics.median(r["overhead_s"] for r in rows)
    warm = [r["overhead_s"] for r in rows if r["rep"] > 0]
    doc = {"provenance": collect(), "device": device, "server_startup_s": startup,
           "input_cache": str(cache_dir() or "off"),
           "median_overhead_s": med, "max_overhead_s": max(r["overhead_s"] for r in rows),
           "median_overhead_after_first_rep_s": statistics.median(warm) if warm else None,
           "median_overhead_by_example_s": {
               ex: statistics.median(r["overhead_s"] for r in rows if r["example"] == ex)
               for ex in sorted({r["example"] for r in rows})},
           "definition": "client wall time per evaluation minus the candidate's compile+first call, correctness "
                         "calls and timed repetitions, and the reference's baseline timing (0 when cached): "
                         "forks, process set-up, spec loading, input generation, reference runs, comparisons, "
                         "serialization",
           "rows": rows, "total_s": time.perf_counter() - t0}
    (out / f"overhead_{device}.json").write_text(json.dumps(doc, indent=1))
    if evals:
        doc_evals = {"provenance": doc["provenance"], "results": evals}
        (out / f"eval_examples_{device}.json").write_text(json.dumps(doc_evals, indent=1))
    print(f"median harness overhead per candidate on {device}: {med:.3f} s (server start-up {startup:.2f} s, once)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
