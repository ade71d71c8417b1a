"""Selection policies: which node(s) the operator expands next.

Each policy sees finished nodes through `observe` (in finish order; on resume the engine replays the
run's history through it) and answers `select` with the parent(s) for the next candidate:
no parent (draft from the spec), one (mutate / repair / tune), or two (crossover).
"""

from __future__ import annotations

import abc
import logging
import math
import random
from dataclasses import dataclass, field

from workbench.search.node import Node, Tree

log = logging.getLogger(__name__)


@dataclass
class Selection:
    parents: list[Node] = field(default_factory=list)
    island: int | None = None

    @property
    def kind(self) -> str:
        return {0: "draft", 1: "mutate"}.get(len(self.parents), "crossover")


class Policy(abc.ABC):
    """One selection policy. `can_draft`: the operator can write a kernel from the spec alone (LLM);
    `crossover`: the operator accepts two parents."""

    name = "policy"

    def __init__(
        self, *, rng: random.Random | None = None, can_draft: bool = False, crossover: bool = False
    ) -> None:
        self.rng = rng or random.Random(0)
        self.can_draft = can_draft
        self.crossover = crossover

    @abc.abstractmethod
    def select(self, tree: Tree) -> Selection | None:
        """The next expansion, or None when there is nothing to expand until a result arrives."""

    def observe(self, node: Node, tree: Tree) -> None:  # noqa: B027 - optional hook
        """A node finished (evaluated, or recorded as a generation failure)."""

    def release(self, sel: Selection, tree: Tree) -> None:  # noqa: B027 - optional hook
        """A selection produced no node (the proposal was discarded): undo any bookkeeping of `select`."""

    def _fallback(self, tree: Tree) -> Selection | None:
        """Nothing has passed yet: repair the latest failure that has code, draft, or wait."""
        done = [n for n in tree if n.evaluated and n.source is not None]
        if done:
            return Selection([done[-1]])
        pending = [n for n in tree if not n.evaluated]
        if self.can_draft and not any(not n.parents for n in pending):
            return Selection([])
        return None


class GreedyPolicy(Policy):
    """Expand the fittest node so far (the paper's greedy search)."""

    name = "greedy"

    def select(self, tree: Tree) -> Selection | None:
        best = tree.best()
        return Selection([best]) if best is not None else self._fallback(tree)


def reward(node: Node) -> float:
    """Fitness squashed into [0, 1): 0 for failures, 0.5 at parity with the reference, -> 1 for big wins.

    A bounded, stationary reward keeps UCT's exploration constant meaningful across specs whose
    speedups range from 0.01x (interpreter) to 10x.
    """
    f = max(node.fitness, 0.0) if node.passed else 0.0
    return f / (1.0 + f)


class MCTSPolicy(Policy):
    """Monte-Carlo tree search with UCT and progressive widening.

    From a virtual root above the seeds (or drafts), descend by UCT; stop at a node whose children
    (finished and in flight) number fewer than `widen * visits ** alpha` and expand it. Rewards are
    backed up along the primary-parent chain. Nodes chosen but not yet back carry a virtual loss so
    concurrent selections spread over the tree.
    """

    name = "mcts"
    ROOT = "__root__"

    def __init__(self, *, c: float = 0.7, widen: float = 1.0, alpha: float = 0.5, **kw: object) -> None:
        super().__init__(**kw)  # type: ignore[arg-type]
        self.c, self.widen, self.alpha = c, widen, alpha
        self.visits: dict[str, float] = {self.ROOT: 0.0}
        self.value: dict[str, float] = {self.ROOT: 0.0}
        self.virtual: dict[str, float] = {self.ROOT: 0.0}

    def _n(self, node_id: str) -> float:
        return self.visits.get(node_id, 0.0) + self.virtual.get(node_id, 0.0)

    def uct(self, node_id: str, parent_id: str) -> float:
        n = self._n(node_id)
        if n == 0:
            return math.inf
        q = self.value.get(node_id, 0.0) / n  # virtual visits count as reward 0 (virtual loss)
        return q + self.c * math.sqrt(math.log(max(self._n(parent_id), 1.0)) / n)

    def _allowed_children(self, visits: float) -> int:
        return max(1, int(self.widen * max(visits, 1.0) ** self.alpha))

    def observe(self, node: Node, tree: Tree) -> None:
        r = reward(node)
        path = [a.id for a in tree.ancestors(node.id)]
        for nid in (self.ROOT, *path, node.id):
            self.visits[nid] = self.visits.get(nid, 0.0) + 1.0
            self.value[nid] = self.value.get(nid, 0.0) + r
        if node.parents:  # this node's selection put a virtual visit on its parent's path
            for nid in (self.ROOT, *path):
                self.virtual[nid] = max(0.0, self.virtual.get(nid, 0.0) - 1.0)

    def release(self, sel: Selection, tree: Tree) -> None:
        if sel.parents:
            p = sel.parents[0]
            for nid in (self.ROOT, *[a.id for a in tree.ancestors(p.id)], p.id):
                self.virtual[nid] = max(0.0, self.virtual.get(nid, 0.0) - 1.0)

    def select(self, tree: Tree) -> Selection | None:
        if not any(n.evaluated and n.source is not None for n in tree):
            return self._fallback(tree)
        cur = self.ROOT
        while True:
            if cur == self.ROOT:
                kids_all = tree.roots()
            else:
                kids_all = tree.kids(cur)
            kids = [k for k in kids_all if k.evaluated and k.source is not None]
            in_flight = [k for k in kids_all if not k.evaluated]
            room = len(kids) + len(in_flight) < self._allowed_children(self._n(cur))
            if cur == self.ROOT:
                if self.can_draft and (room or not kids):
                    chosen: Node | None = None
                    break
                if not kids:
                    return None
            elif room or not kids:
                chosen = tree[cur]
                break
            cur = max(kids, key=lambda k: (self.uct(k.id, cur), k.fitness, -k.seq)).id
        if chosen is None:
            return Selection([])
        for nid in (self.ROOT, *[a.id for a in tree.ancestors(chosen.id)], chosen.id):
            self.virtual[nid] = self.virtual.get(nid, 0.0) + 1.0
        return Selection([chosen])


class EvolvePolicy(Policy):
    """Evolutionary search on islands (OpenEvolve / FunSearch style).

    The population is split into `islands`; each selection takes the next island in turn and picks
    parent(s) by tournament (`tournament` random members, fittest wins). With probability
    `crossover_rate` (when the operator supports it) a second tournament gives a second parent.
    Every `migration_every` finished nodes each island sends its best member to the next (ring).
    Islands keep their `population` fittest members.
    """

    name = "evolve"

    def __init__(
        self,
        *,
        islands: int = 3,
        tournament: int = 3,
        population: int = 8,
        migration_every: int = 6,
        crossover_rate: float = 0.3,
        **kw: object,
    ) -> None:
        super().__init__(**kw)  # type: ignore[arg-type]
        if islands < 1 or tournament < 1 or population < 1 or migration_every < 1:
            raise ValueError("islands, tournament, population and migration_every must be >= 1")
        self.n_islands, self.tournament, self.population = islands, tournament, population
        self.migration_every, self.crossover_rate = migration_every, crossover_rate
        self.islands: list[list[str]] = [[] for _ in range(islands)]
        self.migrations: list[tuple[int, int, str]] = []  # (from island, to island, node id)
        self._turn = 0
        self._seeds_seen = 0
        self._finished = 0

    def observe(self, node: Node, tree: Tree) -> None:
        self._finished += 1
        if node.source is not None:
            if node.island is None:  # a seed (or draft): spread seeds over the islands
                self._join(self._seeds_seen % self.n_islands, node, tree)
                self._seeds_seen += 1
            else:
                self._join(node.island % self.n_islands, node, tree)
        if self._finished % self.migration_every == 0:
            self._migrate(tree)

    def _join(self, island: int, node: Node, tree: Tree) -> None:
        members = self.islands[island]
        if node.id not in members:
            members.append(node.id)
        members.sort(key=lambda i: (-tree[i].fitness, tree[i].seq))
        del members[self.population :]

    def _migrate(self, tree: Tree) -> None:
        bests = [max(m, key=lambda i: (tree[i].fitness, -tree[i].seq)) if m else None for m in self.islands]
        for i, b in enumerate(bests):
            j = (i + 1) % self.n_islands
            if b is not None and j != i and b not in self.islands[j]:
                self._join(j, tree[b], tree)
                self.migrations.append((i, j, b))
                log.debug("migration: node %s from island %d to %d", b, i, j)

    def _tourney(self, pool: list[Node]) -> Node:
        contestants = self.rng.sample(pool, min(self.tournament, len(pool)))
        return max(contestants, key=lambda n: (n.fitness, -n.seq))

    def select(self, tree: Tree) -> Selection | None:
        ready = [n for n in tree if n.evaluated and n.source is not None]
        if not ready:
            return self._fallback(tree)
        island = self._turn % self.n_islands
        self._turn += 1
        if not self.islands[island]:  # an empty island borrows a random finished node to start from
            self._join(island, self.rng.choice(ready), tree)
        pool = [tree[i] for i in self.islands[island]]
        first = self._tourney(pool)
        if self.crossover and self.rng.random() < self.crossover_rate:
            others = [n for n in pool if n.id != first.id and n.passed]
            if others and first.passed:
                return Selection([first, self._tourney(others)], island=island)
        return Selection([first], island=island)


POLICIES: dict[str, type[Policy]] = {"greedy": GreedyPolicy, "mcts": MCTSPolicy, "evolve": EvolvePolicy}


def make_policy(name: str, **kw: object) -> Policy:
    """A policy by name: greedy, mcts or evolve."""
    try:
        cls = POLICIES[name]
    except KeyError:
        raise ValueError(f"unknown policy {name!r}: expected one of {', '.join(POLICIES)}") from None
    return cls(**kw)  # type: ignore[arg-type]
