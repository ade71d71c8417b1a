"""`workbench` command line: eval, optimize, lower, suite, kb, profile."""
from __future__ import annotations

import argparse
import logging
import sys
from typing import Any, Callable

from profiling import cli as profiling_cli
from retrieval import cli as retrieval_cli
from workbench.harness import cli as harness_cli
from workbench.lowering import cli as lowering_cli
from workbench.search import cli as search_cli
from workbench.suites import cli as suites_cli

# Every verb, in the order --help lists them -> the `register(subparsers)` of the part that owns it, which adds
# the verb and its own sub-verbs to the parser.
COMMANDS: dict[str, Callable[[Any], None]] = {
    "eval": harness_cli.register,
    "optimize": search_cli.register,
    "lower": lowering_cli.register,
    "suite": suites_cli.register,
    "kb": retrieval_cli.register,
    "profile": profiling_cli.register,
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="workbench", description=__doc__)
    parser.add_argument("-v", "--verbose", action="count", default=0, help="more logging (-vv: debug)")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for verb, register in COMMANDS.items():
        before = set(sub.choices)
        register(sub)
        added = set(sub.choices) - before
        if added != {verb}:
            raise RuntimeError(f"{register.__module__}.register added {sorted(added)}, the table says {verb!r}")
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    level = logging.WARNING - 10 * min(args.verbose, 2)
    logging.basicConfig(level=level, format="%(levelname)s %(name)s: %(message)s")
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    return int(args.func(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
