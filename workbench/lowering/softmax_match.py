"""Finding the row softmax and log-softmax chains that `softmax.py` computes as one kernel (the graph side
only: the partitioner imports this, the kernel template imports the partitioner).

Row softmax and log-softmax as one kernel: an online max-and-sum pass over the row, then a normalize pass.

Core ATen spells `softmax(x, d)` as amax, sub, exp, sum, div and `log_softmax` as amax, sub, exp, sum, log, sub.
Partitioned op by op that is four kernels reading the row four times (23_Softmax on the H200: 9006 us vs
eager's 6239). Here the whole chain is one group: pass 1 keeps a running max and a sum rescaled to it per lane
(Milakov and Gimelshein, "Online normalizer calculation for softmax", 2018), pass 2 reads the row again and
writes exp(x - max) / sum (or x - max - log(sum)) through the fused epilogue. Two reads, one write, as eager.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import torch
import torch.fx as fx

from workbench.lowering.graph import dtype, packet, rank, shape_key, val

_UPCASTS = ("_to_copy", "convert_element_type")


@dataclass(eq=False)
class SoftmaxMatch:
    source: fx.Node            # the tensor read (before an fp16/bf16 -> fp32 upcast, which the load does)
    dim: int
    log: bool
    out: fx.Node               # div (softmax) or the last sub (log-softmax)
    internal: list[fx.Node] = field(default_factory=list)   # every node of the chain but `out`, graph order


def _users(node: fx.Node) -> set[fx.Node]:
    return set(node.users)


def _one_dim(node: fx.Node, name: str) -> int | None:
    """d when node is `name(x, [d], keepdim=True)` (the form the softmax decomposition writes)."""
    if packet(node) != name or len(node.args) < 3 or node.args[2] is not True or node.kwargs.get("dtype"):
        return None
    dims = node.args[1]
    if not isinstance(dims, (list, tuple)) or len(dims) != 1:
        return None
    return dims[0] % max(rank(node.args[0]), 1)


def _source(x: fx.Node, inside: set[fx.Node]) -> tuple[fx.Node, list[fx.Node]]:
    """(the tensor to load, the upcast absorbed): an exact fp16/bf16 -> fp32 cast used only by the chain."""
    if packet(x) in _UPCASTS and len(x.args) == 1 and dtype(x) == torch.float32 and \
            isinstance(x.args[0], fx.Node) and isinstance(val(x.args[0]), torch.Tensor) and \
            dtype(x.args[0]) in (torch.float16, torch.bfloat16) and _users(x) <= inside and \
            set(x.kwargs) <= {"dtype"}:
        return x.args[0], [x]
    return x, []


def match(amax: fx.Node) -> SoftmaxMatch | None:
    """The softmax / log-softmax chain that starts at `amax`, when no intermediate is used outside it."""
    d = _one_dim(amax, "amax")
    if d is None or not isinstance(val(amax), torch.Tensor) or dtype(amax) not in (torch.float32,):
        return None
    x = amax.args[0]
    if rank(x) == 0:
        return None
    subs = [u for u in amax.users if packet(u) == "sub" and u.args[:2] == (x, amax) and not u.kwargs]
    if len(amax.users) != 1 or len(subs) != 1:
        return None
    sub = subs[0]
    exps = [u for u in sub.users if packet(u) == "exp"]
    if len(exps) != 1:
        return None
    exp = exps[0]
    sums = [u for u in exp.users if _one_dim(u, "sum") == d]
    if len(sums) != 1 or dtype(sums[0]) != torch.float32:
        return None
    ssum = sums[0]
    if len(ssum.users) != 1:
        return None
    (nxt,) = ssum.users
    if packet(nxt) == "div" and nxt.args[:2] == (exp, ssum) and not nxt.kwargs and _users(exp) == {ssum, nxt} \
            and _users(sub) == {exp}:
        internal, out, log = [amax, sub, exp, ssum], nxt, False
    elif packet(nxt) == "log" and len(nxt.users) == 1 and _users(exp) == {ssum}:
        (last,) = nxt.users
        if packet(last) != "sub" or last.args[:2] != (sub, nxt) or last.kwargs or _users(sub) != {exp, last}:
            return None
        internal, out, log = [amax, sub, exp, ssum, nxt], last, True
    else:
        return None
    src, cast = _source(x, {amax, sub})
    if shape_key(out) != shape_key(x):
        return None
    return SoftmaxMatch(src, d, log, out, cast + internal)


def find_all(graph: fx.Graph) -> list[SoftmaxMatch]:
    out = []
    for node in graph.nodes:
        if node.op == "call_function" and packet(node) == "amax":
            m = match(node)
            if m is not None:
                out.append(m)
    return out


def fold_gathered_log_softmax(graph: fx.Graph) -> None:
    """`gather(log_softmax(x, d), d, idx)` (cross-entropy's picked log-probabilities) as `gather(x, d, idx) - amax
    - log(sum)`: the same two subtractions on the same values (bit for bit), but the [B, C] log-softmax is never
    written. 95_CrossEntropyLoss wrote 32768 x 4096 of them (512 MB) to read back 32768; now its row sum reads x
    through its prologue (x - amax, exp) and nothing row-sized is stored."""
    aten = torch.ops.aten
    for m in find_all(graph):
        if not m.log or len(m.out.users) != 1:
            continue
        (gat,) = m.out.users
        if packet(gat) != "gather" or gat.args[0] is not m.out or gat.kwargs.get("sparse_grad") or len(gat.args) != 3:
            continue
        amax, sub, _, _, log = m.internal[-5:]
        x, idx = amax.args[0], gat.args[2]
        r = rank(x)
        if not isinstance(gat.args[1], int) or gat.args[1] % max(r, 1) != m.dim or not isinstance(idx, fx.Node):
            continue
        xs, ids = val(x).shape, val(idx).shape
        if len(ids) != r or any(str(ids[e]) != str(xs[e]) for e in range(r) if e != m.dim):
            continue  # amax and log broadcast to idx's shape only when its other dims are x's
        with graph.inserting_before(gat):
            g = graph.call_function(aten.gather.default, (x, gat.args[1], idx))
            t = graph.call_function(aten.sub.Tensor, (g, amax))
            out = graph.call_function(aten.sub.Tensor, (t, log))
        for n in (g, t, out):
            n.meta["val"] = gat.meta["val"]
        gat.replace_all_uses_with(out)
        graph.erase_node(gat)
        graph.erase_node(m.out)


def pair_logsumexp(graph: fx.Graph) -> None:
    """`sum(exp(x - amax(x, d)), d)` (keepdim both, fp32, the sub and the exp used only there) as one reduction
    whose sibling is the amax (templates: one online pass gives both, `meta["wb_lse"]`): cross-entropy's and
    log-softmax's statistics when their [B, C] result is not written (fold_gathered_log_softmax), which read x
    twice in two kernels. The sub, exp and sum move up next to the amax (they read only x and it)."""
    for amax in list(graph.nodes):
        d = _one_dim(amax, "amax") if amax.op == "call_function" else None
        if d is None or not isinstance(val(amax), torch.Tensor) or dtype(amax) != torch.float32:
            continue
        x = amax.args[0]
        subs = [u for u in amax.users if packet(u) == "sub" and u.args[:2] == (x, amax) and not u.kwargs
                and len(u.users) == 1]
        if len(subs) != 1 or packet(next(iter(subs[0].users))) != "exp":
            continue
        exp = next(iter(subs[0].users))
        if len(exp.users) != 1:
            continue
        (ssum,) = exp.users
        if _one_dim(ssum, "sum") != d or dtype(ssum) != torch.float32 or ssum.meta.get("wb_siblings"):
            continue
        amax.append(subs[0])
        subs[0].append(exp)
        exp.append(ssum)
        ssum.meta["wb_lse"] = True
        ssum.meta["wb_siblings"] = [amax]
