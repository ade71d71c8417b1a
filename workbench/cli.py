"""`workbench` command line: eval, optimize, lower, suite, kb, profile."""
from __future__ import annotations

import argparse
import importlib
import logging
import sys
from typing import Any, Callable


def _register(module: str, **kw: Any) -> Callable[[Any], None]:
    """The `register(subparsers)` of `module`, imported only when its verb is added: `workbench eval` imports
    the harness's command line alone, not the search's, the suites' or retrieval's (NumPy and the rest: 0.5 s
    of the command's start on the CPU CI machine, measured with `python -X importtime`)."""
    def register(sub: Any) -> None:
        importlib.import_module(module).register(sub, **kw)

    register.__module__ = module
    return register


# Every verb, in the order --help lists them -> the `register(subparsers)` of the part that owns it, which adds
# the verb and its own sub-verbs to the parser.
COMMANDS: dict[str, Callable[[Any], None]] = {
    "eval": _register("workbench.harness.cli"),
    "optimize": _register("workbench.search.cli"),
    "lower": _register("workbench.lowering.cli"),
    "suite": _register("workbench.suites.cli"),
    "kb": _register("retrieval.cli"),
    "profile": lambda sub: _register("profiling.cli", extra_verbs=[profile_lowered_verb])(sub),
}


def profile_lowered_verb(verbs: Any) -> None:
    """`workbench profile lowered SPEC`: the spec's lowered draft under a Proton kernel session (GPU)."""
    p = verbs.add_parser("lowered", help="lower a spec and profile its draft on the GPU (Proton kernel session)")
    p.add_argument("spec", help="a KernelBench-format spec file")
    p.add_argument("--out", default="runs/profiles",
                   help="folder for the draft and the .hatchet (default runs/profiles)")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="NAME=VALUE",
                   help="override a spec constant before its inputs are built")
    p.add_argument("--iterations", type=int, default=5, help="forward calls inside the session (default 5)")
    p.set_defaults(func=_profile_lowered)


def _profile_lowered(args: argparse.Namespace) -> int:
    from workbench.profile_lowered import ProfileError, profile_lowered
    from workbench.spec import SpecError, parse_overrides

    try:
        got = profile_lowered(args.spec, args.out, overrides=parse_overrides(args.overrides) or None,
                              iterations=args.iterations)
    except (ProfileError, SpecError) as exc:
        print(f"workbench profile lowered: error: {str(exc).splitlines()[0]}", file=sys.stderr)
        return 2
    print(got.summary)
    print(f"\n{got.kernels} kernels, {got.launches} launches; trace {got.hatchet}, draft {got.draft}")
    return 0


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The whole command line, or with `only` (a verb of the table) that verb's alone: what `main` parses
    when the command names its verb, so a verb's start imports nothing of the others."""
    parser = argparse.ArgumentParser(prog="workbench", description=__doc__)
    parser.add_argument("-v", "--verbose", action="count", default=0, help="more logging (-vv: debug)")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for verb, register in COMMANDS.items():
        if only is not None and verb != only:
            continue
        before = set(sub.choices)
        register(sub)
        added = set(sub.choices) - before
        if added != {verb}:
            raise RuntimeError(f"{register.__module__}.register added {sorted(added)}, the table says {verb!r}")
    return parser


def _verb(argv: list[str]) -> str | None:
    """The verb a command line names (its first word that is not `-v`/`--verbose`), when the table has it."""
    for word in argv:
        if word in ("-v", "-vv", "--verbose"):
            continue
        return word if word in COMMANDS else None
    return None


def main(argv: list[str] | None = None) -> int:
    parser = build_parser(_verb(sys.argv[1:] if argv is None else argv))
    args = parser.parse_args(argv)
    level = logging.WARNING - 10 * min(args.verbose, 2)
    # the time on every line: a long run's log (a suite on the GPU) says when each problem ended and where
    # the evaluations stalled, not only in what order
    logging.basicConfig(level=level, format="%(asctime)s %(levelname)s %(name)s: %(message)s", datefmt="%H:%M:%S")
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    return int(args.func(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
