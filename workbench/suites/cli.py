"""`workbench suite kernelbench|aten ...`: run or resume a suite, print its fast_p table (or report.json)."""
from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from typing import Any

log = logging.getLogger(__name__)


def _common(p: argparse.ArgumentParser, own: tuple[str, ...]) -> None:
    # one flag per SuiteConfig field of this suite and per search setting it passes on (SUITE_SEARCH_FIELDS),
    # generated from the fields' metadata (workbench.options)
    from workbench.options import add_arguments
    from workbench.search.config import SearchConfig
    from workbench.suites.config import COMMON_FIELDS, SUITE_SEARCH_FIELDS, SuiteConfig

    add_arguments(p, SuiteConfig, own + COMMON_FIELDS)
    add_arguments(p, SearchConfig, SUITE_SEARCH_FIELDS)
    p.add_argument("--seed", dest="deprecated_seed", default=argparse.SUPPRESS, metavar="lower|none",
                   help="deprecated: the old name of --draft, kept for one release")
    # not configuration: where runs live, which one to continue, and what is printed
    p.add_argument("--run-dir", default="runs/suites", help="where suite runs live (default runs/suites)")
    p.add_argument("--resume", default=None, metavar="RUN",
                   help="continue a stopped run (id or directory); the flags given replace those fields")
    p.add_argument("--run-id", default=None, metavar="NAME",
                   help="name the new run (default: suite and time); --resume NAME continues it")
    p.add_argument("--retry-failed", action="store_true", help="with --resume: run failed problems again")
    p.add_argument("--json", action="store_true", help="print the run's report.json on stdout")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")


def register(subparsers: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    from workbench.suites.config import ATEN_FIELDS, KERNELBENCH_FIELDS

    p = subparsers.add_parser("suite", help="run and score a suite: KernelBench levels 1-3, OpInfo ATen ops",
                              description="Run a suite of specs through the harness (and the search), "
                                          "resumably, and report fast_p per level.")
    sub = p.add_subparsers(dest="suite", metavar="SUITE")
    kb = sub.add_parser("kernelbench", help="KernelBench problems from a folder (level1..level3)")
    _common(kb, KERNELBENCH_FIELDS)
    kb.set_defaults(func=_main)
    at = sub.add_parser("aten", help="OpInfo ATen ops: one generated spec per op and dtype")
    _common(at, ATEN_FIELDS)
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
            from platforms.provenance import collect

            store.set_meta("provenance", {**collect(), "note": "collected when the report was written"})
        report, _ = write_report(path, store)
    print(json.dumps(report, indent=1, default=str) if args.json else summary_table(report))
    return 0


def _options(args: argparse.Namespace) -> dict[str, Any]:
    """The config fields the user typed (`--seed X`, deprecated, becomes `--draft X` with a warning)."""
    from workbench.options import given
    from workbench.search.config import SearchConfig
    from workbench.suites.config import SUITE_SEARCH_FIELDS, SuiteConfig

    options = {**given(args, SuiteConfig), **given(args, SearchConfig, SUITE_SEARCH_FIELDS)}
    if "deprecated_seed" in vars(args):
        # mapped to draft by the suite's config, which logs the deprecation (and raises a DeprecationWarning)
        options["seed"] = args.deprecated_seed
    return options


def _main(args: argparse.Namespace) -> int:
    from workbench.search.config import SearchError
    from workbench.suites import SuiteError, run_aten, run_kernelbench
    from workbench.suites.report import ran

    if not args.no_progress and not sys.stderr.isatty():
        # not a terminal: one log line per finished problem (the runner's INFO lines), no bar redraws
        logging.getLogger("workbench.suites.runner").setLevel(min(logging.INFO, logging.getLogger().level))
    try:
        options = _options(args)
        common = dict(run_dir=args.run_dir, resume=args.resume, progress=not args.no_progress,
                      retry_failed=args.retry_failed, run_id=args.run_id)
        if args.suite == "kernelbench":
            run = run_kernelbench(**common, **options)
        else:
            run = run_aten(**common, **options)
    except SearchError as exc:  # a malformed NAME=VALUE option
        print(f"workbench suite: error: {exc}", file=sys.stderr)
        return 2
    except SuiteError as exc:
        print(f"workbench suite: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("workbench suite: interrupted; continue with --resume", file=sys.stderr)
        # Exit now. The threads of problems still in flight would hold a normal exit (the interpreter joins
        # them) until their searches end, minutes at published sizes, their evaluators restarting lost
        # servers meanwhile; the runner's servers are closed already, and those problems' rows stay
        # `running`, which --resume runs again. Finished problems are committed to the store as they end.
        logging.shutdown()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(130)
    nothing_ran = bool(run.problems) and ran(run.report) == 0
    if nothing_ran:  # first, in one line: a table of zeros would read as "slow", not "nothing ran"
        print(f"workbench suite: {run.report['headline']}", file=sys.stderr)
    if args.json:
        print(json.dumps(run.report, indent=1, default=str))
    else:
        if not nothing_ran:
            print(run.report["headline"])
        print(run.table())
        print(f"\nrun {run.run_id}: {run.path}/ (report.md, report.json, problems.csv, fast_p.png, speedups.png)")
        if not run.report["complete"]:
            print(f"incomplete: {run.report['counts'].get('pending', 0)} problems pending; continue with "
                  f"--resume {run.run_id}")
    return 1 if nothing_ran else 0
