"""A norm's statistics as one reduction kernel: the graph side (`fold_stats`, run before partitioning).

Core ATen spells every norm (layer, group, instance, batch) through `var_mean`: `prims.var(x, dims)` and
`prims.sum(x, dims)`, each followed by a `broadcast_in_dim` that puts the reduced dims back as 1s, then
`div(sum, n)`, `add(var, eps)`, `rsqrt` on the tiny statistics and the apply on x's shape. Partitioned op by
op that was seven launches for 40_LayerNorm (two reductions in two phases each, the var reading x twice, two
one-op kernels for the statistics, the apply): 799 us against torch.compile's 428 on the H200. Here:

- a reduction whose only users are such broadcasts becomes a keepdim reduction (`meta["wb_keepdim"]`), so
  `div`, `add` and `rsqrt` have its shape and fuse into its kernel's epilogue (phase 2 of a split);
- a var and a sum (or mean) of the same input over the same dims become one kernel (`meta["wb_siblings"]` on
  the var; the sum moved right after it): one Welford pass over x gives both (templates.reduction_kernel).

A GroupNorm's per-channel scale and shift (`rsqrt * weight`, [B, G, C/G, 1] from the [B, G, 1, 1] statistics)
are computed in the statistics kernel's epilogue too (partition.wide_dims): its apply reads them through views.
LayerNorm and GroupNorm are then 2 launches (the statistics, split: partials, combined with the epilogue by the
last program of each row block, templates._TICKET; the apply), x read twice and written once.
"""
from __future__ import annotations

import torch
import torch.fx as fx

from workbench.lowering.graph import packet, rank, val

_STAT_KINDS = ("var", "sum", "mean")


def _dims(node: fx.Node) -> tuple[list[int], bool] | None:
    from workbench.lowering.graph import reduction_dims

    if node.op != "call_function" or packet(node) not in _STAT_KINDS or not isinstance(node.args[0], fx.Node):
        return None
    if not isinstance(val(node), torch.Tensor) or node.kwargs.get("dtype") is not None:
        return None
    return reduction_dims(node)


def _is_keepdim_broadcast(red: fx.Node, user: fx.Node, dims: list[int]) -> bool:
    """user == broadcast_in_dim(red, x's shape with `dims` as 1, kept dims): the keepdim form of red."""
    if packet(user) != "broadcast_in_dim" or user.args[0] is not red or len(user.args) < 3:
        return False
    x = red.args[0]
    xs, bs = val(x).shape, val(user).shape
    kept = [d for d in range(len(xs)) if d not in dims]
    if len(bs) != len(xs) or list(user.args[2]) != kept:
        return False
    return all((str(bs[d]) == "1") if d in dims else str(bs[d]) == str(xs[d]) for d in range(len(xs)))


def _fold_keepdim(red: fx.Node) -> None:
    d = _dims(red)
    if d is None or d[1] or not red.users or rank(red.args[0]) == 0:
        return
    dims = d[0]
    users = list(red.users)
    if not all(_is_keepdim_broadcast(red, u, dims) for u in users):
        return
    red.meta["wb_keepdim"] = True
    red.meta["val"] = val(users[0])
    for u in users:
        u.replace_all_uses_with(red)
        red.graph.erase_node(u)


def _hoist_epilogue(graph: fx.Graph, stats: set[fx.Node]) -> None:
    """Move each pointwise node of a statistic's shape that reads only statistics (and what such nodes compute)
    up to right after its last input, so it joins their kernel's epilogue. GroupNorm's `neg(mean)` came after
    `rsqrt * weight`, a larger shape whose use closed the statistics' group: one more launch."""
    from workbench.lowering.graph import is_tensor_node, shape_key
    from workbench.lowering.partition import is_group_pointwise

    derived = set(stats)
    keys = {shape_key(s) for s in stats}
    for node in list(graph.nodes):
        if node in derived or not is_group_pointwise(node) or shape_key(node) not in keys:
            continue
        ins = [a for a in node.all_input_nodes if is_tensor_node(a)]
        if not ins or not all(a in derived and shape_key(a) == shape_key(node) for a in ins):
            continue
        derived.add(node)
        if any(not is_tensor_node(a) for a in node.all_input_nodes):
            continue  # a symbolic operand may be computed later in the graph: left where it is
        order = {n: i for i, n in enumerate(graph.nodes)}
        after = max(ins, key=order.__getitem__)
        pair = [v for v in stats if v.meta.get("wb_siblings") and (after is v or after in v.meta["wb_siblings"])]
        if pair:  # never between a var and its sibling
            after = max([pair[0], *pair[0].meta["wb_siblings"]], key=order.__getitem__)
        after.append(node)


def _unsqueezed(graph: fx.Graph, p: fx.Node, d: int, before: fx.Node, made: dict) -> fx.Node:
    """`unsqueeze(p, d)` with the unsqueeze moved up through p when p is a pointwise node used once whose tensor
    operands have its shape or none (a 0-d scalar): p computed at the unsqueezed shape from unsqueezed operands."""
    from workbench.lowering.graph import is_sym_node, is_tensor_node
    from workbench.lowering.partition import is_group_pointwise

    if p in made:  # one unsqueeze of an operand read twice (the targets in `where(t != -100, t, 0)`)
        return made[p]
    shape = val(p).shape
    ops = [a for a in p.all_input_nodes]
    if is_group_pointwise(p) and len(p.users) == 1 and not any(is_sym_node(a) for a in ops) and all(
            is_tensor_node(a) and (rank(a) == 0 or list(val(a).shape) == list(shape)) for a in ops) \
            and all(not isinstance(a, (list, tuple)) for a in p.args):
        args = tuple(_unsqueezed(graph, a, d, before, made) if isinstance(a, fx.Node) and rank(a) else a
                     for a in p.args)
        with graph.inserting_before(before):
            n = graph.call_function(p.target, args, dict(p.kwargs))
    else:
        with graph.inserting_before(before):
            n = graph.call_function(torch.ops.aten.unsqueeze.default, (p, d))
    n.meta["val"] = val(p).unsqueeze(d)
    made[p] = n
    return n


def sink_index_views(graph: fx.Graph) -> None:
    """A gather's index `unsqueeze(where(t != -100, t, 0), 1)` (cross entropy's targets) becomes `where(unsqueeze(t)
    != -100, unsqueeze(t), 0)`: the chain at the gather's shape, so that it joins the row reduction the gather
    joins (partition._gather_group) instead of a kernel of its own over [B]."""
    from workbench.lowering.graph import is_tensor_node

    for g in list(graph.nodes):
        if g.op != "call_function" or packet(g) != "gather" or len(g.args) != 3:
            continue
        v = g.args[2]
        if not isinstance(v, fx.Node) or packet(v) != "unsqueeze" or len(v.users) != 1 or \
                not isinstance(v.args[0], fx.Node) or not is_tensor_node(v.args[0]) or len(v.args[0].users) != 1:
            continue
        p, d = v.args[0], v.args[1] % (rank(v.args[0]) + 1)
        new = _unsqueezed(graph, p, d, v, {})
        if packet(new) == "unsqueeze" and new.args[0] is p:
            graph.erase_node(new)
            continue
        v.replace_all_uses_with(new)
        graph.erase_node(v)
        dead = [p]
        while dead:
            n = dead.pop()
            if n.op == "call_function" and not n.users:
                ins = list(n.all_input_nodes)
                graph.erase_node(n)
                dead += ins


def fold_stats(graph: fx.Graph) -> None:
    """Fold keepdim broadcasts into reductions and pair each var with a sum/mean of its input and dims; a gather's
    index chain at the gather's shape (`sink_index_views`)."""
    sink_index_views(graph)
    for node in list(graph.nodes):
        _fold_keepdim(node)
    for var in list(graph.nodes):
        if var.op != "call_function" or packet(var) != "var" or _dims(var) is None:
            continue
        x = var.args[0]
        if val(x).dtype not in (torch.float32, torch.float64) or val(var).dtype != val(x).dtype:
            continue
        key = (_dims(var), tuple(val(var).shape))
        for s in list(x.users):
            if s is var or packet(s) not in ("sum", "mean") or s.meta.get("wb_paired") or _dims(s) is None:
                continue
            if (_dims(s), tuple(val(s).shape)) != key or val(s).dtype != val(var).dtype:
                continue
            order = {n: i for i, n in enumerate(graph.nodes)}
            # the later one moves up next to the earlier (both read x only, which precedes both): nothing can
            # use one of them before the other joins the group
            if order[s] > order[var]:
                var.append(s)
            else:
                s.append(var)
            var.meta["wb_siblings"] = [s]
            s.meta["wb_paired"] = True
            break
    pair_row_reductions(graph)
    stats = {n for n in graph.nodes if n.meta.get("wb_siblings")}
    stats |= {s for n in stats for s in n.meta["wb_siblings"]}
    if stats:
        _hoist_epilogue(graph, stats)


_CO_KINDS = ("sum", "mean")


def _co_key(red: fx.Node):  # noqa: ANN202
    """What two reductions must share to be one kernel's accumulators: the input's shape and dtype, the dims."""
    from workbench.lowering.graph import shape_key

    if red.op != "call_function" or packet(red) not in _CO_KINDS or red.meta.get("wb_siblings") \
            or red.meta.get("wb_paired") or red.meta.get("wb_lse") or _dims(red) is None:
        return None
    x = red.args[0]
    xdt, rdt = val(x).dtype, val(red).dtype
    # a float sum in its own dtype, or a count (an int64 sum of bools or integers): one accumulator each, of its
    # own dtype (templates: partials of different dtypes share an int64 workspace, fp32 as its bits)
    count = packet(red) == "sum" and not xdt.is_floating_point and not xdt.is_complex and rdt == torch.int64
    if not ((xdt.is_floating_point and rdt == xdt) or count):
        return None
    return shape_key(x), tuple(_dims(red)[0]), _dims(red)[1]


def _ancestors(node: fx.Node, stop: int, order: dict[fx.Node, int]) -> set[fx.Node]:
    """The nodes `node` depends on, down to graph position `stop`."""
    seen: set[fx.Node] = set()
    stack = list(node.all_input_nodes)
    while stack:
        n = stack.pop()
        if n in seen or order[n] < stop:
            continue
        seen.add(n)
        stack.extend(n.all_input_nodes)
    return seen


def pair_row_reductions(graph: fx.Graph) -> None:
    """Two sums (or means) over the same dims of inputs of one shape, each computed by a pointwise prologue
    (partition.prologue_cone) from tensors read in place, become one kernel: the later one and its prologue
    move up right after the earlier (`meta["wb_siblings"]`, `meta["wb_co"]`), and the reduction kernel keeps
    one accumulator each, loading a tensor both prologues read once. The two may differ in dtype: a cross
    entropy's int64 count of the targets not ignored beside its float sum of their losses (`_co_key`).
    99_TripletMarginLoss's ||a - p|| and ||a - n|| over the rows read the anchor twice in two kernels; a cosine
    similarity's three row sums read each input twice or more."""
    from workbench.lowering.partition import prologue_cone

    nodes = list(graph.nodes)
    for r1 in nodes:
        k1 = _co_key(r1)
        if k1 is None:
            continue
        order = {n: i for i, n in enumerate(graph.nodes)}
        for r2 in nodes:
            if r2 is r1 or order[r2] < order[r1] or _co_key(r2) != k1:
                continue
            both = frozenset({r1, r2})
            c1, c2 = prologue_cone(r1, both), prologue_cone(r2, both)
            if not c1 or not c2 or set(c1) & set(c2):
                continue
            moved = set(c2) | {r2}
            # r2 must not depend on r1, and what its prologue reads from outside must precede r1
            if r1 in _ancestors(r2, order[r1], order) or any(
                    a not in moved and order[a] >= order[r1] for n in moved for a in n.all_input_nodes):
                continue
            at = r1
            for n in [*c2, r2]:
                at.append(n)
                at = n
            r1.meta["wb_siblings"] = [r2]
            r1.meta["wb_co"] = True
            r2.meta["wb_paired"] = True
            break
