"""`workbench eval SPEC CANDIDATE`: the harness from the command line.

Exit codes: 0 passed, 1 the candidate failed, 2 the spec or the command line is bad.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

PASSED, FAILED, BAD_INPUT = 0, 1, 2


def register(sub: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    p = sub.add_parser("eval", help="evaluate a candidate kernel against a spec (fitness = speedup)",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("spec", help="spec file (KernelBench format: Model, get_inputs, get_init_inputs)")
    p.add_argument("candidate", help="candidate file defining ModelNew")
    p.add_argument("--device", default="auto", help="auto | cpu | cuda (default: auto)")
    p.add_argument("--trials", type=int, default=3, help="correctness trials per shape (default 3)")
    p.add_argument("--timeout", type=float, default=300.0, help="wall-clock limit per candidate, seconds")
    p.add_argument("--set", dest="sets", action="append", metavar="NAME=VALUE", default=[],
                   help="override a module-level constant of the spec (repeatable)")
    p.add_argument("--shape", dest="shapes", action="append", metavar="NAME",
                   help="check only these named shapes ('default' = the module constants); repeatable")
    p.add_argument("--timing", choices=["device", "wall"], default=None,
                   help="the clock the fitness compares: device (CUDA-graph replay, as do_bench; default) or wall "
                        "(per call, host launch included); default: the spec's TIMING, else device")
    p.add_argument("--json", action="store_true", help="print one JSON object (schema: README)")
    p.set_defaults(func=run)


def _bad(msg: str, as_json: bool) -> int:
    if as_json:
        print(json.dumps({"status": "bad_spec", "correct": False, "fitness": 0.0, "error": msg, "violations": []}))
    else:
        print(f"error: {msg}", file=sys.stderr)
        print("KERNEL_TEST_FAILED")
        print("FITNESS_SCORE: 0.0")
    return BAD_INPUT


def run(args: argparse.Namespace) -> int:
    from workbench.spec import SpecError, parse_overrides

    if args.device not in ("auto", "cpu", "cuda"):
        return _bad(f"unknown --device {args.device!r}: expected auto, cpu or cuda", args.json)
    if args.trials < 1:
        return _bad("--trials must be at least 1", args.json)
    for path, what in ((args.spec, "spec"), (args.candidate, "candidate")):
        if not Path(path).is_file():
            return _bad(f"{what} file not found: {path}", args.json)
    try:
        overrides = parse_overrides(args.sets)
    except SpecError as exc:
        return _bad(str(exc), args.json)
    from workbench.harness import Harness
    from workbench.result import Status

    try:
        harness = Harness(device=args.device, one_shot=True)
    except ValueError as exc:
        return _bad(str(exc), args.json)
    with harness:
        res = harness.evaluate(args.spec, Path(args.candidate), trials=args.trials, timeout_s=args.timeout,
                               timing=args.timing,
                               overrides=overrides, shapes=args.shapes)
    if args.json:
        print(res.to_json())
    elif res.status == Status.BAD_SPEC:
        return _bad(res.error.strip().splitlines()[0] if res.error else "bad spec", False)
    else:
        print(_table(res))
        print("KERNEL_TEST_PASSED" if res.passed else "KERNEL_TEST_FAILED")
        print(f"FITNESS_SCORE: {res.fitness}")
    if res.status == Status.BAD_SPEC:
        return BAD_INPUT
    return PASSED if res.passed else FAILED


def _table(res: object) -> str:
    from workbench.result import EvalResult

    assert isinstance(res, EvalResult)
    rows = [("status", res.status.value), ("device", res.device), ("shapes checked", ", ".join(res.shapes)),
            ("correct", str(res.correct))]
    if res.runtime_us is not None:
        rows.append(("candidate median", f"{res.runtime_us:.2f} us (p20 {res.runtime_p20_us:.2f}, "
                                         f"p80 {res.runtime_p80_us:.2f})"))
    if res.baseline_runtime_us is not None:
        rows.append(("reference median", f"{res.baseline_runtime_us:.2f} us"))
    if res.max_abs_err is not None:
        rows.append(("max abs / rel error", f"{res.max_abs_err:.3g} / {res.max_rel_err:.3g}"))
    rows.append(("speedup", f"{res.speedup:.4f}x"))
    if res.violations:
        rows.append(("violations", ", ".join(res.violations)))
    out = "\n".join(f"{k:>20}: {v}" for k, v in rows)
    if res.error:
        out += "\n\n" + res.error.strip()
    return out
