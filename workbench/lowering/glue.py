"""Glue ops: views, reshapes, allocations and layout copies, emitted as plain tensor methods.

The harness lets a candidate's forward dispatch exactly these (workbench/harness/opcheck.py,
GLUE_OPS). Every size comes from the graph's symbolic arguments, which the forward computes from
the tensors' shapes, so nothing here fixes a shape at lowering time. Allocation dtypes come from the
node's traced value; the device is the first input's.
"""
from __future__ import annotations

from typing import Any, Callable

import torch.fx as fx

from workbench.lowering.epilogue import torch_dtype
from workbench.lowering.graph import val

Expr = Callable[[Any], str]
Rule = Callable[[str, fx.Node, Expr], list[str]]


def _arg(node: fx.Node, i: int, name: str, default: Any = None) -> Any:
    if len(node.args) > i:
        return node.args[i]
    return node.kwargs.get(name, default)


def _method(method: str, *names: tuple) -> Rule:
    """`v = x.method(args...)`; each argument is (position, name) or (position, name, schema default)."""
    def rule(v: str, node: fx.Node, e: Expr) -> list[str]:
        extra = [e(_arg(node, *spec)) for spec in names]
        return [f"{v} = {e(node.args[0])}.{method}({', '.join(extra)})"]
    return rule


def _alias(v: str, node: fx.Node, e: Expr) -> list[str]:
    return [f"{v} = {e(node.args[0])}"]


def _slice(v: str, node: fx.Node, e: Expr) -> list[str]:
    dim = _arg(node, 1, "dim", 0)
    start, end, step = _arg(node, 2, "start"), _arg(node, 3, "end"), _arg(node, 4, "step", 1)
    x = e(node.args[0])
    r = val(node).dim()
    d = dim % r if r else 0
    lead = "".join(":, " for _ in range(d))
    return [f"{v} = {x}[{lead}{e(start) if start is not None else ''}:{e(end) if end is not None else ''}"
            f":{e(step)}]"]


def _dtype_of(node: fx.Node) -> str:
    return torch_dtype(val(node).dtype)


def _full(v: str, node: fx.Node, e: Expr) -> list[str]:
    value = node.args[1] if len(node.args) > 1 else node.kwargs.get("fill_value")
    return [f"{v} = torch.full({e(node.args[0])}, {e(value)}, dtype={_dtype_of(node)}, device=dev)"]


def _const(value: str) -> Rule:
    def rule(v: str, node: fx.Node, e: Expr) -> list[str]:
        return [f"{v} = torch.full({e(node.args[0])}, {value}, dtype={_dtype_of(node)}, device=dev)"]
    return rule


def _like(value: str | None) -> Rule:
    def rule(v: str, node: fx.Node, e: Expr) -> list[str]:
        fill = e(node.args[1]) if value is None else value
        return [f"{v} = torch.full({e(node.args[0])}.shape, {fill}, dtype={_dtype_of(node)}, device=dev)"]
    return rule


def _empty_strided(v: str, node: fx.Node, e: Expr) -> list[str]:
    return [f"{v} = torch.empty_strided({e(node.args[0])}, {e(node.args[1])}, dtype={_dtype_of(node)}, device=dev)"]


def _empty_permuted(v: str, node: fx.Node, e: Expr) -> list[str]:
    """empty_permuted(size, physical_layout): storage in the layout's dim order, viewed back in logical order
    (zero-filled as `empty` is here)."""
    return [f"_sz, _pl = {e(node.args[0])}, {e(node.args[1])}",
            f"{v} = torch.full([_sz[_p] for _p in _pl], 0, dtype={_dtype_of(node)}, device=dev)"
            ".permute(sorted(range(len(_pl)), key=lambda _d: _pl[_d]))"]


def _scalar_tensor(v: str, node: fx.Node, e: Expr) -> list[str]:
    return [f"{v} = torch.full([], {e(node.args[0])}, dtype={_dtype_of(node)}, device=dev)"]


def _arange(v: str, node: fx.Node, e: Expr) -> list[str]:
    args = ", ".join(e(a) for a in node.args)
    return [f"{v} = torch.arange({args}, dtype={_dtype_of(node)}, device=dev)"]


def _squeeze(v: str, node: fx.Node, e: Expr) -> list[str]:
    x = e(node.args[0])
    if len(node.args) < 2:
        return [f"{v} = {x}.squeeze()"]
    d = node.args[1]
    return [f"{v} = {x}.squeeze({e(tuple(d)) if isinstance(d, (list, tuple)) else e(d)})"]


def _broadcast_in_dim(v: str, node: fx.Node, e: Expr) -> list[str]:
    shape, bdims = node.args[1], list(node.args[2])
    x = e(node.args[0])
    for j in range(len(shape)):
        if j not in bdims:
            x = f"{x}.unsqueeze({j})"
    return [f"{v} = {x}.expand({e(list(shape))})"]


def diag_view(v: str, x: str, node: fx.Node, src: fx.Node, e: Expr, first: int) -> list[str]:
    """`v = x.diagonal(offset, dim1, dim2)` spelled as an as_strided view of x (diagonal itself is not glue):
    the other dims keep their sizes and strides, the diagonal has stride s1 + s2."""
    r = val(src).dim()
    off = _arg(node, first, "offset", 0)
    d1, d2 = _arg(node, first + 1, "dim1", 0) % r, _arg(node, first + 2, "dim2", 1) % r
    keep = [d for d in range(r) if d not in (d1, d2)]
    return [f"_sh, _st = {x}.shape, {x}.stride()",
            f"_len = max(0, min(_sh[{d1}] + min({e(off)}, 0), _sh[{d2}] - max({e(off)}, 0)))",
            f"_off = {x}.storage_offset() + (max({e(off)}, 0) * _st[{d2}] - min({e(off)}, 0) * _st[{d1}] "
            "if _len else 0)",
            f"{v} = {x}.as_strided([{''.join(f'_sh[{d}], ' for d in keep)}_len], "
            f"[{''.join(f'_st[{d}], ' for d in keep)}_st[{d1}] + _st[{d2}]], _off)"]


def _diagonal(v: str, node: fx.Node, e: Expr) -> list[str]:
    return diag_view(v, e(node.args[0]), node, node.args[0], e, 1)


GLUE: dict[str, Rule] = {
    "diagonal": _diagonal,
    "broadcast_in_dim": _broadcast_in_dim,
    "view": _method("reshape", (1, "size")),
    "_unsafe_view": _method("reshape", (1, "size")),
    "reshape": _method("reshape", (1, "shape")),
    "permute": _method("permute", (1, "dims")),
    "expand": _method("expand", (1, "size")),
    "unsqueeze": _method("unsqueeze", (1, "dim")),
    "squeeze": _squeeze,
    "t": _method("t"),
    "transpose": _method("transpose", (1, "dim0"), (2, "dim1")),
    "select": _method("select", (1, "dim"), (2, "index")),
    "slice": _slice,
    "alias": _alias,
    "detach": _alias,
    "lift_fresh": _alias,
    "as_strided": _method("as_strided", (1, "size"), (2, "stride")),
    # dim defaults to 0 in their schemas: a call without it must not pass dim=None
    "split_with_sizes": _method("split_with_sizes", (1, "split_sizes"), (2, "dim", 0)),
    "split": _method("split", (1, "split_size"), (2, "dim", 0)),
    "unbind": _method("unbind", (1, "dim", 0)),
    "unfold": _method("unfold", (1, "dimension"), (2, "size"), (3, "step")),
    "full": _full,
    "zeros": _const("0"),
    "ones": _const("1"),
    "empty": _const("0"),
    "full_like": _like(None),
    "zeros_like": _like("0"),
    "ones_like": _like("1"),
    "empty_like": _like("0"),
    "empty_strided": _empty_strided,
    "empty_permuted": _empty_permuted,
    "scalar_tensor": _scalar_tensor,
    "arange": _arange,
}
