"""Chains of concatenations that grow one buffer: a dense block's `x = torch.cat([x, new], 1)` (or
`torch.cat(features, 1)` over a growing list) lowered as one allocation, each input copied once.

A cat extends the chain whose last cat's inputs (a cat input of the chain read as its own inputs) are a
prefix of its own, along the same dim, in the same dtype and rank. The chain's buffer is the last cat's
output, allocated at the first cat: every cat of the chain is then the prefix of it (`narrow(dim, 0, k)`: a
strided view, which every kernel reads through its strides as it reads a slice), and each cat copies only
the inputs its prefix predecessor lacked. Each slice is written once and never again, so a view read later
still holds its cat's values. A dense block of L layers copied sum_k (C0 + k*g) channels; it now copies
C0 + L*g, in L + 1 launches instead of L*(L+3)/2.

Only where it is safe: the sizes along dim of the inputs after the first cat are plain ints (the buffer is
sized before they exist), and no cat but the last is a graph output, directly or through glue views (an
output must not alias another tensor). A cat fused into a group is left alone.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import torch.fx as fx

from workbench.lowering.glue import GLUE
from workbench.lowering.graph import dtype, packet, val


@dataclass
class Chain:
    members: list[fx.Node]                     # the cats, in graph order; the last one's output is the buffer
    dim: int
    new: dict[fx.Node, list[fx.Node]] = field(default_factory=dict)   # cat -> the inputs it copies
    extra: int = 0                             # channels of the inputs after the first cat (ints)


def _dim(node: fx.Node) -> int:
    d = node.args[1] if len(node.args) > 1 else node.kwargs.get("dim", 0)
    return d % val(node).dim()


def cat_inputs(node: fx.Node) -> list[fx.Node]:
    """The inputs cat copies: torch's legacy rule skips 1-d inputs (shape (0,)) whatever the output's rank."""
    r = val(node).dim()
    return [t for t in node.args[0] if val(t).dim() == r]


def _reaches_output(node: fx.Node) -> bool:
    """The node is a graph output, or a glue view of it (transitively) is."""
    todo, seen = [node], set()
    while todo:
        n = todo.pop()
        if n in seen:
            continue
        seen.add(n)
        for u in n.users:
            if u.op == "output":
                return True
            if u.op == "call_function" and packet(u) in GLUE:
                todo.append(u)
    return False


def plan(graph: fx.Graph, fused: set[fx.Node] | dict) -> dict[fx.Node, Chain]:
    """cat node -> its chain, for chains of two cats or more."""
    seq: dict[fx.Node, list[fx.Node]] = {}      # a chained cat's inputs, cat inputs of its chain read through
    chain_of: dict[fx.Node, Chain] = {}
    tails: list[fx.Node] = []                    # cats that end their chain so far
    for node in graph.nodes:
        if node.op != "call_function" or packet(node) != "cat" or node in fused:
            continue
        v = val(node)
        if v is None or v.dim() == 0:
            continue
        d, own = _dim(node), cat_inputs(node)
        if not own:
            continue
        flat: list[fx.Node] = []
        for t in own:
            flat += seq.get(t, [t]) if t in chain_of and _dim(t) == d and dtype(t) == v.dtype else [t]
        joined = None
        for tail in tails:
            ts = seq[tail]
            if (_dim(tail) == d and dtype(tail) == v.dtype and val(tail).dim() == v.dim()
                    and len(ts) < len(flat) and flat[:len(ts)] == ts and not _reaches_output(tail)
                    and all(isinstance(val(t).shape[d], int) for t in flat[len(ts):])):
                joined = tail
                break
        if joined is None:
            c = Chain([node], d, {node: own})
            seq[node] = own
        else:
            c = chain_of[joined]
            tails.remove(joined)
            added = flat[len(seq[joined]):]
            c.members.append(node)
            c.new[node] = added
            c.extra += sum(val(t).shape[d] for t in added)
            seq[node] = flat
        chain_of[node] = c
        tails.append(node)
    return {n: c for n, c in chain_of.items() if len(c.members) > 1}
