"""`make demo`: the main job on the embedded default, on whatever device this machine has.

1. Evaluates the bundled example candidates with the harness and prints a results table.
2. Optimizes `examples/vector_add` from its seed with the offline tuning operator (no LLM) and
   shows fitness improving over the seed.
"""
from __future__ import annotations

import argparse
import logging
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
log = logging.getLogger("workbench.demo")


def evaluate_examples(device: str) -> list[dict]:
    from workbench.harness import Harness

    rows = []
    with Harness(device=device) as h:
        for spec in sorted((ROOT / "examples").glob("*/spec.py")):
            cand = spec.parent / "candidate.py"
            res = h.evaluate(spec, cand)
            rows.append({"example": spec.parent.name, "status": res.status.value, "fitness": res.fitness,
                         "candidate_us": res.runtime_us, "reference_us": res.baseline_runtime_us,
                         "shapes": ",".join(res.shapes), "overhead_s": res.timings_s.get("harness_overhead")})
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", default="auto")
    ap.add_argument("--budget", type=int, default=12, help="evaluations for the search step")
    ap.add_argument("--skip-search", action="store_true")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    import pandas as pd

    t0 = time.perf_counter()
    print("== 1. the harness on the bundled examples ==", flush=True)
    table = pd.DataFrame(evaluate_examples(args.device))
    print(table.to_string(index=False, float_format=lambda v: f"{v:.4g}"))
    if (table["status"] != "passed").any():
        print("an example candidate failed: see the table above", file=sys.stderr)
        return 1
    if args.skip_search:
        return 0
    print("\n== 2. search: examples/vector_add, offline tuning operator, greedy policy ==", flush=True)
    from workbench.search import optimize

    example = ROOT / "examples" / "vector_add"
    run = optimize(example / "spec.py", seeds=[example / "candidate.py"],
                   policy="greedy", llm="none", budget=args.budget, device=args.device, run_dir=ROOT / "runs",
                   retrieval=False, trials=2)
    print(run.table())
    best = run.best
    print(f"\nseed fitness {run.seed_fitness:.4g} -> best {best.fitness if best else 0:.4g} "
          f"({run.improvement or 0:.1f}x the seed); artifacts in {ROOT / 'runs' / run.run_id}")
    print(f"\ndemo finished in {time.perf_counter() - t0:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
