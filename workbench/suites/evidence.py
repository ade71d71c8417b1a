"""What a suite report says beside the verdict and the speedup: how far each kernel is from the hardware
(its share of the GPU's ceilings) and, for a mismatch, whether the candidate is as close to the exact result
as eager itself is (the fp64 referee).

Both are information: neither changes a verdict, a fitness or fast_p.
"""
from __future__ import annotations

import math
import statistics
from typing import Any


def ceiling_share(record: dict[str, Any], arch: str | None, tf32: bool = False) -> dict[str, Any] | None:
    """The correct candidate's achieved bandwidth or FLOP rate as a share of `arch`'s ceilings
    (`workbench.lowering.roofline`), from the forward's work recorded at prepare time and its timed runtime.
    None when any of them is missing or the architecture has no ceilings (a CPU run)."""
    work, time_us = record.get("work"), record.get("runtime_us")
    if not (record.get("correct") and arch and isinstance(work, dict) and time_us and float(time_us) > 0):
        return None
    from platforms.ceilings import ceilings
    from workbench.lowering.roofline import Work, achieved_share

    if not ceilings(arch):
        return None
    try:
        share = achieved_share(Work(float(work["flops"]), float(work["bytes"]), str(work["dtype"])),
                               float(time_us), arch, tf32)
    except (KeyError, TypeError, ValueError):
        return None
    out = {"share": share.share, "bound": share.bound, "gbs": share.gbs, "tflops": share.tflops,
           "bandwidth_share": share.bandwidth_share, "flop_share": share.flop_share, "arch": arch}
    return {k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in out.items()}


def as_good_as_eager(record: dict[str, Any]) -> bool:
    """Not correct at the harness's tolerances, yet no farther from the fp64 result than eager's own output."""
    ref = record.get("referee") or {}
    return not record.get("correct") and bool(ref.get("as_good_as_eager"))


def annotate(records: list[dict[str, Any]], arch: str | None) -> None:
    """Each record's `ceiling` (share of the ceilings, or None), in place."""
    for r in records:
        r["ceiling"] = ceiling_share(r, arch)


def level_evidence(records: list[dict[str, Any]]) -> dict[str, Any]:
    """Per level: how many mismatches match fp64 as well as eager does, and the median ceiling share."""
    shares = [float(r["ceiling"]["share"]) for r in records if (r.get("ceiling") or {}).get("share") is not None]
    return {"matches_fp64_as_eager": sum(1 for r in records if as_good_as_eager(r)),
            "refereed": sum(1 for r in records if (r.get("referee") or {}).get("as_good_as_eager") is not None),
            "median_ceiling_share": statistics.median(shares) if shares else None}


def by_family(records: list[dict[str, Any]], families: dict[str, str]) -> dict[str, dict[str, Any]]:
    """The ATen suite's speed per op family (`aten_families`; `families`: OpInfo label -> family, as the run's
    scope.json keeps it), per dtype and over all: n, correct, geomean and fast_1 over eager and torch.compile."""
    from workbench.suites.scoring import fast_p, geomean_speedup

    groups: dict[str, list[dict[str, Any]]] = {}
    for r in records:
        label = str(r.get("problem_id", "")).removeprefix("aten/").rsplit("/", 1)[0]
        groups.setdefault(families.get(label, "other"), []).append(r)
    out = {}
    for fam in sorted(groups, key=lambda f: -len(groups[f])):
        rs = groups[fam]
        out[fam] = {"n": len(rs), "correct": sum(1 for r in rs if r.get("correct")),
                    "geomean_speedup": geomean_speedup(rs), "fast_1": fast_p(rs, 1.0),
                    "geomean_speedup_vs_compile": geomean_speedup(rs, "speedup_vs_compile"),
                    "fast_1_vs_compile": fast_p(rs, 1.0, "speedup_vs_compile")
                    if any(r.get("speedup_vs_compile") is not None for r in rs) else None}
    return out
