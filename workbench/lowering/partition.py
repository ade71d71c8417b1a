"""Partition the graph into kernels.

A group is one kernel: an optional *anchor* (a reduction or a matmul) plus the pointwise nodes
fused after it (its epilogue), or a chain of pointwise nodes alone. A pointwise node joins the
group of one of its operands when it has the group's shape, the group is still open and none of
its other operands depends on that group (otherwise the kernel would have to run before and after
that operand). A group closes at the first use of any of its nodes from outside it, so the
kernel can be launched right after its last node, before that use. A pointwise node a little wider than a
reduction's keepdim output (a few elements per row along reduced dims, `wide_dims`) joins its epilogue too, and
so does a gather of one element per row from a tensor the reduction reads (`_gather_group`).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch.fx as fx

from workbench.lowering import families, softmax_match
from workbench.lowering.graph import is_tensor_node, packet, shape_key, val
from workbench.lowering.pointwise import is_pointwise


def anchor_kind(node: fx.Node) -> str | None:
    """The fusion family whose kernel `node` anchors ("reduction", "matmul", "conv"; families.py), or None."""
    return families.anchor_kind(node)


@dataclass(eq=False)
class Group:
    gid: int
    shape: str
    anchor: fx.Node | None = None
    nodes: list[fx.Node] = field(default_factory=list)   # pointwise members, in graph order
    closed: bool = False
    pattern: Any = None   # a whole chain with a template of its own (softmax_match.SoftmaxMatch), nodes its members
    # pointwise nodes a reduction applies as it loads (partition.prologue_cone), graph order
    prologue: list[fx.Node] = field(default_factory=list)
    # reductions of the anchor's input over its dims that its kernel computes too (the sum beside a norm's var)
    siblings: list[fx.Node] = field(default_factory=list)
    # epilogue members (also in `nodes`) of a wider shape than the keepdim output: some reduced dims put back
    # (`wide_dims`); the kernel computes them per row on a [rows, K] tile
    wide: list[fx.Node] = field(default_factory=list)
    # members the kernel stores into their slice of a cat chain's buffer (cat_chain.direct_writes: node -> Into)
    into: dict[fx.Node, Any] = field(default_factory=dict)

    @property
    def members(self) -> list[fx.Node]:
        return ([self.anchor] if self.anchor is not None else []) + self.siblings + self.nodes

    @property
    def last(self) -> fx.Node:
        return self.members[-1]


def is_group_pointwise(node: fx.Node) -> bool:
    if node.op != "call_function" or not is_tensor_node(node):
        return False
    name = packet(node)
    if name in ("max", "min") and len(node.args) > 1 and isinstance(node.args[1], fx.Node):
        return False  # binary max/min: decomposed to maximum/minimum in core ATen already
    return is_pointwise(name)


def _merge_into(target: Group, others: list[Group], group_of: dict[fx.Node, Group],
                order: dict[fx.Node, int]) -> None:
    """Move the members of the anchorless groups `others` into `target` (graph order kept).

    Legal because every group here is open: no node outside a group has used its members yet, so none of
    them can depend on another (ELU's `where(x > 0, x * a, expm1(x) * b)` joins three chains in one kernel)."""
    for g in others:
        for n in g.nodes:
            group_of[n] = target
        target.nodes.extend(g.nodes)
        g.nodes = []
    target.nodes.sort(key=order.__getitem__)


def _joinable(node: fx.Node, ins: list[fx.Node], group_of: dict[fx.Node, Group],
              deps: dict[fx.Node, frozenset[int]], alias: dict[int, int]) -> list[Group]:
    """The open groups of `node`'s shape among its operands' that it may join, first one first."""
    key = shape_key(node)
    found: list[Group] = []
    for a in ins:
        g = group_of.get(a)
        if g is None or g.closed or g.shape != key or g in found:
            continue
        others = [b for b in ins if group_of.get(b) is not g]
        if any(g.gid in _resolved(deps.get(b, frozenset()), alias) for b in others):
            continue
        found.append(g)
    return found


def _resolved(gids: frozenset[int], alias: dict[int, int]) -> frozenset[int]:
    """Group ids with every merged-away group replaced by the group it ended in."""
    if not alias:
        return gids
    out = set()
    for i in gids:
        while i in alias:
            i = alias[i]
        out.add(i)
    return frozenset(out)


WIDE_MAX = 128  # elements a wide epilogue adds per row (`wide_dims`)


def wide_dims(group: Group, node: fx.Node) -> list[int] | None:
    """The reduced dims (static sizes, product at most WIDE_MAX, all after every kept dim) that `node`'s shape
    puts back on `group`'s keepdim output, its other dims equal; None when it is no such shape."""
    from workbench.lowering.graph import reduction_dims

    a = group.anchor
    if a is None or group.pattern is not None or anchor_kind(a) != "reduction" or isinstance(val(a), (tuple, list)):
        return None
    dims, keep = reduction_dims(a)
    if not keep or not is_tensor_node(node):
        return None
    os_, ns = val(a).shape, val(node).shape
    if len(os_) != len(ns) or not dims:
        return None
    kept = [d for d in range(len(os_)) if d not in dims]
    grown: list[int] = []
    k = 1
    for d in range(len(os_)):
        if str(os_[d]) == str(ns[d]):
            continue
        if d not in dims or not isinstance(ns[d], int) or (kept and d < max(kept)):
            return None
        grown.append(d)
        k *= ns[d]
    if not grown or k > WIDE_MAX:
        return None
    # a few values per row of a long reduction: a GroupNorm's per-channel scale and shift ([B, G, C/G, 1] from its
    # [B, G, 1, 1] statistics), never an apply of x's own size
    n = 1
    for d in dims:
        n *= val(a.args[0]).shape[d] if a.args and isinstance(a.args[0], fx.Node) else 1
    if isinstance(n, int) and k * 16 > n:
        return None
    return grown


def _widens(node: fx.Node, ins: list[fx.Node], group_of: dict[fx.Node, Group],
            deps: dict[fx.Node, frozenset[int]], alias: dict[int, int]) -> Group | None:
    """The open reduction group whose epilogue `node` can join as a wide member (`wide_dims`): an operand's
    group; its other operands are that group's members or tensors that do not depend on it."""
    from workbench.lowering.graph import is_sym_node

    if any(is_sym_node(a) for a in node.all_input_nodes):
        return None
    for a in ins:
        g = group_of.get(a)
        if g is None or g.closed or wide_dims(g, node) is None:
            continue
        others = [b for b in ins if group_of.get(b) is not g]
        if any(g.gid in _resolved(deps.get(b, frozenset()), alias) for b in others):
            continue
        if all(not is_tensor_node(b) or len(val(b).shape) <= len(val(node).shape) for b in others):
            return g
    return None


def _reads(g: Group) -> set[fx.Node]:
    """The tensors a reduction group's kernel reads row by row: its anchor's and siblings' inputs, its prologue's."""
    out = {n.args[0] for n in [g.anchor, *g.siblings] if n is not None and isinstance(n.args[0], fx.Node)}
    cone = set(g.prologue)
    out |= {a for n in g.prologue for a in n.all_input_nodes if a not in cone}
    return out


def _gather_group(node: fx.Node, groups: list[Group], group_of: dict[fx.Node, Group],
                  deps: dict[fx.Node, frozenset[int]], alias: dict[int, int],
                  order: dict[fx.Node, int]) -> Group | None:
    """The open reduction group a gather of one element per row joins (templates: a load at the row's index in
    its epilogue): `gather(src, d, idx)` with the group's keepdim shape, d a reduced dim, src a tensor the group
    reads row by row (cross entropy's picked logits beside its log-sum-exp over the same rows). The index's own
    open pointwise group of that shape merges into it (its nodes in the epilogue too)."""
    from workbench.lowering.graph import reduction_dims

    if packet(node) != "gather" or len(node.args) != 3 or node.kwargs.get("sparse_grad"):
        return None
    src, d, idx = node.args
    if not isinstance(src, fx.Node) or not isinstance(idx, fx.Node) or not isinstance(d, int):
        return None
    key = shape_key(node)
    for g in reversed(groups):
        if g.closed or g.pattern is not None or g.shape != key or g.anchor is None or g.gid in alias:
            continue
        if anchor_kind(g.anchor) != "reduction" or isinstance(val(g.anchor), (tuple, list)):
            continue
        dims, keep = reduction_dims(g.anchor)
        if not keep or d % max(len(val(src).shape), 1) not in dims or src not in _reads(g):
            continue
        a = group_of.get(idx)
        if a is not None and a is not g and not a.closed and a.anchor is None and a.pattern is None \
                and a.shape == key and a.gid not in _resolved(deps.get(g.anchor, frozenset()), alias):
            _merge_into(g, [a], group_of, order)
            alias[a.gid] = g.gid
            a.closed = True
        elif a is not g and g.gid in _resolved(deps.get(idx, frozenset()), alias):
            continue
        return g
    return None


def _pattern_groups(graph: fx.Graph, groups: list[Group]) -> dict[fx.Node, Group]:
    """node -> its group for the chains that one template computes whole (softmax, log-softmax)."""
    out: dict[fx.Node, Group] = {}
    for m in softmax_match.find_all(graph):
        members = m.internal + [m.out]
        if any(n in out for n in members):
            continue
        g = Group(gid=len(groups), shape=shape_key(m.out), nodes=members, pattern=m)
        groups.append(g)
        out.update((n, g) for n in members)
    return out


PROLOGUE_KINDS = frozenset({"sum", "mean", "nansum", "prod", "amax", "amin", "var"})


def prologue_cone(red: fx.Node, readers: frozenset[fx.Node] | None = None) -> list[fx.Node]:
    """The pointwise nodes a reduction can compute as it loads its input, in graph order: the input and,
    upward, every pointwise node of the input's shape whose users all lie in the cone or are the reductions
    `readers` (default: `red`). External tensors of the cone (any number, broadcast to the input's shape) are
    read in place by the reduction kernel: `x ** 2` into a norm's sum, `clamp(1 - pred * target, 0)` into a
    hinge loss's mean, `(pred - target) ** 2` into an MSE, each its own kernel and a full round trip through
    memory otherwise (100_HingeLoss: 3 launches, 0.27x of torch.compile on the H200)."""
    from workbench.lowering.graph import is_sym_node

    if packet(red) not in PROLOGUE_KINDS or not isinstance(red.args[0], fx.Node):
        return []
    readers = readers or frozenset({red})
    x = red.args[0]
    key = shape_key(x)
    cone: set[fx.Node] = set()
    stack = [x]
    while stack:
        n = stack.pop()
        if n in cone or not is_group_pointwise(n) or packet(n) == "copy" or shape_key(n) != key:
            continue
        if not set(n.users) <= cone | readers or any(is_sym_node(a) for a in n.all_input_nodes):
            continue
        cone.add(n)
        # an input turned away while some of its users were outside the cone is pushed again by its last user
        stack.extend(a for a in n.all_input_nodes if is_tensor_node(a))
    if x not in cone:
        return []
    order = {n: i for i, n in enumerate(red.graph.nodes)}
    return sorted(cone, key=order.__getitem__)


def prologue_chain(red: fx.Node) -> list[fx.Node]:
    """The prologue of `red` (`prologue_cone`); kept under its old name for the callers that read a chain."""
    return prologue_cone(red)


def _prologue_groups(graph: fx.Graph, groups: list[Group], taken: dict[fx.Node, Group]) -> dict[fx.Node, Group]:
    """node -> the reduction group of every reduction with a prologue or siblings (`norm_stats`: a var and the
    sum of the same input over the same dims, one kernel), and of its prologue's nodes and siblings."""
    out: dict[fx.Node, Group] = {}
    for node in graph.nodes:
        if node.op != "call_function" or node in taken or node in out or anchor_kind(node) != "reduction":
            continue
        if isinstance(val(node), (tuple, list)):
            continue
        sibs = [s for s in node.meta.get("wb_siblings", ()) if s not in taken and s not in out]
        cone = prologue_cone(node, frozenset([node, *sibs]))
        if node.meta.get("wb_co"):
            # sums of two prologues (norm_stats.pair_row_reductions): both cones, or no pair at all
            cones = [cone] + [prologue_cone(s, frozenset([node, *sibs])) for s in sibs]
            if len(sibs) != len(node.meta["wb_siblings"]) or not all(cones) or \
                    any(n in taken or n in out for c in cones for n in c):
                sibs, cones = [], [prologue_cone(node)]
            order = {n: i for i, n in enumerate(graph.nodes)}
            cone = sorted({n for c in cones for n in c}, key=order.__getitem__)
        if any(n in taken or n in out for n in cone):
            cone = []
        if not cone and not sibs:
            continue
        g = Group(gid=len(groups), shape=shape_key(node), anchor=node, prologue=cone, siblings=sibs)
        groups.append(g)
        out.update((n, g) for n in [*cone, node, *sibs])
    return out


def partition(graph: fx.Graph) -> dict[fx.Node, Group]:
    """node -> its group, for every pointwise and anchor node."""
    group_of: dict[fx.Node, Group] = {}
    deps: dict[fx.Node, frozenset[int]] = {}
    groups: list[Group] = []
    order = {n: i for i, n in enumerate(graph.nodes)}
    alias: dict[int, int] = {}  # gid of a group merged away -> the gid it went into
    chained = _pattern_groups(graph, groups)
    chained.update(_prologue_groups(graph, groups, chained))
    for node in graph.nodes:
        ins = [a for a in node.all_input_nodes]
        # any use of a grouped node from outside its group closes that group
        mine = group_of.get(node)
        d: set[int] = set()
        for a in ins:
            d |= deps.get(a, frozenset())
        kind = anchor_kind(node) if node.op == "call_function" else None
        gathered = _gather_group(node, groups, group_of, deps, alias, order) \
            if node not in chained and node.op == "call_function" else None
        if node in chained:
            group_of[node] = mine = chained[node]
            d.add(mine.gid)
        elif gathered is not None:
            gathered.nodes.append(node)
            group_of[node] = mine = gathered
            d.add(gathered.gid)
        elif kind is not None or is_group_pointwise(node):
            target: Group | None = None
            if kind is None:
                found = _joinable(node, ins, group_of, deps, alias)
                if found:
                    # the first operand's group (possibly a reduction's epilogue) takes the anchorless others
                    target = found[0]
                    extra = [g for g in found[1:] if g.anchor is None and g.pattern is None]
                    _merge_into(target, extra, group_of, order)
                    for g in extra:
                        alias[g.gid] = target.gid
                else:
                    # a small pointwise node over a reduction's statistics, wider than them: its epilogue
                    target = _widens(node, ins, group_of, deps, alias)
                    if target is not None:
                        target.wide.append(node)
            if target is None:
                target = Group(gid=len(groups), shape=shape_key(node) if is_tensor_node(node) else "")
                groups.append(target)
                if kind is not None:
                    target.anchor = node
                else:
                    target.nodes.append(node)
            else:
                target.nodes.append(node)
            group_of[node] = target
            mine = target
            d.add(target.gid)
        for a in ins:
            g = group_of.get(a)
            if g is not None and g is not mine:
                g.closed = True
        deps[node] = _resolved(frozenset(d), alias)
    return group_of


def materialized(group: Group, users_outside: dict[fx.Node, bool]) -> list[fx.Node]:
    """Members whose values leave the kernel: used outside the group or returned."""
    return [n for n in group.members if users_outside.get(n)]


def outside_users(graph: fx.Graph, group_of: dict[fx.Node, Group]) -> dict[fx.Node, bool]:
    out: dict[fx.Node, bool] = {}
    for node, g in group_of.items():
        out[node] = any(group_of.get(u) is not g for u in node.users)
    return out
