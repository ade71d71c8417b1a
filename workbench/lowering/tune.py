"""The GPU config space of each primitive, for the offline tuner of a lowered draft.

A draft's kernels read module-level TUNABLES (block sizes, warps, stages, the fp32 dot precision); each
kernel family registers a short list of points of its tunables beside its template, best guess first, for an
H200 (`families.register_space`; `space()` collects them).
`configs(source, n)` returns up to n configs of one draft: config k takes the k-th point of every family
the draft uses (families are independent kernels, so one timing tries a point of each), skipping points
whose values the draft's TUNABLES do not allow and the draft's current values. `fitting(source, launches,
configs)` drops the configs that cannot run on an H200 (`sm90_check.check_config`: shared memory,
registers), from launches recorded on the CPU.

The search's offline operator proposes these configs first, in order (`workbench suite --budget N`,
`workbench optimize`): the harness times each and keeps only configs whose outputs still match eager (so
"tf32x3" stays only where the tolerance holds).
"""
from __future__ import annotations

from typing import Any

from workbench.lowering import families
from workbench.tunables import parse_tunables

# names more than one family's kernels read: they do not make a family apply to a draft
SHARED = {"NUM_WARPS", "MM_PRECISION"}


def space() -> dict[str, tuple[tuple[str, ...], tuple[tuple[Any, ...], ...]]]:
    """family -> (tunable names, points, best guess first), in merge order: registered beside each family
    (`families.register_space`); a later family's value of a shared name (NUM_WARPS, MM_PRECISION) wins."""
    return {s.name: (s.names, s.points) for s in families.spaces()}


def configs(source: str, n: int) -> list[dict[str, Any]]:
    """Up to n distinct configs of the draft `source`, none equal to its current values."""
    parsed = parse_tunables(source)
    allowed, current = parsed.choices, dict(parsed.current)
    spaces = space()
    fams = [f for f in spaces if (set(spaces[f][0]) - SHARED) & allowed.keys()]
    out: list[dict[str, Any]] = []
    longest = max((len(spaces[f][1]) for f in fams), default=0)
    for k in range(longest):
        cfg: dict[str, Any] = {}
        for f in fams:
            names, points = spaces[f]
            point = dict(zip(names, points[k % len(points)]))
            if all(name not in allowed or v in allowed[name] for name, v in point.items()):
                cfg.update({name: v for name, v in point.items() if name in allowed})
        if cfg and any(current.get(name) != v for name, v in cfg.items()) and cfg not in out:
            out.append(cfg)
        if len(out) >= n:
            break
    return out


def fitting(source: str, launches: list, cfgs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The configs whose recorded launches compile for sm_90 and fit an H200 block."""
    from workbench.lowering import sm90_check as sc

    return [c for c in cfgs if all(f.ok for f in sc.check_config(source, launches, c))]
