"""`workbench lower SPEC [--out FILE] [--set NAME=VALUE ...]`: write the lowered Triton candidate.

Exit codes: 0 written, 1 the spec cannot be lowered (the one-line diagnosis on stderr), 2 the spec
or the command line is bad.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

OK, UNSUPPORTED, BAD_INPUT = 0, 1, 2


def register(sub: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    p = sub.add_parser("lower", help="lower a spec to a correct Triton candidate without an LLM",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("spec", help="spec file (KernelBench format: Model, get_inputs, get_init_inputs)")
    p.add_argument("--out", default=None, metavar="FILE", help="where to write the candidate (default: stdout)")
    p.add_argument("--set", dest="sets", action="append", metavar="NAME=VALUE", default=[],
                   help="override a module-level constant of the spec before capture (repeatable)")
    p.add_argument("--ops", action="store_true", help="also print the captured core-ATen ops on stderr")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from workbench.spec import SpecError, parse_overrides

    if not Path(args.spec).is_file():
        print(f"workbench lower: error: spec file not found: {args.spec}", file=sys.stderr)
        return BAD_INPUT
    try:
        overrides = parse_overrides(args.sets)
    except SpecError as exc:
        print(f"workbench lower: error: {exc}", file=sys.stderr)
        return BAD_INPUT
    from workbench.lowering import lower_spec

    res = lower_spec(args.spec, overrides)
    if args.ops:
        print("ops: " + ", ".join(res.ops), file=sys.stderr)
    if res.source is None:
        print(f"workbench lower: {res.diagnosis}", file=sys.stderr)
        return BAD_INPUT if res.diagnosis.startswith("bad spec") else UNSUPPORTED
    if args.out:
        out = Path(args.out)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(res.source)
        print(f"wrote {out} ({len(res.source.splitlines())} lines, ops: {len(res.ops)})", file=sys.stderr)
    else:
        sys.stdout.write(res.source)
    return OK


def lower_seed(spec: str, run_dir: str, overrides: dict) -> str:
    """`workbench optimize SPEC --seed lower`: lower into the run directory and return the file's path;
    raises ValueError with the diagnosis when the spec cannot be lowered."""
    from workbench.lowering import lower_spec

    res = lower_spec(spec, overrides)
    if res.source is None:
        raise ValueError(f"--seed lower: {res.diagnosis}")
    out = Path(run_dir) / "lowered" / f"{Path(spec).stem}.py"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(res.source)
    return str(out)
