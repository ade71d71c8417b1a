"""`workbench optimize SPEC ...`: run (or resume) a search and print the final table."""

from __future__ import annotations

import argparse
import logging
import sys

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
    p.add_argument(
        "--seed",
        action="append",
        default=[],
        metavar="CANDIDATE",
        help="a candidate kernel to start from (repeatable); 'lower' lowers the spec to one (workbench lower)",
    )
    p.add_argument("--policy", default="greedy", help="selection policy: greedy | mcts | evolve")
    p.add_argument(
        "--llm", default="none", help="operator's model: none (offline tuner) | openai | transformers"
    )
    p.add_argument("--max-new-tokens", type=int, default=2048, help="LLM reply length limit")
    p.add_argument(
        "--llm-step",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="an LLM step option (repeatable): best_of=2, temperatures=[0.2,0.8], edits=region|search_replace|off, "
        "repairs=False, prechecks=False, samples=ops|off, context_window=4096",
    )
    p.add_argument(
        "--max-rejected", type=int, default=60, help="proposals rejected before evaluation before the search stops"
    )
    p.add_argument("--budget", type=int, default=None, help="nodes to create after the seeds (default 20)")
    p.add_argument("--wall", type=float, default=None, metavar="SECONDS", help="wall-time budget")
    p.add_argument("--tokens", type=int, default=None, help="LLM token budget")
    p.add_argument(
        "--stall", type=int, default=None, metavar="K", help="stop after K evaluations without improvement"
    )
    p.add_argument(
        "--target", type=float, default=None, metavar="FITNESS", help="stop once this fitness is reached"
    )
    p.add_argument("--workers", type=int, default=None, help="evaluations in flight (default 1)")
    p.add_argument("--resume", default=None, metavar="RUN", help="continue a stopped run by id")
    p.add_argument("--device", default="auto", help="auto | cpu | cuda")
    p.add_argument("--evaluator", default=None, help="local | ray")
    p.add_argument(
        "--ray-address", default=None, metavar="ADDR", help="Ray cluster address (with --evaluator ray)"
    )
    p.add_argument("--no-retrieval", action="store_true", help="prompts without retrieved knowledge")
    p.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="override a module-level constant of the spec (repeatable)",
    )
    p.add_argument(
        "--shapes", default=None, metavar="A,B", help="named shapes each evaluation checks (default: all)"
    )
    p.add_argument("--trials", type=int, default=3, help="timing trials per evaluation")
    p.add_argument("--timeout", type=float, default=300.0, help="seconds per evaluation")
    p.add_argument("--rng-seed", type=int, default=0, help="seed of the search's random choices")
    p.add_argument("--run-dir", default="runs", help="where runs/<run>/ and the memory live (default runs/)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.set_defaults(func=_main)


def _main(args: argparse.Namespace) -> int:
    from workbench.search.config import SearchError, parse_set

    try:
        if not args.spec and not args.resume:
            raise SearchError("give a SPEC to optimize, or --resume RUN")
        if args.resume:
            spec = args.spec or ""
            if not spec:
                from workbench.memory import Memory, default_memory_path

                with Memory(default_memory_path(args.run_dir)) as mem:
                    info = mem.get_run(args.resume)
                if info is None:
                    raise SearchError(f"no run {args.resume!r} in {default_memory_path(args.run_dir)}")
                spec = info.spec_path
        else:
            spec = args.spec
        if "lower" in args.seed and not args.resume:
            # `--seed lower`: the lowered candidate (workbench.lowering), written into the run directory
            from workbench.lowering.cli import lower_seed

            try:
                path = lower_seed(spec, args.run_dir, parse_set(args.set))
            except ValueError as exc:
                raise SearchError(str(exc)) from None
            args.seed = [path if s == "lower" else s for s in args.seed]
        from workbench.search import optimize

        run = optimize(
            spec,
            seeds=args.seed,
            policy=args.policy,
            llm=args.llm,
            budget=args.budget if args.budget is not None else 20,
            workers=args.workers if args.workers is not None else 1,
            device=args.device,
            evaluator=args.evaluator or "local",
            ray_address=args.ray_address,
            retrieval=not args.no_retrieval,
            overrides=parse_set(args.set),
            shapes=[s for s in args.shapes.split(",") if s] if args.shapes else None,
            run_dir=args.run_dir,
            resume=args.resume,
            max_wall_s=args.wall,
            max_tokens=args.tokens,
            stall=args.stall,
            fitness_target=args.target,
            trials=args.trials,
            timeout_s=args.timeout,
            rng_seed=args.rng_seed,
            progress=not args.no_progress,
            llm_max_new_tokens=args.max_new_tokens,
            llm_step=parse_set(args.llm_step),
            max_rejected=args.max_rejected,
        )
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
