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


def rewrite_addmm(graph: fx.Graph) -> None:
    """addmm(bias, a, b, beta, alpha) -> alpha * mm(a, b) + beta * bias, baddbmm likewise with bmm:
    the matmul becomes the anchor and the bias an epilogue input of the same kernel."""
    from torch._guards import detect_fake_mode

    for node in list(graph.nodes):
        if node.op != "call_function" or node.target not in (aten.addmm.default, aten.baddbmm.default):
            continue
        bias, a, b = node.args[:3]
        beta = node.kwargs.get("beta", 1)
        alpha = node.kwargs.get("alpha", 1)
        mm = aten.mm.default if node.target is aten.addmm.default else aten.bmm.default
        mode = detect_fake_mode([val(a), val(b)])
        with graph.inserting_before(node), mode:
            prod = graph.call_function(mm, (a, b))
            prod.meta["val"] = mm(val(a), val(b))
            cur = prod
            if alpha != 1:
                cur = graph.call_function(aten.mul.Tensor, (cur, alpha))
                cur.meta["val"] = aten.mul.Tensor(val(prod), alpha)
            bterm = bias
            if beta != 1:
                bterm = graph.call_function(aten.mul.Tensor, (bias, beta))
                bterm.meta["val"] = aten.mul.Tensor(val(bias), beta)
            out = graph.call_function(aten.add.Tensor, (cur, bterm))
            out.meta["val"] = aten.add.Tensor(val(cur), val(bterm))
        node.replace_all_uses_with(out)
        graph.erase_node(node)
