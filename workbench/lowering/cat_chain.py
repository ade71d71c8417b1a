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

An input whose every user is a cat of its chain, made by a convolution, matmul, pointwise or pooling kernel, is
not copied: that kernel stores it into its slice of the buffer (`direct_writes`; the slice is a strided view,
`buf.narrow(dim, offset, size)`: the buffer's channel and batch strides, its data pointer at the offset). A dense
block then launches one copy, of its input (which its first layer reads too); a single cat whose inputs all come
from such kernels (an Inception module's four branches, an RNN's stacked outputs) launches none. The kernel that
runs first allocates the buffer, sized from its own output shape and the inputs' sizes along dim (ints, or read
from tensors that already exist; otherwise the input is copied). An input used by anything but its chain's cats
(a graph output, another kernel) keeps its copy, as does a graph input or a view.

Fused families say here which cat dims their kernels can store along (`_writable`); a primitive registers it
where it is defined (`register_store`: pool.py, adaptive_pool.py) and its `make` then takes `into=`.
"""
from __future__ import annotations

import operator
from dataclasses import dataclass, field
from typing import Callable

import torch
import torch.fx as fx

from workbench.lowering import families
from workbench.lowering.epilogue import torch_dtype
from workbench.lowering.glue import GLUE
from workbench.lowering.graph import dtype, packet, val

# primitive op (packet) -> whether its kernel can store its (first) output into a slice along a cat dim:
# can(node, dim); such a primitive's make takes `into=` (an Into or None)
STORES: dict[str, Callable[[fx.Node, int], bool]] = {}
# users that are no read: the forward drops them (codegen.emit_node)
_NO_READ = ("_assert_scalar", "_assert_tensor_metadata", "sym_constrain_range_for_size", "_assert_async")


def register_store(op: str, can: Callable[[fx.Node, int], bool]) -> None:
    """The primitive `op` can store its first output into its slice of a cat's buffer along a dim where
    `can(node, dim)`; its make(name, node, names, expr, into=None) then writes through the slice's strides."""
    STORES[op] = can


@dataclass
class Chain:
    members: list[fx.Node]                     # the cats, in graph order; the last one's output is the buffer
    dim: int
    new: dict[fx.Node, list[fx.Node]] = field(default_factory=dict)   # cat -> the inputs it copies
    extra: int = 0                             # channels of the inputs after the first cat (ints)
    flat: list[fx.Node] = field(default_factory=list)   # the last cat's inputs, chained cats read through
    direct: dict[fx.Node, Into] = field(default_factory=dict)  # inputs their producer stores in place
    alloc: fx.Node | None = None               # the direct input whose kernel allocates the buffer; None: cat 1


@dataclass(eq=False)
class Into:
    """A cat input that its producer's kernel stores into its slice of the chain's buffer."""

    chain: Chain
    node: fx.Node
    alloc: bool                                # its kernel runs first and allocates the buffer
    # the sizes along dim it needs of other inputs: ints, or (a tensor made before it, its dim of that size)
    sizes: dict[fx.Node, int | tuple[fx.Node, int]] = field(default_factory=dict)


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
            c = Chain([node], d, {node: own}, flat=own)
            seq[node] = own
        else:
            c = chain_of[joined]
            tails.remove(joined)
            added = flat[len(seq[joined]):]
            c.members.append(node)
            c.new[node] = added
            c.extra += sum(val(t).shape[d] for t in added)
            c.flat = flat
            seq[node] = flat
        chain_of[node] = c
        tails.append(node)
    return {n: c for n, c in chain_of.items() if len(c.members) > 1}


def _emit_pos(graph: fx.Graph, group_of: dict) -> dict[fx.Node, int]:
    """node -> its place in the forward: a group's members are computed where its last member is."""
    pos = {n: i for i, n in enumerate(graph.nodes)}
    return {n: pos[group_of[n].last] if n in group_of else i for n, i in pos.items()}


def producer(t: fx.Node) -> fx.Node:
    """The node whose kernel makes t: t, or the tuple-valued primitive (a max pool) t is item 0 of."""
    if t.op == "call_function" and t.target is operator.getitem and isinstance(t.args[0], fx.Node):
        return t.args[0]
    return t


def _reads(t: fx.Node) -> set[fx.Node]:
    return {u for u in t.users if not (u.op == "call_function" and packet(u) in _NO_READ)}


def _primitive_store(t: fx.Node, c: Chain, group_of: dict) -> bool:
    """t is a primitive's output that its kernel can store along the chain's dim: the op registered
    (`register_store`) and, for a tuple-valued one (a max pool's values and indices), t its item 0."""
    p = producer(t)
    if p in group_of or p.op != "call_function" or packet(p) not in STORES or not STORES[packet(p)](p, c.dim):
        return False
    if p is t:
        return not isinstance(val(t), (tuple, list))
    # its one item-0 node: the kernel stores one slice
    return t.args[1] == 0 and all(u is t or u.args[1] != 0 for u in p.users)


def _writable(t: fx.Node, c: Chain, group_of: dict) -> bool:
    """Whether t's kernel can store it into its slice: a convolution (the batch and channel strides of its output
    are arguments, its spatial dims stay contiguous: a cat along dim 0 or 1), a matmul (batch and row strides:
    any dim), a pointwise kernel (every stride) or a registered primitive (`register_store`: the pools), t read
    by its chain's cats only, once in the buffer, in the buffer's dtype."""
    if t.op != "call_function":
        return False
    g = group_of.get(t)
    if g is None:
        if not _primitive_store(t, c, group_of):
            return False
    elif g.pattern is not None:
        return False
    else:
        fam = families.of_group(g).name
        if not (fam in ("pointwise", "matmul") or (fam == "conv" and c.dim <= 1)):
            return False
    v, out = val(t), val(c.members[-1])
    return (not _reads(t) - set(c.members) and c.flat.count(t) == 1 and dtype(t) == out.dtype
            and v.dim() == out.dim())


def _size_source(u: fx.Node, d: int, at: int, emit: dict[fx.Node, int],
                 inputs: list[fx.Node]) -> int | tuple[fx.Node, int] | None:
    """u's size along d as a kernel launched at `at` can read it: an int, u's own dim when u is made before, or
    a graph input's dim of the same symbolic size (the batch); None when none is known there."""
    s = val(u).shape[d]
    if isinstance(s, int):
        return s
    if emit[u] < at:
        return (u, d)
    for x in inputs:
        for k, xs in enumerate(val(x).shape):
            if str(xs) == str(s):
                return (x, k)
    return None


def direct_writes(graph: fx.Graph, chains: dict[fx.Node, Chain], group_of: dict) -> dict[fx.Node, Chain]:
    """Mark the cat inputs whose kernels store them in place (Chain.direct; their groups' `into`), and return
    `chains` with the single cats that gain such an input as chains of one."""
    emit = _emit_pos(graph, group_of)
    inputs = [n for n in graph.nodes if n.op == "placeholder" and isinstance(val(n), torch.Tensor)]
    out = dict(chains)
    for node in graph.nodes:
        if (node.op == "call_function" and packet(node) == "cat" and node not in group_of and node not in out
                and val(node) is not None and val(node).dim() > 0 and cat_inputs(node)):
            own = cat_inputs(node)
            out[node] = Chain([node], _dim(node), {node: own}, flat=own)
    for c in {id(c): c for c in out.values()}.values():
        first = emit[c.members[0]]
        for t in sorted((t for t in c.flat if _writable(t, c, group_of)), key=lambda t: emit[producer(t)]):
            at = emit[producer(t)]
            # the sizes along dim the kernel needs (t's own comes from its output shape)
            allocates = c.alloc is None and at < first
            need = [u for u in (c.flat if allocates else c.flat[:c.flat.index(t)]) if u is not t]
            sizes = {u: _size_source(u, c.dim, at, emit, inputs) for u in need}
            if all(v is not None for v in sizes.values()):
                c.direct[t] = Into(c, t, allocates, sizes)
                if allocates:
                    c.alloc = t
                if t in group_of:
                    group_of[t].into[t] = c.direct[t]
    return {n: c for n, c in out.items() if len(c.members) > 1 or c.direct}


def primitive_into(chains: dict[fx.Node, Chain], group_of: dict) -> dict[fx.Node, Into]:
    """primitive node -> the slice its kernel stores its (first) output into (`register_store`)."""
    return {producer(t): into for c in {id(c): c for c in chains.values()}.values()
            for t, into in c.direct.items() if t not in group_of}


def _size(into: Into, u: fx.Node, names: dict[fx.Node, str], shape: str) -> str:
    if u is into.node:
        return f"{shape}[{into.chain.dim}]"
    s = into.sizes[u]
    return str(s) if isinstance(s, int) else f"{names[s[0]]}.shape[{s[1]}]"


def _sum(terms: list[str]) -> str:
    ints = sum(int(t) for t in terms if t.isdigit())
    return " + ".join([t for t in terms if not t.isdigit()] + ([str(ints)] if ints or not terms else [])) or "0"


def slice_lines(into: Into, var: str, names: dict[fx.Node, str], shape: str) -> tuple[list[str], str]:
    """(the buffer's allocation when this kernel runs first, or nothing; the line making `var` its slice of the
    chain's buffer) for a kernel whose output shape is `shape` (a variable of the launch)."""
    c, d, n = into.chain, into.chain.dim, into.node
    buf = names[c.members[-1]]
    alloc = []
    if into.alloc:
        total = _sum([_size(into, u, names, shape) for u in c.flat])
        alloc.append(f"{buf} = torch.empty([*{shape}[:{d}], {total}, *{shape}[{d + 1}:]], "
                     f"dtype={torch_dtype(dtype(n))}, device=dev)")
    off = _sum([_size(into, u, names, shape) for u in c.flat[:c.flat.index(n)]])
    return alloc, f"{var} = {buf}.narrow({d}, {off}, {shape}[{d}])  # its slice of the cat's buffer"


def out_lines(outputs: list[fx.Node], names: dict[fx.Node, str], shape: str, into_of: dict) -> list[str]:
    """A kernel's output tensors (`shape`: its output shape, a variable of the launch): each a fresh buffer, or
    its slice of a cat chain's buffer (`into_of`: the group's `into`), allocated first when this kernel runs
    before the chain's other writers."""
    lines, views = [], []
    for n in outputs:
        into = into_of.get(n)
        if into is None:
            views.append(f"{names[n]} = torch.empty({shape}, dtype={torch_dtype(dtype(n))}, device=dev)")
            continue
        alloc, view = slice_lines(into, names[n], names, shape)
        lines += alloc
        views.append(view)
    return lines + views


def chain_cat_launch(name: str, node: fx.Node, chain: Chain, names: dict[fx.Node, str],
                     copy: Callable[[str, str, str], list[str]]) -> list[str]:
    """The launch lines of a cat of a chain: the first allocates the buffer (the last cat's output) unless a
    producer did, each copies the inputs its predecessor lacked that no producer stored in place (`copy(kernel,
    dst, src)`: copies.py's strided copy, passed in: copies.py names this module's Chain), after the filled
    prefix, and is that prefix (the last: all of it)."""
    d = chain.dim
    buf, fill = names[chain.members[-1]], f"_fill_{names[chain.members[-1]]}"
    new = chain.new[node]
    launch = []
    if node is chain.members[0]:
        if chain.alloc is None:
            x0 = names[new[0]]
            size = " + ".join([f"{names[x]}.shape[{d}]" for x in new] + [str(chain.extra)])
            launch.append(f"{buf} = torch.empty([*{x0}.shape[:{d}], {size}, *{x0}.shape[{d + 1}:]], "
                          f"dtype={torch_dtype(dtype(node))}, device=dev)")
        launch.append(f"{fill} = 0")
    for x in new:
        if x not in chain.direct:
            launch += [f"_dv = {buf}.narrow({d}, {fill}, {names[x]}.shape[{d}])",
                       *copy(name, "_dv", names[x])]
        launch.append(f"{fill} = {fill} + {names[x]}.shape[{d}]")
    if node is not chain.members[-1]:
        launch.append(f"{names[node]} = {buf}.narrow({d}, 0, {fill})")
        return launch
    while launch and launch[-1].startswith(f"{fill} = "):  # the last cat: no later cat reads the fill
        launch.pop()
    return launch
