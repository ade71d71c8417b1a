"""`workbench` command line: eval, optimize, kb, profile (subsystems register their own verbs)."""
from __future__ import annotations

import argparse
import importlib
import logging
import sys

# Subsystems that add verbs; each module has `register(subparsers)`. Imported lazily and skipped
# with a warning when the module is absent, so one part's breakage does not take the CLI down.
_SUBSYSTEMS = ("workbench.harness.cli", "workbench.search.cli", "retrieval.cli", "profiling.cli",
               "workbench.suites.cli")
_SUBSYSTEMS += ("workbench.lowering.cli",)  # `workbench lower` (issue 16)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="workbench", description=__doc__)
    parser.add_argument("-v", "--verbose", action="count", default=0, help="more logging (-vv: debug)")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in _SUBSYSTEMS:
        try:
            mod = importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if exc.name and name.startswith(exc.name):
                continue  # that subsystem is not part of this installation
            raise
        mod.register(sub)
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
