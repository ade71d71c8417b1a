"""`workbench suite kernelbench|aten ...`: run or resume a suite, print its fast_p table (or report.json)."""
from __future__ import annotations

import argparse
import json
import logging
import sys

log = logging.getLogger(__name__)


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--seed", default="lower", help="lower (the lowered draft, default) | none")
    p.add_argument("--seed-dir", default=None, metavar="DIR",
                   help="candidates named after the problems (<name>.py or level<L>/<name>.py), used when "
                        "--seed none or when lowering gives nothing")
    p.add_argument("--llm", default="none", help="the search's operator model: none (offline tuner) | openai | "
                                                 "transformers")
    p.add_argument("--max-new-tokens", type=int, default=2048, help="LLM reply length limit")
    p.add_argument("--budget", type=int, default=0, help="search nodes per problem after the seed (0: the seed only)")
    p.add_argument("--device", default="auto", help="auto | cpu | cuda")
    p.add_argument("--workers", type=int, default=1, help="problems (and evaluations) in parallel")
    p.add_argument("--evaluator", default="local", help="local | ray")
    p.add_argument("--run-dir", default="runs/suites", help="where suite runs live (default runs/suites)")
    p.add_argument("--resume", default=None, metavar="RUN", help="continue a stopped run (id or directory)")
    p.add_argument("--retry-failed", action="store_true", help="with --resume: run failed problems again")
    p.add_argument("--timeout", type=float, default=300.0, help="seconds per evaluation")
    p.add_argument("--prepare-timeout", type=float, default=120.0,
                   help="seconds per problem to import, size and lower it")
    p.add_argument("--trials", type=int, default=3, help="correctness trials per evaluation")
    p.add_argument("--no-compile", action="store_true", help="skip the torch.compile baselines (GPU)")
    p.add_argument("--json", action="store_true", help="print the run's report.json on stdout")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")


def register(subparsers: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    p = subparsers.add_parser("suite", help="run and score a suite: KernelBench levels 1-3, OpInfo ATen ops",
                              description="Run a suite of specs through the harness (and the search), "
                                          "resumably, and report fast_p per level.")
    sub = p.add_subparsers(dest="suite", metavar="SUITE")
    kb = sub.add_parser("kernelbench", help="KernelBench problems from a folder (level1..level3)")
    kb.add_argument("--root", default=None, metavar="DIR", help="the KernelBench folder (holds level1/ ...)")
    kb.add_argument("--levels", default="1,2,3", help="levels to run (default 1,2,3)")
    kb.add_argument("--problems", default=None, metavar="1-20,23", help="problem numbers in each level")
    kb.add_argument("--max-elems", type=int, default=None, metavar="N",
                    help="largest tensor (elements) after auto-sizing; default 65536 on cpu, published sizes "
                         "on cuda")
    _common(kb)
    kb.set_defaults(func=_main)
    at = sub.add_parser("aten", help="OpInfo ATen ops: one generated spec per op and dtype")
    at.add_argument("--ops", default=None, metavar="A,B", help="OpInfo names (default: the in-scope set)")
    at.add_argument("--dtypes", default="float32", help="float32,float16,bfloat16 ... (default float32)")
    at.add_argument("--max-samples", type=int, default=None, help="first N samples of each op (default all)")
    _common(at)
    at.set_defaults(func=_main)
    rep = sub.add_parser("report", help="write a run's report files again from its store (nothing runs)")
    rep.add_argument("run", help="the run (id under --run-dir, or its directory)")
    rep.add_argument("--run-dir", default="runs/suites", help="where suite runs live (default runs/suites)")
    rep.add_argument("--json", action="store_true", help="print report.json on stdout")
    rep.set_defaults(func=_report)
    p.set_defaults(func=lambda args: (p.print_help(), 2)[1])


def _report(args: argparse.Namespace) -> int:
    from workbench.suites import SuiteError
    from workbench.suites.report import summary_table, write_report
    from workbench.suites.runner import STORE_NAME, resolve_run
    from workbench.suites.store import SuiteStore

    try:
        path = resolve_run(args.run_dir, args.run)
    except SuiteError as exc:
        print(f"workbench suite: error: {exc}", file=sys.stderr)
        return 2
    with SuiteStore(path / STORE_NAME) as store:
        if store.meta("provenance") is None:  # a run stopped before its end wrote none (older runs)
            from workbench.provenance import collect

            store.set_meta("provenance", {**collect(), "note": "collected when the report was written"})
        report, _ = write_report(path, store)
    print(json.dumps(report, indent=1, default=str) if args.json else summary_table(report))
    return 0


def _main(args: argparse.Namespace) -> int:
    from workbench.suites import SuiteError, run_aten, run_kernelbench

    common = dict(seed=args.seed, seed_dir=args.seed_dir, llm=args.llm, llm_max_new_tokens=args.max_new_tokens,
                  budget=args.budget, device=args.device,
                  workers=args.workers, evaluator=args.evaluator, run_dir=args.run_dir, resume=args.resume,
                  timeout_s=args.timeout, prepare_timeout_s=args.prepare_timeout, trials=args.trials,
                  compile_baseline=False if args.no_compile else None, progress=not args.no_progress,
                  retry_failed=args.retry_failed)
    try:
        if args.suite == "kernelbench":
            run = run_kernelbench(args.root, levels=args.levels, problems=args.problems, max_elems=args.max_elems,
                                  **common)
        else:
            run = run_aten(ops=args.ops, dtypes=args.dtypes, max_samples=args.max_samples, **common)
    except SuiteError as exc:
        print(f"workbench suite: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("workbench suite: interrupted; continue with --resume", file=sys.stderr)
        return 130
    if args.json:
        print(json.dumps(run.report, indent=1, default=str))
    else:
        print(run.table())
        print(f"\nrun {run.run_id}: {run.path}/ (report.md, report.json, problems.csv, fast_p.png, speedups.png)")
    return 0
