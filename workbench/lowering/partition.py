"""Partition the graph into kernels.

A group is one kernel: an optional *anchor* (a reduction or a matmul) plus the pointwise nodes
fused after it (its epilogue), or a chain of pointwise nodes alone. A pointwise node joins the
group of one of its operands when it has the group's shape, the group is still open and none of
its other operands depends on that group (otherwise the kernel would have to run before and after
that operand). A group closes at the first use of any of its nodes from outside it, so the
kernel can be launched right after its last node, before that use.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import torch.fx as fx

from workbench.lowering.graph import is_tensor_node, packet, shape_key
from workbench.lowering.pointwise import is_pointwise

REDUCTIONS = frozenset({"sum", "mean", "amax", "amin", "prod", "argmax", "argmin", "var", "any", "all", "max",
                        "min", "nansum"})
MATMULS = frozenset({"mm", "bmm"})


def anchor_kind(node: fx.Node) -> str | None:
    name = packet(node)
    if name in MATMULS:
        return "matmul"
    if name == "convolution":
        return "conv"
    if name in REDUCTIONS and node.op == "call_function":
        # max/min with one tensor and no dim are full reductions; max/min of two tensors are pointwise
        if name in ("max", "min") and len(node.args) > 1 and isinstance(node.args[1], fx.Node):
            return None
        return "reduction"
    return None


@dataclass(eq=False)
class Group:
    gid: int
    shape: str
    anchor: fx.Node | None = None
    nodes: list[fx.Node] = field(default_factory=list)   # pointwise members, in graph order
    closed: bool = False

    @property
    def members(self) -> list[fx.Node]:
        return ([self.anchor] if self.anchor is not None else []) + self.nodes

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


def partition(graph: fx.Graph) -> dict[fx.Node, Group]:
    """node -> its group, for every pointwise and anchor node."""
    group_of: dict[fx.Node, Group] = {}
    deps: dict[fx.Node, frozenset[int]] = {}
    groups: list[Group] = []
    for node in graph.nodes:
        ins = [a for a in node.all_input_nodes]
        # any use of a grouped node from outside its group closes that group
        mine = group_of.get(node)
        d: set[int] = set()
        for a in ins:
            d |= deps.get(a, frozenset())
        kind = anchor_kind(node) if node.op == "call_function" else None
        if kind is not None or is_group_pointwise(node):
            target: Group | None = None
            if kind is None:
                key = shape_key(node)
                for a in ins:
                    g = group_of.get(a)
                    if g is None or g.closed or g.shape != key:
                        continue
                    others = [b for b in ins if group_of.get(b) is not g]
                    if any(g.gid in deps.get(b, frozenset()) for b in others):
                        continue
                    target = g
                    break
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
        deps[node] = frozenset(d)
    return group_of


def materialized(group: Group, users_outside: dict[fx.Node, bool]) -> list[fx.Node]:
    """Members whose values leave the kernel: used outside the group or returned."""
    return [n for n in group.members if users_outside.get(n)]


def outside_users(graph: fx.Graph, group_of: dict[fx.Node, Group]) -> dict[fx.Node, bool]:
    out: dict[fx.Node, bool] = {}
    for node, g in group_of.items():
        out[node] = any(group_of.get(u) is not g for u in node.users)
    return out
