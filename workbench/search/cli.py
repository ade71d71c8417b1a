"""`workbench optimize SPEC ...`: run (or resume) a search and print the final table."""

from __future__ import annotations

import argparse
import dataclasses
import logging
import sys

from workbench.options import add_arguments, given
from workbench.search.config import SearchConfig, SearchError

log = logging.getLogger(__name__)


def register(subparsers: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    p = subparsers.add_parser(
        "optimize",
        help="search for a faster correct Triton kernel for a spec",
        description="Graph search over candidate kernels. With --llm none (the default) the offline tuning "
        "operator mutates the TUNABLES of the --seed kernels; with an LLM provider the universal "
        "operator writes new kernels (endpoint, model and key from the environment).",
    )
    p.add_argument("spec", nargs="?", help="the spec file (KernelBench format); optional with --resume")
    # one flag per SearchConfig field, generated from the field's metadata (workbench.options)
    add_arguments(p, SearchConfig)
    # not configuration: which run to continue, and the terminal's progress bar
    p.add_argument("--resume", default=None, metavar="RUN",
                   help="continue a stopped run by id; the flags given replace those fields of its config")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.set_defaults(func=_main)


def _main(args: argparse.Namespace) -> int:
    from workbench.search import optimize

    try:
        fields = given(args, SearchConfig)
        if not args.spec and not args.resume:
            raise SearchError("give a SPEC to optimize, or --resume RUN")
        if args.resume:
            spec = args.spec or ""
            if not spec:
                from workbench.memory import Memory, default_memory_path

                run_dir = fields.get("run_dir", "runs")
                with Memory(default_memory_path(run_dir)) as mem:
                    info = mem.get_run(args.resume)
                if info is None:
                    raise SearchError(f"no run {args.resume!r} in {default_memory_path(run_dir)}")
                spec = info.spec_path
            # exactly the flags given replace those fields of the stored config
            run = optimize(spec, resume=args.resume, progress=not args.no_progress, **fields)
        else:
            cfg = SearchConfig(spec_path=args.spec, **fields)
            if "lower" in cfg.seeds:
                # `--seed lower`: the lowered candidate (workbench.lowering), written into the run directory
                from workbench.lowering.cli import lower_seed

                try:
                    path = lower_seed(cfg.spec_path, cfg.run_dir, cfg.overrides)
                except ValueError as exc:
                    raise SearchError(str(exc)) from None
                cfg = dataclasses.replace(cfg, seeds=[path if s == "lower" else s for s in cfg.seeds])
            run = optimize(config=cfg, progress=not args.no_progress)
    except SearchError as exc:
        print(f"workbench optimize: error: {exc}", file=sys.stderr)
        return 2
    print(run.table())
    print(f"\nrun {run.run_id}: {run.run_dir}/ (best_kernel.py, tree.json, fitness.png, report.md)")
    if run.stop.rule in ("bad_spec", "llm_unavailable", "seeds_failed", "evaluator_failed"):
        print(f"workbench optimize: error: {run.stop.message}", file=sys.stderr)
        return 2 if run.stop.rule != "seeds_failed" else 1
    if run.stop.rule == "interrupted":
        return 130
    return 0
