"""The offline tuning operator: mutates a kernel's declared TUNABLES, no model needed.

A lowered draft's kernel families register their likely-best points for an H200 beside their templates
(`workbench.lowering.tune.configs`, best guess first): a plain mutation proposes those first, in order, the
first one not yet in the graph; the random moves come after them.

Mutation moves one or two tunables (mostly to a neighbouring allowed value, sometimes anywhere);
crossover takes each tunable from either parent. Configs that `tunables_valid` rejects or whose
rewritten source is already in the graph are skipped; when random moves stop finding new configs
the operator enumerates the remaining space nearest the parent first, and reports exhaustion
when none is left.
"""

from __future__ import annotations

import itertools
import logging
import random
from typing import Any

from workbench.memory.records import content_hash
from workbench.search.operators.base import Operator, OperatorContext, Proposal, Provenance, Signal
from workbench.search.tunables import TunablesError, TunableSpace, apply_config, parse_tunables

log = logging.getLogger(__name__)

_ENUMERATE_LIMIT = 20000  # configs; larger spaces are only sampled


def has_tunables(source: str | None) -> bool:
    if not source:
        return False
    try:
        parse_tunables(source)
    except TunablesError:
        return False
    return True


def _family_points(source: str, space: TunableSpace, n: int) -> list[dict[str, Any]]:
    """The kernel families' registered points for this source (a lowered draft's families), each a whole
    config of `space`; [] for a kernel the lowering did not write (no family's tunables in it)."""
    if n <= 0:
        return []
    from workbench.lowering.tune import configs  # below the search: the lowering never imports it

    try:
        points = configs(source, n)
    except Exception:  # noqa: BLE001 - a hint only: random moves remain
        log.debug("no family points for this kernel", exc_info=True)
        return []
    return [{**space.current, **p} for p in points]


class OfflineTuningOperator(Operator):
    name = "offline"
    can_draft = False
    supports_crossover = True
    can_repair = False

    def __init__(self, *, max_tries: int = 64, p_neighbour: float = 0.75, p_two_moves: float = 0.3,
                 prior_points: int = 8) -> None:
        self.max_tries = max_tries
        self.prior_points = prior_points
        self.p_neighbour = p_neighbour
        self.p_two_moves = p_two_moves

    def _mutate(self, space: TunableSpace, base: dict[str, Any], rng: random.Random) -> dict[str, Any]:
        cfg = dict(base)
        movable = [k for k, v in space.choices.items() if len(v) > 1]
        if not movable:
            return cfg
        n_moves = 2 if (len(movable) > 1 and rng.random() < self.p_two_moves) else 1
        for k in rng.sample(movable, n_moves):
            values = space.choices[k]
            i = values.index(cfg[k]) if cfg[k] in values else rng.randrange(len(values))
            if rng.random() < self.p_neighbour:
                j = min(max(i + rng.choice((-1, 1)), 0), len(values) - 1)
                if j == i:  # at an end of the list: step inwards
                    j = i + 1 if i == 0 else i - 1
            else:
                j = rng.choice([x for x in range(len(values)) if x != i])
            cfg[k] = values[j]
        return cfg

    def propose(self, ctx: OperatorContext) -> Proposal:
        kind = "offline-crossover" if len(ctx.parents) > 1 else "offline"
        if not ctx.parents or ctx.parents[0].source is None:
            return Proposal(
                kind,
                error_class="no_parent",
                diagnosis="the offline tuning operator needs a parent kernel (a seed) to tune",
            )
        parent = ctx.parents[0]
        try:
            space = parse_tunables(parent.source)
        except TunablesError as exc:
            return Proposal(kind, error_class="no_tunables", diagnosis=f"parent {parent.id}: {exc}")
        rng = random.Random(ctx.seed)
        base = dict(space.current)
        if len(ctx.parents) > 1 and ctx.parents[1].source:
            try:
                other = parse_tunables(ctx.parents[1].source).current
            except TunablesError:
                other = {}
            base = {
                k: (other[k] if k in other and other[k] in space.choices[k] and rng.random() < 0.5 else v)
                for k, v in base.items()
            }
        if len(ctx.parents) == 1:
            for cfg in _family_points(parent.source, space, self.prior_points):
                found = self._accept(ctx, space, parent.source, cfg)
                if found is not None:
                    return self._proposal(kind, space, found, cfg, 0, prior=True)
        for attempt in range(self.max_tries):
            # crossover keeps its mix on the first try; every later try (and plain mutation) moves
            cfg = base if (attempt == 0 and base != space.current) else self._mutate(space, base, rng)
            found = self._accept(ctx, space, parent.source, cfg)
            if found is not None:
                return self._proposal(kind, space, found, cfg, attempt)
        cfg = self._nearest_unseen(ctx, space, parent.source, rng)
        if cfg is None:
            return Proposal(
                kind,
                error_class="space_exhausted",
                signal=Signal.EXHAUSTED,
                diagnosis=f"every valid configuration of the {space.size()} in the tuning space "
                f"of node {parent.id} is already in the graph",
            )
        return self._proposal(kind, space, apply_config(parent.source, space, cfg), cfg, self.max_tries)

    def _accept(
        self, ctx: OperatorContext, space: TunableSpace, source: str, cfg: dict[str, Any]
    ) -> str | None:
        if cfg == space.current or not space.valid(cfg):
            return None
        new = apply_config(source, space, cfg)
        return None if content_hash(new) in ctx.seen_hashes else new

    def _nearest_unseen(
        self, ctx: OperatorContext, space: TunableSpace, source: str, rng: random.Random
    ) -> dict[str, Any] | None:
        if space.size() > _ENUMERATE_LIMIT:
            return None
        keys = list(space.choices)
        best: list[dict[str, Any]] = []
        best_d = None
        for values in itertools.product(*(space.choices[k] for k in keys)):
            cfg = dict(zip(keys, values, strict=True))
            d = sum(cfg[k] != space.current[k] for k in keys)
            if best_d is not None and d > best_d:
                continue
            if self._accept(ctx, space, source, cfg) is None:
                continue
            if best_d is None or d < best_d:
                best, best_d = [cfg], d
            else:
                best.append(cfg)
        return rng.choice(best) if best else None

    def _proposal(
        self, kind: str, space: TunableSpace, source: str, cfg: dict[str, Any], tries: int, prior: bool = False
    ) -> Proposal:
        changed = {k: [space.current[k], v] for k, v in cfg.items() if v != space.current[k]}
        desc = ", ".join(f"{k} {a!r} -> {b!r}" for k, (a, b) in changed.items())
        return Proposal(
            kind,
            source=source,
            diagnosis=f"tuned: {desc}",
            meta={"config": cfg, "changed": changed, "tries": tries, "family_point": prior},
            costly=False,  # milliseconds and no tokens: a duplicate is dropped, not recorded
            provenance=Provenance("offline", form="tuned"),
        )
