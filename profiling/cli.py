"""`workbench profile inspect|summarize|selfcheck`: Proton profiles from the command line."""

from __future__ import annotations

import argparse
import json
import math
import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pandas comes with the verbs that read a trace, not with the command line's start
    import pandas as pd

KERNEL_COLUMNS = [
    "kernel",
    "scope",
    "launches",
    "time_per_launch_us",
    "gbps",
    "bw_fraction",
    "tflops",
    "tflops_fraction",
]
REGION_COLUMNS = [
    "kernel",
    "scope",
    "region",
    "depth",
    "launches",
    "cycles_per_launch",
    "ns_per_launch",
    "share",
    "dur_median",
    "dur_p90",
    "cta_cv",
    "n_ctas",
    "n_warps",
]


def register(subparsers: Any, extra_verbs: Any = ()) -> None:
    """The `profile` verb and its sub-verbs; `extra_verbs`: callables adding more sub-verbs (a caller's own,
    e.g. the workbench's `profile lowered`, which this library knows nothing of)."""
    p = subparsers.add_parser(
        "profile", help="inspect Proton traces; run the profiling self-check on a GPU", description=__doc__
    )
    verbs = p.add_subparsers(dest="profile_command", metavar="VERB")
    p.set_defaults(func=lambda _args: _help(p))

    ins = verbs.add_parser("inspect", help="print the kernel, region and overlap tables of trace files")
    ins.add_argument("files", nargs="+", help=".hatchet / .chrome_trace files or folders of them")
    ins.add_argument("--clock-mhz", type=float, default=None, help="SM clock for cycles -> ns")
    ins.add_argument("--kernel", default=None, help="only this kernel")
    ins.add_argument(
        "--overlap", action="store_true", help="also print the overlap table (needs a probe trace)"
    )
    ins.add_argument("--json", action="store_true", help="one JSON object instead of text tables")
    ins.add_argument("--keep-going", action="store_true", help="skip unreadable files instead of failing")
    ins.set_defaults(func=_inspect)

    summ = verbs.add_parser("summarize", help="the short text the search puts into its prompt")
    summ.add_argument("files", nargs="+")
    summ.set_defaults(func=_summarize)

    sc = verbs.add_parser("selfcheck", help="profile the instrumented kernels on this GPU (writes results)")
    sc.add_argument("rest", nargs=argparse.REMAINDER, help="arguments for python -m profiling.selfcheck")
    sc.set_defaults(func=lambda a: __import__("profiling.selfcheck", fromlist=["main"]).main(a.rest))
    for add in extra_verbs:
        add(verbs)


def _help(parser: argparse.ArgumentParser) -> int:
    parser.print_help()
    return 2


def _load(args: argparse.Namespace) -> Any:
    import profiling

    return profiling.load(
        *args.files,
        clock_mhz=getattr(args, "clock_mhz", None),
        on_error="warn" if getattr(args, "keep_going", False) else "raise",
    )


def _table(df: pd.DataFrame, columns: list[str]) -> str:
    if not len(df):
        return "  (none)"
    cols = [c for c in columns if c in df.columns and df[c].notna().any()]
    return df[cols].to_string(index=False, float_format=lambda v: f"{v:,.4g}", na_rep="-")


def _inspect(args: argparse.Namespace) -> int:
    from profiling import ProfilingError

    try:
        prof = _load(args)
    except ProfilingError as exc:
        sys.stderr.write(f"error: {exc}\n")
        return 2
    k, r = prof.kernels, prof.regions
    if args.kernel:
        k, r = k[k["kernel"] == args.kernel], r[r["kernel"] == args.kernel]
    ov = prof.overlap(kernel=args.kernel) if args.overlap else None
    if args.json:
        out = {
            "device": prof.device,
            "kernels": _records(k),
            "regions": _records(r),
            "warnings": prof.warnings,
            "sources": [str(s) for s in prof.sources],
        }
        if ov is not None:
            out["overlap"] = _records(ov)
        sys.stdout.write(json.dumps(out, indent=1, default=str) + "\n")
        return 0
    dev = prof.device
    sys.stdout.write(
        f"files: {', '.join(s.name for s in prof.sources)}\n"
        f"device: {dev.get('arch', '?')}, {dev.get('num_sms', '?')} SMs, clock "
        f"{dev.get('clock_mhz') or '?'} MHz\n\n"
    )
    sys.stdout.write(
        "kernels (time per launch; bandwidth and TFLOP/s from scope bytes/flops vs ceilings):\n"
        + _table(k, KERNEL_COLUMNS)
        + "\n\n"
    )
    sys.stdout.write(
        "probe regions (cycles per CTA x warp per launch; share of instrumented cycles):\n"
        + _table(r, REGION_COLUMNS)
        + "\n"
    )
    if ov is not None:
        sys.stdout.write(
            "\noverlap (share of A's time another warp of the same CTA is in B):\n"
            + _table(ov, list(ov.columns))
            + "\n"
        )
    for w in prof.warnings:
        sys.stdout.write(f"warning: {w}\n")
    return 0


def _summarize(args: argparse.Namespace) -> int:
    from profiling import ProfilingError, summarize

    try:
        sys.stdout.write(summarize(_load(args)) + "\n")
    except ProfilingError as exc:
        sys.stderr.write(f"error: {exc}\n")
        return 2
    return 0


def _records(df: pd.DataFrame) -> list[dict[str, Any]]:
    return [
        {k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in row.items()}
        for row in df.to_dict(orient="records")
    ]
