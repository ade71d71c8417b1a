"""Copies and fills as kernels: cat, constant_pad_nd and graph outputs that are constants.

cat allocates its output (glue) and launches one strided copy per input into that input's slice of
the output (a narrowed view: its data pointer carries the offset), casting to the output dtype on
store; the cats of a chain (cat_chain.py: a dense block's growing cats) share one buffer and copy (with
`copy_source`, launched by `cat_chain.chain_cat_launch`) only their new inputs that no producer kernel stored
in place. constant_pad_nd is one kernel over the output: an element inside the (possibly cropped)
source is read through the source's strides, the others take the value. A graph output made only
by full/zeros/ones/*_like/scalar_tensor (or any fill) is written by a fill kernel: torch would
otherwise have done the whole work; the same allocations inside the graph stay glue (buffers).
"""
from __future__ import annotations

import torch
import torch.fx as fx

from workbench.lowering.epilogue import torch_dtype
from workbench.lowering.gather import _kernel
from workbench.lowering.glue import diag_view
from workbench.lowering.graph import dtype, packet, val
from workbench.lowering.primitives import Primitive, register

TUNABLES = ("BLOCK", "NUM_WARPS")
# allocations with a value: glue inside the graph, a fill kernel when the node is a graph output
CONSTANT_OPS = ("full", "zeros", "ones", "full_like", "zeros_like", "ones_like", "scalar_tensor")


def _arg(node: fx.Node, i: int, name: str, default: object = None) -> object:
    if len(node.args) > i:
        return node.args[i]
    return node.kwargs.get(name, default)


def constant_output(node: fx.Node) -> bool:
    """The node is a constant allocation that the graph returns as it is."""
    return packet(node) in CONSTANT_OPS and any(u.op == "output" for u in node.users)


def _wide(dt: torch.dtype) -> str:
    """The type a scalar value is splat in before the cast on store (the interpreter cannot splat into bf16)."""
    if dt == torch.float64:
        return "tl.float64"
    return "tl.float32" if dt.is_floating_point else "tl.int64"


def _value(dt: torch.dtype, value: str) -> tuple[str, str]:
    """(forward expression, kernel expression of a [BLOCK] splat) for a scalar fill value of dtype dt.
    A Python float reaches a kernel as fp32, so a float64 value travels as a 0-d tensor; the interpreter
    cannot take a Python bool, so bools travel as 0/1."""
    if dt == torch.float64:
        return (f"torch.full([], {value}, dtype=torch.float64, device=dev)",
                "tl.full([BLOCK], tl.load(value), tl.float64)")
    cast = "float" if dt.is_floating_point else "int"
    fwd = f"int(bool({value}))" if dt == torch.bool else f"{cast}({value})"
    return fwd, f"tl.full([BLOCK], value, {_wide(dt)})"


def copy_source(name: str, r: int) -> str:
    """dst[j] = src[j] for a rank-r view dst, both read through their strides, cast to dst's dtype."""
    doff = " + ".join(f"j{d} * sd{d}" for d in range(r)) or "0"
    soff = " + ".join(f"j{d} * ss{d}" for d in range(r)) or "0"
    body = [f"v = tl.load(src_ptr + {soff}, mask=mask)",
            f"tl.store(dst_ptr + {doff}, v.to(dst_ptr.dtype.element_ty), mask=mask)"]
    params = ["dst_ptr", "src_ptr"] + [f"sd{d}" for d in range(r)] + [f"ss{d}" for d in range(r)]
    return _kernel(name, "src copied into a strided view of the output, cast to its dtype.", params, r, body)


def _copy_launch(name: str, dst: str, src: str) -> list[str]:
    return [f"_n = {dst}.numel()",
            f"if _n: {name}[(triton.cdiv(_n, BLOCK),)]({dst}, {src}, *{dst}.stride(), *{src}.stride(), _n, "
            f"*{dst}.shape[1:], BLOCK=BLOCK, num_warps=NUM_WARPS)"]


def cat_kernel(name: str, node: fx.Node, names: dict[fx.Node, str], expr) -> tuple[str, list[str], set[str]]:  # noqa: ANN001
    r = val(node).dim()
    dim = _arg(node, 1, "dim", 0) % r
    # torch's legacy rule: 1-d inputs of shape (0,) are skipped whatever the output's rank
    parts = [names[t] for t in node.args[0] if val(t).dim() == r]
    x0, v = parts[0], names[node]
    size = " + ".join(f"{x}.shape[{dim}]" for x in parts)
    launch = [f"{v} = torch.empty([*{x0}.shape[:{dim}], {size}, *{x0}.shape[{dim + 1}:]], "
              f"dtype={torch_dtype(dtype(node))}, device=dev)", "_o = 0"]
    for x in parts:
        launch += [f"_dv = {v}.narrow({dim}, _o, {x}.shape[{dim}])", *_copy_launch(name, "_dv", x),
                   f"_o = _o + {x}.shape[{dim}]"]
    return copy_source(name, r), launch, set()


def pad_kernel(name: str, node: fx.Node, names: dict[fx.Node, str], expr) -> tuple[str, list[str], set[str]]:  # noqa: ANN001
    """constant_pad_nd(x, pad, value): pad pairs (low, high) from the last dim backwards; negative pads crop."""
    x, pad = node.args[0], list(node.args[1])
    r, dt = val(x).dim(), dtype(node)
    padded = {r - 1 - k: (pad[2 * k], pad[2 * k + 1]) for k in range(len(pad) // 2)}
    body, coords = ["inb = mask"], []
    for d in range(r):
        if d in padded:
            body += [f"i{d} = j{d} - lo{d}", f"inb = inb & (i{d} >= 0) & (i{d} < xs{d})"]
            coords.append(f"i{d}")
        else:
            coords.append(f"j{d}")
    off = " + ".join(f"{c} * sx{d}" for d, c in enumerate(coords)) or "0"
    fwd_value, splat = _value(dt, expr(_arg(node, 2, "value", 0)))
    body += [f"y = tl.where(inb, tl.load(x_ptr + {off}, mask=inb, other=0), {splat})",
             "tl.store(out_ptr + offs, y.to(out_ptr.dtype.element_ty), mask=mask)"]
    pd = sorted(padded)
    params = ["out_ptr", "x_ptr", "value"] + [f"sx{d}" for d in range(r)] + [f"lo{d}" for d in pd] + \
        [f"xs{d}" for d in pd]
    src = _kernel(name, f"constant pad of dims {pd}: x read inside its (cropped) extent, the value outside.",
                  params, r, body)
    xv, v = names[x], names[node]
    shape = ", ".join(f"{xv}.shape[{d}] + {expr(padded[d][0])} + {expr(padded[d][1])}" if d in padded
                      else f"{xv}.shape[{d}]" for d in range(r))
    args = [xv, fwd_value, f"*{xv}.stride()", *(expr(padded[d][0]) for d in pd), *(f"{xv}.shape[{d}]" for d in pd)]
    launch = [f"_shape = [{shape}]", f"{v} = torch.empty(_shape, dtype={torch_dtype(dt)}, device=dev)",
              f"_n = {v}.numel()",
              f"if _n: {name}[(triton.cdiv(_n, BLOCK),)]({v}, {', '.join(args)}, _n, *_shape[1:], BLOCK=BLOCK, "
              "num_warps=NUM_WARPS)"]
    return src, launch, set()


def fill_kernel(name: str, node: fx.Node, names: dict[fx.Node, str], expr) -> tuple[str, list[str], set[str]]:  # noqa: ANN001
    """A new contiguous tensor of the node's shape and dtype, every element the value (a scalar, or a
    0-d tensor for fill.Tensor)."""
    p, dt, v = packet(node), dtype(node), names[node]
    if p == "scalar_tensor":
        shape, value = "[]", node.args[0]
    elif p in ("full", "zeros", "ones"):
        shape, value = expr(node.args[0]), {"zeros": 0, "ones": 1}.get(p, _arg(node, 1, "fill_value"))
    else:
        shape = f"{names[node.args[0]]}.shape"
        value = {"zeros_like": 0, "ones_like": 1}.get(p, _arg(node, 1, "fill_value" if p == "full_like" else "value"))
    if isinstance(value, fx.Node):   # fill.Tensor: read the 0-d value in the kernel, cast on store
        fwd_value, splat = names[value], "tl.load(value + tl.zeros([BLOCK], dtype=tl.int32))"
    else:
        fwd_value, splat = _value(dt, expr(value))
    body = [f"tl.store(out_ptr + offs, ({splat}).to(out_ptr.dtype.element_ty), mask=mask)"]
    src = _kernel(name, "every element of the output set to one value.", ["out_ptr", "value"], 1, body)
    launch = [f"{v} = torch.empty({shape}, dtype={torch_dtype(dt)}, device=dev)", f"_n = {v}.numel()",
              f"if _n: {name}[(triton.cdiv(_n, BLOCK),)]({v}, {fwd_value}, _n, BLOCK=BLOCK, num_warps=NUM_WARPS)"]
    return src, launch, set()



def diagonal_scatter_kernel(name: str, node: fx.Node, names: dict[fx.Node, str],
                            expr) -> tuple[str, list[str], set[str]]:  # noqa: ANN001
    """diagonal_scatter(x, src, offset, dim1, dim2): a copy of x (glue), then the strided copy of src into the
    as_strided view of that copy's diagonal (the view's data pointer carries its offset)."""
    x, s = node.args[:2]
    v = names[node]
    launch = [f"{v} = {names[x]}.clone()"] + diag_view("_dv", v, node, x, expr, 2) + _copy_launch(name, "_dv", names[s])
    return copy_source(name, val(s).dim()), launch, set()


def slice_scatter_kernel(name: str, node: fx.Node, names: dict[fx.Node, str],
                         expr) -> tuple[str, list[str], set[str]]:  # noqa: ANN001
    """slice_scatter(x, src, dim, start, end, step): a copy of x (glue), then the strided copy of src into
    that copy's slice view (slicing is glue: the view's data pointer and strides carry the slice)."""
    x, s = node.args[:2]
    dim, start, end, step = (_arg(node, 2, "dim", 0), _arg(node, 3, "start"), _arg(node, 4, "end"),
                             _arg(node, 5, "step", 1))
    r = val(s).dim()
    d = dim % r if r else 0
    lo = expr(start) if start is not None else ""
    hi = expr(end) if end is not None else ""
    v = names[node]
    launch = [f"{v} = {names[x]}.clone()", f"_dv = {v}[{':, ' * d}{lo}:{hi}:{expr(step)}]"] + \
        _copy_launch(name, "_dv", names[s])
    return copy_source(name, r), launch, set()

register("cat", Primitive("cat", TUNABLES, cat_kernel))
register("constant_pad_nd", Primitive("pad", TUNABLES, pad_kernel))
for _op in (*CONSTANT_OPS, "fill"):
    register(_op, Primitive("fill", TUNABLES, fill_kernel))
register("diagonal_scatter", Primitive("copy", TUNABLES, diagonal_scatter_kernel))
register("slice_scatter", Primitive("copy", TUNABLES, slice_scatter_kernel))
