"""The offline tuning operator on a case-study spec, on the GPU: fitness over evaluations, with provenance.

    PYTHONPATH=. python benchmarks/search_offline_gpu.py [--spec case_studies/optimized_fm/spec.py]
        [--seed case_studies/optimized_fm/kernel.py] [--budget 24] [--policy greedy] [--out results]

The seed is the case study's kernel with its built-in autotuner switched off (`AUTOTUNE = False`), so the
module constants the operator rewrites are what runs. After the search the script evaluates, in the
same harness, the kernel as shipped (autotuner on) as a contender. Writes
`<out>/search_offline_<case>.json` (every node's fitness, best-so-far, config; provenance) and
`<out>/search_offline_<case>.png` when matplotlib is present. Needs only torch and triton (the GPU
machine has no pandas/seaborn guarantee), so it builds its JSON from the run's nodes directly.
"""

from __future__ import annotations

import json
import logging
import re
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks import common  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    ap = common.parser(__doc__, out_default="results")
    ap.add_argument("--spec", default="case_studies/optimized_fm/spec.py")
    ap.add_argument("--seed", default=None, help="default: kernel.py beside the spec")
    ap.add_argument("--budget", type=int, default=24)
    ap.add_argument("--policy", default="greedy")
    ap.add_argument("--trials", type=int, default=5)
    ap.add_argument("--device", default="auto")
    ap.add_argument("--shapes", default=None, help="named shapes each evaluation checks (default: all)")
    ap.add_argument("--max-wall-s", type=float, default=None, help="stop the search after this long")
    ap.add_argument("--from-run", default=None, metavar="RUNS_DIR/RUN_ID",
                    help="rebuild the JSON from a finished run's directory instead of searching")
    ap.add_argument("--provenance-from", default=None, metavar="JSON",
                    help="with --from-run: the provenance of the machine the run ran on (another JSON of the call)")
    args = ap.parse_args(argv)
    common.setup_logging(logging.INFO)

    from workbench.env import ensure_interpreter_if_no_gpu

    interp = ensure_interpreter_if_no_gpu()
    import workbench
    from workbench.evaluator import EvalJob, LocalPoolEvaluator

    spec = (ROOT / args.spec).resolve()
    seed_src_path = Path(args.seed).resolve() if args.seed else spec.parent / "kernel.py"
    case = spec.parent.name if spec.stem == "spec" else spec.stem
    shipped = seed_src_path.read_text()
    seed_src, n = re.subn(r"(?m)^AUTOTUNE = True\b", "AUTOTUNE = False", shipped)
    tmp = Path(tempfile.mkdtemp(prefix="search_gpu_"))
    seed = tmp / f"{case}_fixed_config.py"
    seed.write_text(seed_src)
    t0 = time.time()
    if args.from_run:  # a run that finished but whose JSON was not written (e.g. a crash after the search)
        from workbench.search import load_run

        run = load_run(Path(args.from_run).name, run_dir=Path(args.from_run).parent)
        contender, wall = None, None
    else:
        with LocalPoolEvaluator(workers=1, device=args.device) as ev:
            run = workbench.optimize(
                spec,
                seeds=[seed],
                policy=args.policy,
                llm="none",
                budget=args.budget,
                max_wall_s=args.max_wall_s,
                shapes=args.shapes.split(",") if args.shapes else None,
                device=args.device,
                trials=args.trials,
                evaluator=ev,
                retrieval=False,
                run_dir=tmp / "runs",
                progress=False,
            )
            contender = (
                ev.submit(
                    EvalJob(spec_path=str(spec), candidate_source=shipped, device=args.device, trials=args.trials,
                            shapes=args.shapes.split(",") if args.shapes else None)
                ).result()
                if n
                else None
            )
        wall = time.time() - t0

    from workbench.tunables import TunablesError, parse_tunables

    def config_of(node) -> dict | None:
        try:
            return parse_tunables(node.source).current if node.source else None
        except TunablesError:
            return None

    history, best = [], 0.0
    for i, node in enumerate(run.finished(), 1):
        best = max(best, node.fitness)
        history.append(
            {
                "evaluation": i,
                "node": node.id,
                "parents": node.parents,
                "operator": node.operator,
                "status": node.status,
                "fitness": node.fitness,
                "best_so_far": best,
                "runtime_us": node.runtime_us,
                "runtime_p20_us": node.result.runtime_p20_us if node.result else None,
                "runtime_p80_us": node.result.runtime_p80_us if node.result else None,
                "baseline_runtime_us": node.result.baseline_runtime_us if node.result else None,
                "config": config_of(node),
                "changed": node.meta.get("changed"),
                "error_class": node.error_class,
            }
        )
    bnode = run.best
    out = {
        "benchmark": "offline tuning operator search (no LLM): fitness over evaluations",
        "spec": _rel(spec),
        "case": case,
        "policy": args.policy,
        "budget": args.budget,
        "trials": args.trials,
        "shapes": args.shapes or "all the spec declares",
        "interpreter": interp if not args.from_run else None,
        "platform": run.platform,
        "seed": f"{_rel(seed_src_path)} with AUTOTUNE = False" if n else _rel(seed_src_path),
        "seed_fitness": run.seed_fitness,
        "best_fitness": bnode.fitness if bnode else 0.0,
        "best_node": bnode.id if bnode else None,
        "best_config": config_of(bnode) if bnode else None,
        "improvement_over_seed": run.improvement,
        "stop": {"rule": run.stop.rule, "message": run.stop.message},
        "contender_shipped_autotuned": (
            {
                "status": contender.status.value,
                "fitness": contender.fitness,
                "runtime_us": contender.runtime_us,
                "runtime_p20_us": contender.runtime_p20_us,
                "runtime_p80_us": contender.runtime_p80_us,
                "baseline_runtime_us": contender.baseline_runtime_us,
            }
            if contender
            else None
        ),
        "fitness_definition": "reference median time / candidate median time (workbench harness), 0 if wrong",
        "wall_s": wall,
        "history": history,
        "provenance": (json.loads(Path(args.provenance_from).read_text())["provenance"]
                       if args.provenance_from else common.provenance(args.commit)),
        "rebuilt_from_run": args.from_run,
        "command": "PYTHONPATH=. python benchmarks/search_offline_gpu.py " + " ".join(argv or sys.argv[1:]),
    }
    out_dir = args.out
    common.write_json(out_dir / f"search_offline_{case}.json", out)
    png = run.run_dir / "fitness.png"
    if png.exists():
        shutil.copy(png, out_dir / f"search_offline_{case}.png")
    print(run.table())
    print(f"wrote {out_dir / f'search_offline_{case}.json'}" + (f" ({wall:.0f} s)" if wall is not None else ""))
    return 0 if bnode is not None else 1



def _rel(p: Path) -> str:
    """A path relative to the repository when it is inside it (results stay machine-independent)."""
    try:
        return str(p.resolve().relative_to(ROOT))
    except ValueError:
        return str(p)

if __name__ == "__main__":
    sys.exit(main())
