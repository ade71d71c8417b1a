"""fast_p and the geometric-mean speedup, as KernelBench defines them (pure arithmetic on records).

KernelBench (`src/score.py`): `fast_p = sum(correct and baseline/actual > p) / n`, over ALL n problems
of the set, so a problem that failed, or never ran, counts as not fast. fast_0 is the correct share.
"""
from __future__ import annotations

import math
from typing import Any, Iterable

P_VALUES = (0.0, 1.0, 1.5, 2.0)
EXCESSIVE_SPEEDUP = 10.0  # KernelBench's `excessive_speedup` review threshold


def fast_p(records: Iterable[dict[str, Any]], p: float, key: str = "speedup") -> float | None:
    """Share of records that are correct AND whose `key` speedup is strictly greater than `p`.

    None for an empty set. A correct record without that speedup (e.g. no compile baseline) counts
    as not fast: the denominator stays every problem.
    """
    recs = list(records)
    if not recs:
        return None
    fast = sum(1 for r in recs if r.get("correct") and (r.get(key) or 0.0) > p)
    return fast / len(recs)


def geomean_speedup(records: Iterable[dict[str, Any]], key: str = "speedup") -> float | None:
    """Geometric mean of `key` over the correct records that have one (None when there are none)."""
    xs = [float(r[key]) for r in records if r.get("correct") and r.get(key) and float(r[key]) > 0]
    if not xs:
        return None
    return math.exp(sum(math.log(x) for x in xs) / len(xs))


def excessive(records: Iterable[dict[str, Any]], threshold: float = EXCESSIVE_SPEEDUP) -> list[str]:
    """Problem ids whose speedup over eager (or over compile) is above `threshold`: review them by hand."""
    return [r["problem_id"] for r in records if r.get("correct") and
            max(r.get("speedup") or 0.0, r.get("speedup_vs_compile") or 0.0) > threshold]


def summarize(records: list[dict[str, Any]], p_values: Iterable[float] = P_VALUES) -> dict[str, Any]:
    """One level's numbers: counts, fast_p against eager (and against torch.compile when measured), geomean."""
    ps = list(p_values)
    has_compile = any(r.get("speedup_vs_compile") is not None for r in records)
    return {
        "n": len(records),
        "done": sum(1 for r in records if r.get("status") == "done"),
        "failed": sum(1 for r in records if r.get("status") == "failed"),
        "unfinished": sum(1 for r in records if r.get("status") not in ("done", "failed")),
        "correct": sum(1 for r in records if r.get("correct")),
        "fast_p": {f"{p:g}": fast_p(records, p) for p in ps},
        "fast_p_vs_compile": {f"{p:g}": fast_p(records, p, "speedup_vs_compile") for p in ps} if has_compile else None,
        "geomean_speedup": geomean_speedup(records),
        "geomean_speedup_vs_compile": geomean_speedup(records, "speedup_vs_compile") if has_compile else None,
        "excessive_speedup": excessive(records),
    }


def by_level(records: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """`summarize` per level (in first-seen order), plus "all"."""
    levels: dict[str, list[dict[str, Any]]] = {}
    for r in records:
        levels.setdefault(str(r.get("level")), []).append(r)
    out = {lvl: summarize(rs) for lvl, rs in levels.items()}
    out["all"] = summarize(records)
    return out
