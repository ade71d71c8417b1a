"""Small helpers over the exported FX graph: op names, meta shapes and dtypes, normalization."""
from __future__ import annotations

import operator
from typing import Any

import torch
import torch.fx as fx

aten = torch.ops.aten


def op_name(node: fx.Node) -> str:
    """`aten.mm.default` for an ATen call, else the target's name."""
    t = node.target
    if isinstance(t, torch._ops.OpOverload):
        return f"{t.namespace}.{t.overloadpacket.__name__}.{t._overloadname}"
    return getattr(t, "__name__", str(t))


def packet(node: fx.Node) -> str:
    t = node.target
    if isinstance(t, torch._ops.OpOverload):
        return t.overloadpacket.__name__
    return ""


def val(node: Any) -> Any:
    return node.meta.get("val") if isinstance(node, fx.Node) else None


def is_tensor_node(node: Any) -> bool:
    return isinstance(val(node), torch.Tensor)


def rank(node: fx.Node) -> int:
    return val(node).dim()


def dtype(node: fx.Node) -> torch.dtype:
    return val(node).dtype


def shape_key(node: fx.Node) -> str:
    """A hashable, guard-free description of a node's shape (symbolic sizes as text)."""
    return "x".join(str(s) for s in val(node).shape)


def is_sym_node(node: Any) -> bool:
    return isinstance(node, fx.Node) and isinstance(val(node), (torch.SymInt, torch.SymFloat, torch.SymBool, int,
                                                                 float, bool))


SYM_BINOPS = {operator.mul: "*", operator.add: "+", operator.sub: "-", operator.floordiv: "//",
              operator.mod: "%", operator.truediv: "/", operator.pow: "**", operator.eq: "==",
              operator.ne: "!=", operator.lt: "<", operator.le: "<=", operator.gt: ">", operator.ge: ">=",
              operator.and_: "and", operator.or_: "or"}


def _call(graph: fx.Graph, target: Any, *args: Any) -> fx.Node:
    """A new node with its fake value (the caller sets the insertion point and the fake mode)."""
    node = graph.call_function(target, args)
    node.meta["val"] = target(*fx.node.map_arg(args, val))
    return node


def _matmul_of(graph: fx.Graph, node: fx.Node) -> fx.Node:
    """The plain product inside addmm / baddbmm / addmv / addbmm, as mm or bmm plus glue views."""
    a, b = node.args[1:3]
    if node.target is aten.addmm.default:
        return _call(graph, aten.mm.default, a, b)
    if node.target is aten.baddbmm.default:
        return _call(graph, aten.bmm.default, a, b)
    if node.target is aten.addmv.default:  # mat @ vec as [n, m] @ [m, 1], then the column dropped
        col = _call(graph, aten.unsqueeze.default, b, 1)
        return _call(graph, aten.squeeze.dim, _call(graph, aten.mm.default, a, col), 1)
    # addbmm: sum_i b1[i] @ b2[i] is one mm of b1 as [n, B*m] (batch moved inside) by b2 as [B*m, p]
    sizes = [_call(graph, aten.sym_size.int, t, d) for t, d in ((a, 0), (a, 1), (a, 2), (b, 2))]
    bm = graph.call_function(operator.mul, (sizes[0], sizes[2]))
    bm.meta["val"] = val(sizes[0]) * val(sizes[2])
    lhs = _call(graph, aten.reshape.default, _call(graph, aten.permute.default, a, [1, 0, 2]), [sizes[1], bm])
    rhs = _call(graph, aten.reshape.default, b, [bm, sizes[3]])
    return _call(graph, aten.mm.default, lhs, rhs)


def rewrite_addmm(graph: fx.Graph) -> None:
    """addmm(bias, a, b, beta, alpha) -> alpha * mm(a, b) + beta * bias; baddbmm likewise with bmm, addmv
    and addbmm with an mm between glue views: the matmul becomes the anchor and the bias an epilogue
    input of the same kernel. beta == 0 drops the bias (torch ignores it then, nan and inf included)."""
    from torch._guards import detect_fake_mode

    targets = (aten.addmm.default, aten.baddbmm.default, aten.addmv.default, aten.addbmm.default)
    for node in list(graph.nodes):
        if node.op != "call_function" or node.target not in targets:
            continue
        bias, a, b = node.args[:3]
        beta = node.kwargs.get("beta", 1)
        alpha = node.kwargs.get("alpha", 1)
        if not val(node).dtype.is_floating_point:
            # ATen reads alpha and beta in the integer dtype (`Scalar.to<int64_t>()`: truncated; OpInfo's int64
            # addmv with beta=0.2, alpha=0.6 is all zeros); a float scalar would promote the mul to float
            alpha, beta = int(alpha), int(beta)
        mode = detect_fake_mode([val(a), val(b)])
        with graph.inserting_before(node), mode:
            cur = _matmul_of(graph, node)
            if alpha != 1:
                cur = _call(graph, aten.mul.Tensor, cur, alpha)
            if beta == 0:
                out = cur
            else:
                bterm = bias if beta == 1 else _call(graph, aten.mul.Tensor, bias, beta)
                out = _call(graph, aten.add.Tensor, cur, bterm)
        node.replace_all_uses_with(out)
        graph.erase_node(node)


def reduction_dims(node: fx.Node) -> tuple[list[int], bool]:
    """(reduced dims, normalized and sorted; keepdim) of a reduction node."""
    x = node.args[0]
    r = rank(x)
    name = packet(node)
    dims: list[int] | None = None
    keep = False
    args = list(node.args[1:])
    kw = dict(node.kwargs)
    if name in ("argmax", "argmin", "max", "min") or (name in ("prod", "any", "all") and node.target._overloadname in
                                                         ("dim_int", "dim")):
        d = args[0] if args else kw.get("dim")
        dims = None if d is None else [d]
        keep = bool(args[1] if len(args) > 1 else kw.get("keepdim", False))
    else:
        d = args[0] if args else kw.get("dim")
        dims = None if d is None else (list(d) if isinstance(d, (list, tuple)) else [d])
        keep = bool(args[1] if len(args) > 1 and not isinstance(args[1], (float,)) else kw.get("keepdim", False))
        if name == "var":
            keep = bool(kw.get("keepdim", False))
    keep = keep or bool(node.meta.get("wb_keepdim"))  # a broadcast back to x's rank folded in (norm_stats)
    if not dims:
        dims = list(range(r))
    return sorted({d % max(r, 1) for d in dims}) if r else [], keep
