"""Max and average pooling over 1, 2 or 3 spatial dims (kernel, stride, padding, dilation, ceil mode).

One program computes POOL_BLOCK outputs of the flattened [N, C, O...] output; the window is a
static loop (its sizes are the graph's constants). Max pooling also writes the flat input index
of each maximum (PyTorch's `indices`); a nan wins, as in PyTorch. Average pooling divides as
`avg_pool2d` does: by the window clipped to the padded input (count_include_pad) or to the input.
A pooled value that only a cat reads (an Inception-style pool branch) is stored into its slice of the cat's
buffer (cat_chain.py: a cat along the batch or channel dim; the slice's batch and channel strides are arguments,
its positions stay contiguous). A DenseNet transition's pool is read by the next block's first layer too: copied.
"""
from __future__ import annotations

import torch.fx as fx

from workbench.lowering import cat_chain
from workbench.lowering import pointwise as pw
from workbench.lowering.epilogue import Unsupported, torch_dtype
from workbench.lowering.families import Space, register_space
from workbench.lowering.graph import dtype, op_name, packet, val
from workbench.lowering.primitives import Primitive, register, register_tunables

TUNABLES = ("POOL_BLOCK", "NUM_WARPS")
DEFAULTS = {"POOL_BLOCK": ([128, 256, 512, 1024], 256)}
register_tunables(DEFAULTS)
register_space(Space("pool", ("POOL_BLOCK",), ((512,), (1024,), (128,)), rank=20))


def _arg(node: fx.Node, i: int, name: str, default):  # noqa: ANN001, ANN202 - small local accessor
    return node.args[i] if len(node.args) > i else node.kwargs.get(name, default)


def _expand(v, S: int) -> list[int]:  # noqa: ANN001 - int or list from the graph
    v = list(v) if isinstance(v, (list, tuple)) else [v]
    return v * S if len(v) == 1 else v


def pool_kernel(name: str, node: fx.Node, names: dict[fx.Node, str], expr,  # noqa: ANN001
                into: cat_chain.Into | None = None) -> tuple[str, list[str], set[str]]:
    p = packet(node)
    is_max = p.startswith("max_pool")
    x = node.args[0]
    S = val(x).dim() - 2
    if S < 1 or not dtype(x).is_floating_point:
        raise Unsupported(f"unsupported: {op_name(node)} on a rank-{S + 2} {dtype(x)} input")
    k = _expand(node.args[1], S)
    stride = _expand(_arg(node, 2, "stride", []) or k, S)
    padding = _expand(_arg(node, 3, "padding", 0), S)
    if is_max:
        dilation = _expand(_arg(node, 4, "dilation", 1), S)
        ceil = bool(_arg(node, 5, "ceil_mode", False))
        include_pad, divisor = True, None
    else:
        dilation = [1] * S
        ceil = bool(_arg(node, 4, "ceil_mode", False))
        include_pad = bool(_arg(node, 5, "count_include_pad", True))
        divisor = _arg(node, 6, "divisor_override", None)
    sp = list(range(S))
    used: set[str] = set()
    L = ["offs = tl.program_id(0).to(tl.int64) * POOL_BLOCK + tl.arange(0, POOL_BLOCK)", "mask = offs < TOTAL"]
    rest = "offs"
    for d in reversed(sp):
        L += [f"o{d} = {rest} % O{d}", f"_q{d} = {rest} // O{d}"]
        rest = f"_q{d}"
    L += [f"c = {rest} % C", f"n = {rest} // C", "base = n * sx0 + c * sx1"]
    if is_max:
        L += ['best = tl.full([POOL_BLOCK], -float("inf"), tl.float32)', "besti = tl.zeros([POOL_BLOCK], tl.int64)"]
    else:
        L += ["acc = tl.zeros([POOL_BLOCK], tl.float32)"]
        for d in sp:
            L += [f"st{d} = o{d} * {stride[d]} - {padding[d]}",
                  f"en{d} = tl.minimum(st{d} + {k[d]}, I{d} + {padding[d]})",
                  f"padn{d} = en{d} - st{d}",
                  f"cnt{d} = tl.minimum(en{d}, I{d}) - tl.maximum(st{d}, 0)"]
    ind = ""
    for d in sp:
        L.append(f"{ind}for k{d} in tl.static_range({k[d]}):")
        ind += "    "
        L.append(f"{ind}i{d} = o{d} * {stride[d]} - {padding[d]} + k{d} * {dilation[d]}")
    valid = " & ".join(["mask"] + [f"(i{d} >= 0) & (i{d} < I{d})" for d in sp])
    off = " + ".join(["base"] + [f"i{d} * sx{d + 2}" for d in sp])
    other = '-float("inf")' if is_max else "0.0"
    # the value's offset: flat, or in its slice of a cat's buffer (n, c through the slice's strides)
    out_off = "offs"
    if into is not None:
        flat = "o0"
        for d in sp[1:]:
            flat = f"({flat}) * O{d} + o{d}"
        out_off = f"n * out_sn + c * out_sc + {flat}"
    L.append(f"{ind}ok = {valid}")
    L.append(f"{ind}v = tl.load(x_ptr + {off}, mask=ok, other={other}).to(tl.float32)")
    if is_max:
        flat = "i0"
        for d in sp[1:]:
            flat = f"({flat}) * I{d} + i{d}"
        L += [f"{ind}take = ok & ((v > best) | ((v != v) & (best == best)))",
              f"{ind}best = tl.where(take, v, best)", f"{ind}besti = tl.where(take, {flat}, besti)"]
        L += [f"tl.store(out_ptr + {out_off}, {pw.narrow('best', dtype(x), used)}, mask=mask)",
              "tl.store(idx_ptr + offs, besti, mask=mask)"]
    else:
        L.append(f"{ind}acc += v")
        if divisor:
            div = f"{float(divisor)!r}"
        elif include_pad:
            div = " * ".join(f"padn{d}" for d in sp)
        else:
            div = " * ".join(f"cnt{d}" for d in sp)
        L.append(f"tl.store(out_ptr + {out_off}, {pw.narrow(f'(acc / ({div}))', dtype(x), used)}, mask=mask)")
    params = ["x_ptr", "out_ptr"] + (["idx_ptr"] if is_max else []) + ["TOTAL", "C"] + \
        [f"I{d}" for d in sp] + [f"O{d}" for d in sp] + [f"sx{d}" for d in range(S + 2)] + \
        (["out_sn", "out_sc"] if into is not None else []) + ["POOL_BLOCK: tl.constexpr"]
    doc = (f'    """{"max" if is_max else "avg"} pool{S}d, kernel {k}, stride {stride}, padding {padding}, '
           f'dilation {dilation}, ceil_mode {ceil}."""')
    src = "\n".join([f"@triton.jit\ndef {name}({', '.join(params)}):", doc] + ["    " + ln for ln in L]) + "\n"
    xv = names[x]
    v = names[node]
    launch = [f"_I = {xv}.shape[2:]", "_O = []",
              f"for _i, _k, _s, _p, _d in zip(_I, {k}, {stride}, {padding}, {dilation}):",
              "    _span = _i + 2 * _p - _d * (_k - 1) - 1",
              f"    _o = (-(-_span // _s) if {ceil} else _span // _s) + 1",
              f"    if {ceil} and (_o - 1) * _s >= _i + _p:",
              "        _o -= 1",
              "    _O.append(_o)",
              f"_shape = [{xv}.shape[0], {xv}.shape[1], *_O]"]
    outs = [f"{v}_0", f"{v}_1"] if is_max else [v]
    if into is None:
        launch.append(f"{outs[0]} = torch.empty(_shape, dtype={torch_dtype(dtype(x))}, device=dev)")
    else:
        alloc, view = cat_chain.slice_lines(into, outs[0], names, "_shape")
        launch += alloc + [view]
    if is_max:
        launch.append(f"{outs[1]} = torch.empty(_shape, dtype=torch.int64, device=dev)")
    launch.append("_n = _numel(_shape)")
    args = [xv] + outs + ["_n", f"{xv}.shape[1]", "*_I", "*_O", f"*{xv}.stride()"] + \
        ([f"*{outs[0]}.stride()[:2]"] if into is not None else [])
    launch.append(f"if _n: {name}[(triton.cdiv(_n, POOL_BLOCK),)]({', '.join(args)}, POOL_BLOCK=POOL_BLOCK, "
                  "num_warps=NUM_WARPS)")
    return src, launch, used


for _op in ("max_pool2d_with_indices", "max_pool3d_with_indices", "avg_pool1d", "avg_pool2d", "avg_pool3d"):
    register(_op, Primitive("pool", TUNABLES, pool_kernel, tuple_out=_op.startswith("max")))
    cat_chain.register_store(_op, lambda node, dim: dim <= 1)  # [N, C, O...]: a cat along N or C
