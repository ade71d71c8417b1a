"""The pointwise body of a kernel: loads of its inputs, one line per fused node, stores.

Shared by every kernel kind: a pointwise kernel gives index expressions from its flat offset, a
matmul from its tile rows and columns, a reduction from its output rows. Inputs are broadcast
views (`expand` to the group's shape) addressed through their strides, so a size-1 or missing dim
costs a zero stride, not a copy.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch
import torch.fx as fx

from workbench.lowering import pointwise as pw
from workbench.lowering.graph import dtype, is_sym_node, is_tensor_node, packet, val
from workbench.lowering.partition import Group

# unsigned dtypes and their modulus (a negative scalar in a ring op is taken modulo it)
_UNSIGNED = {torch.uint8: 2 ** 8}


class Unsupported(Exception):
    """An op (or a form of it) with no primitive: str(exc) is the aten op name or the reason."""


@dataclass
class Body:
    lines: list[str] = field(default_factory=list)
    inputs: list[fx.Node] = field(default_factory=list)      # external tensors, expanded to the group shape
    scalars: list[fx.Node] = field(default_factory=list)     # symbolic Python scalars passed by value
    outputs: list[fx.Node] = field(default_factory=list)     # members stored to memory
    helpers: set[str] = field(default_factory=set)

    def params(self, rank: int) -> list[str]:
        ps = [f"out{j}_ptr" for j in range(len(self.outputs))] + [f"in{k}_ptr" for k in range(len(self.inputs))]
        ps += [f"sc{k}" for k in range(len(self.scalars))]
        ps += [f"in{k}_s{d}" for k in range(len(self.inputs)) for d in range(rank)]
        return ps


def _args_of(node: fx.Node) -> list[Any]:
    args = list(node.args)
    kw = dict(node.kwargs)
    name = packet(node)
    if name in ("add", "sub", "rsub") and "alpha" in kw:
        args = (args + [None])[:2] + [kw["alpha"]]
    if name == "div" and "rounding_mode" in kw:
        args = args[:2] + [kw["rounding_mode"]]
    if name == "round":
        args = args[:1] + [kw.get("decimals", args[1] if len(args) > 1 else 0)]
    if name == "gelu":
        args = args[:1] + [kw.get("approximate", args[1] if len(args) > 1 else "none")]
    if name == "clamp":
        args = (args + [kw.get("min"), kw.get("max")])[:3] if len(args) < 3 else args
    if name == "nan_to_num":
        args = args + [None] * (4 - len(args))
        for i, k in enumerate(("nan", "posinf", "neginf"), start=1):
            if k in kw:
                args[i] = kw[k]
    return args


def build_body(group: Group, materialize: list[fx.Node], idx: list[str], mask: str, zero: str,
               anchor_vals: dict[fx.Node, pw.Val] | None = None) -> Body:
    """Lines computing every pointwise member of `group` on a tile indexed by `idx`."""
    body = Body()
    vals: dict[fx.Node, pw.Val] = dict(anchor_vals or {})
    for a_node, a_val in list(vals.items()):
        narrow = isinstance(val(a_node), torch.Tensor) and dtype(a_node) in (torch.float16, torch.bfloat16)
        if group.nodes and narrow and a_val.dtype == torch.float32:
            # the anchor's result as eager stores it, before the epilogue reads it
            body.lines.append(f"{a_val.expr}_r = {pw.narrow(a_val.expr, dtype(a_node), body.helpers)}.to(tl.float32)")
            vals[a_node] = pw.Val(f"{a_val.expr}_r", torch.float32)
    members = set(group.members)
    rank = len(idx)

    def operand(a: Any) -> pw.Val:
        if isinstance(a, fx.Node):
            if a in vals:
                return vals[a]
            if is_tensor_node(a) and a not in members:
                k = len(body.inputs)
                body.inputs.append(a)
                off = " + ".join([f"{idx[d]} * in{k}_s{d}" for d in range(rank)] or [zero])
                c = pw.compute_dtype(dtype(a))
                var = f"x{k}"
                load = f"tl.load(in{k}_ptr + {off}, mask={mask}, other=0)"
                body.lines.append(f"{var} = {load}" + (f".to({pw.TL_DTYPE[c]})" if c != dtype(a) else ""))
                vals[a] = pw.Val(var, c)
                return vals[a]
            if is_sym_node(a):
                k = len(body.scalars)
                body.scalars.append(a)
                vals[a] = pw.Val(f"sc{k}", None)
                return vals[a]
            raise Unsupported(f"unsupported: operand {a.name} of a fused kernel")
        if a is None:
            return pw.Val("None", None)
        if isinstance(a, (bool, int, float)):
            return pw.Val(pw.literal(a), None)
        raise Unsupported(f"unsupported: constant operand {a!r}")

    for i, node in enumerate(group.nodes):
        args = _args_of(node)
        tensor_like = [operand(a) if isinstance(a, (fx.Node, bool, int, float)) or a is None else pw.Val("None", None)
                       for a in args[:3]] if packet(node) != "copy" else [operand(args[0]), operand(args[1])]
        if packet(node) in ("_to_copy", "to", "clone", "alias", "lift_fresh_copy", "convert_element_type"):
            tensor_like = [operand(args[0])]
        out_dt = dtype(node)
        if out_dt in _UNSIGNED and packet(node) in ("add", "sub", "rsub", "mul"):
            # Triton refuses an unsigned tensor with a negative scalar; in a ring op the scalar modulo 2**bits
            # gives eager's wrapped result (uint8 addmm with alpha=-2: x * 254)
            tensor_like = [pw.Val(pw.literal(a % _UNSIGNED[out_dt]), None) if type(a) is int and a < 0 else v
                           for a, v in zip(args, tensor_like)]
        if packet(node) == "div" and node.target.namespace == "prims" and not out_dt.is_floating_point:
            args = args[:2] + ["trunc"]  # prims.div truncates integers
        try:
            expr = pw.emit(packet(node), tensor_like, args, out_dt, body.helpers)
        except (NotImplementedError, KeyError, TypeError, ValueError) as exc:
            from workbench.lowering.graph import op_name

            raise Unsupported(f"unsupported: {op_name(node)} ({exc})") from None
        var = f"v{i}"
        c = pw.compute_dtype(out_dt)
        if out_dt in (torch.float16, torch.bfloat16):
            # eager stores every intermediate in the narrow dtype: round like it, so a fused chain
            # matches op by op (round(a * 3) in bf16 differs by 1 otherwise)
            expr = f"{pw.narrow(expr, out_dt, body.helpers)}.to(tl.float32)"
        body.lines.append(f"{var} = {expr}")
        vals[node] = pw.Val(var, c)
    for node in materialize:
        body.outputs.append(node)
    body.values = vals  # type: ignore[attr-defined]
    return body


def store_lines(body: Body, offset: str | list[str], mask: str) -> list[str]:
    """The stores of the body's outputs at `offset` (one for all, or one per output)."""
    lines = []
    vals = body.values  # type: ignore[attr-defined]
    for j, node in enumerate(body.outputs):
        v = vals[node]
        target = dtype(node)
        expr = v.expr if v.dtype == target else (pw.narrow(v.expr, target, body.helpers) if v.dtype == torch.float32
                                                 else f"{v.expr}.to({pw.TL_DTYPE[target]})")
        lines.append(f"tl.store(out{j}_ptr + {offset if isinstance(offset, str) else offset[j]}, {expr}, mask={mask})")
    return lines


def torch_dtype(dt: torch.dtype) -> str:
    return f"torch.{str(dt).removeprefix('torch.')}"
