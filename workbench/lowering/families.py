"""The fusion families: what kind of kernel a partition group becomes, registered where each is defined.

A group of the partition (`partition.py`) is one kernel. Its family decides which ops may anchor it
(`anchor`), which template writes it (`make`), which TUNABLES that kernel reads (`tunables`, plus
`MM_PRECISION` for a family whose kernel calls `tl.dot`) and which points the offline tuner tries
(`register_space`). Each family module registers its own (`templates.py`: pointwise, reduction, matmul;
`conv.py`: convolution and the depthwise tile; `softmax.py`: softmax), as `primitives.register` does for
standalone primitives; `codegen.emit_group`, `partition.anchor_kind` and `tune.configs` only read the
registry. Nothing here imports a family module: `primitives.load()` imports them (by name, from
`primitives.MODULES`), so the registry is complete after it.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from workbench.lowering import primitives
from workbench.lowering.graph import packet


@dataclass(frozen=True)
class Family:
    """One kind of fused kernel."""

    name: str
    # the kernel's name prefix; "{op}" becomes the anchor's packet name (reduce_sum_kernel_3)
    prefix: str
    # make(kernel name, group, materialized members, node names, precision) -> (source, launch lines, helpers)
    make: Callable[..., Any]
    tunables: tuple[str, ...]
    # the anchor ops this family computes (a node predicate); None: the family has no anchor
    anchor: Callable[[Any], bool] | None = None
    # the family's groups are whole matched chains (`Group.pattern`, e.g. a softmax), claimed before anchors
    pattern: bool = False
    # the kernel calls tl.dot: it reads MM_PRECISION unless the spec fixed tf32
    dot: bool = False
    # lower first: the order families claim groups and anchors in
    rank: int = 50

    def claims(self, group: Any) -> bool:
        if self.pattern:
            return group.pattern is not None
        if group.pattern is not None:
            return False
        if self.anchor is None:
            return group.anchor is None
        return group.anchor is not None and self.anchor(group.anchor)

    def kernel_prefix(self, group: Any) -> str:
        return self.prefix.format(op=packet(group.anchor)) if group.anchor is not None else self.prefix

    def tunables_for(self, precision: str) -> set[str]:
        return set(self.tunables) | ({"MM_PRECISION"} if self.dot and precision != "tf32" else set())


@dataclass(frozen=True)
class Space:
    """The offline tuner's points for one family of kernels: tunable names and their points, best guess
    first. `rank` orders the merge of a config: a later space's value of a shared name wins."""

    name: str
    names: tuple[str, ...]
    points: tuple[tuple[Any, ...], ...]
    rank: int = 50


FAMILIES: dict[str, Family] = {}
SPACES: dict[str, Space] = {}


def register_family(fam: Family) -> None:
    if fam.name in FAMILIES and FAMILIES[fam.name] != fam:
        raise ValueError(f"family {fam.name} registered twice")
    FAMILIES[fam.name] = fam


def register_space(space: Space) -> None:
    if any(len(p) != len(space.names) for p in space.points):
        raise ValueError(f"tuner space {space.name}: a point does not name every tunable of {space.names}")
    if space.name in SPACES and SPACES[space.name] != space:
        raise ValueError(f"tuner space {space.name} registered twice")
    SPACES[space.name] = space


def families() -> list[Family]:
    """Every family in the order they claim groups."""
    primitives.load()
    return sorted(FAMILIES.values(), key=lambda f: (f.rank, f.name))


def spaces() -> list[Space]:
    """Every tuner space in merge order."""
    primitives.load()
    return sorted(SPACES.values(), key=lambda s: (s.rank, s.name))


def of_group(group: Any) -> Family:
    for fam in families():
        if fam.claims(group):
            return fam
    raise LookupError(f"no fusion family claims the group anchored at {group.anchor}")


def anchor_kind(node: Any) -> str | None:
    """The name of the family whose kernel `node` anchors, or None (a pointwise node or a glue op)."""
    for fam in families():
        if fam.anchor is not None and fam.anchor(node):
            return fam.name
    return None
