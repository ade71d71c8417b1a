"""Data movement that reads through an index: flip, gather, index (one index tensor), embedding.

Each is one kernel over the flattened, contiguous output: the output index is split into its
coordinates, the source coordinate of one dim is replaced (by `size - 1 - i` for flip, by the value
of the index tensor for the others), and the input is read through its strides. Negative indices
wrap as in PyTorch.
"""
from __future__ import annotations

import torch
import torch.fx as fx

from workbench.lowering.epilogue import Unsupported, torch_dtype
from workbench.lowering.graph import dtype, op_name, packet, val
from workbench.lowering.primitives import Primitive, register

TUNABLES = ("BLOCK", "NUM_WARPS")


def _split(r: int, lines: list[str]) -> None:
    rest = "offs"
    for d in range(r - 1, 0, -1):
        lines += [f"j{d} = {rest} % osize{d}", f"_q{d} = {rest} // osize{d}"]
        rest = f"_q{d}"
    lines.append(f"j0 = {rest}" if r else "")


def _kernel(name: str, doc: str, params: list[str], r: int, body: list[str]) -> str:
    lines = ["offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)", "mask = offs < n"]
    _split(r, lines)
    lines += body
    sig = ", ".join(params + ["n"] + [f"osize{d}" for d in range(1, r)] + ["BLOCK: tl.constexpr"])
    return "\n".join([f"@triton.jit\ndef {name}({sig}):", f'    """{doc}"""'] +
                     ["    " + ln for ln in lines if ln]) + "\n"


def _launch(name: str, v: str, shape: str, out_dt: str, args: list[str]) -> list[str]:
    return [f"_shape = {shape}", f"{v} = torch.empty(_shape, dtype={out_dt}, device=dev)", "_n = _numel(_shape)",
            f"if _n: {name}[(triton.cdiv(_n, BLOCK),)]({v}, {', '.join(args)}, _n, *_shape[1:], BLOCK=BLOCK, "
            "num_warps=NUM_WARPS)"]


def flip_kernel(name: str, node: fx.Node, names: dict[fx.Node, str], expr) -> tuple[str, list[str], set[str]]:  # noqa: ANN001
    x = node.args[0]
    r = val(x).dim()
    dims = {d % r for d in node.args[1]} if r else set()
    coords = [f"(osize{d} - 1 - j{d})" if d in dims else f"j{d}" for d in range(r)]
    if 0 in dims:
        coords[0] = "(osize0 - 1 - j0)"
    off = " + ".join(f"{c} * sx{d}" for d, c in enumerate(coords)) or "0"
    body = [f"tl.store(out_ptr + offs, tl.load(x_ptr + {off}, mask=mask), mask=mask)"]
    params = ["out_ptr", "x_ptr", "osize0"] + [f"sx{d}" for d in range(r)]
    src = _kernel(name, f"flip of dims {sorted(dims)}: a strided copy with those coordinates reversed.", params, r,
                  body)
    xv = names[x]
    launch = _launch(name, names[node], f"list({xv}.shape)", torch_dtype(dtype(node)),
                     [xv, f"{xv}.shape[0] if {xv}.dim() else 1", f"*{xv}.stride()"])
    return src, launch, set()


def gather_kernel(name: str, node: fx.Node, names: dict[fx.Node, str], expr) -> tuple[str, list[str], set[str]]:  # noqa: ANN001
    x, dim, index = node.args[:3]
    # torch reads a 0-d x or index as 1-d of size 1 (gather(0-d x, 0, index of shape (2,)) is allowed)
    rx, r = val(x).dim(), val(index).dim()
    flat0 = min(rx, r) == 0 and max(rx, r) <= 1
    r = max(r, 1) if flat0 else r
    dim = dim % max(r, 1)
    ioff = " + ".join(f"j{d} * si{d}" for d in range(r)) or "0"
    coords = [f"j{d}" if d != dim else "k" for d in range(r)]
    off = " + ".join(f"{c} * sx{d}" for d, c in enumerate(coords)) or "0"
    body = [f"k = tl.load(idx_ptr + {ioff}, mask=mask, other=0).to(tl.int64)", "k = tl.where(k < 0, k + kdim, k)",
            f"tl.store(out_ptr + offs, tl.load(x_ptr + {off}, mask=mask), mask=mask)"]
    params = ["out_ptr", "x_ptr", "idx_ptr", "kdim"] + [f"sx{d}" for d in range(r)] + [f"si{d}" for d in range(r)]
    src = _kernel(name, f"gather along dim {dim}: out[j] = x[j with coordinate {dim} replaced by index[j]].", params,
                  r, body)
    xv, iv = _as_1d(names[x], flat0), _as_1d(names[index], flat0)
    launch = _launch(name, names[node], f"list({names[index]}.shape)", torch_dtype(dtype(node)),
                     [xv, iv, f"{xv}.shape[{dim}]", f"*{xv}.stride()", f"*{iv}.stride()"])
    return src, launch, set()


def _as_1d(v: str, flat0: bool) -> str:
    """`v` as seen by a gather/scatter whose x or index is 0-d: every operand then has rank 1."""
    return f"{v}.reshape([-1])" if flat0 else v


def embedding_kernel(name: str, node: fx.Node, names: dict[fx.Node, str], expr) -> tuple[str, list[str], set[str]]:  # noqa: ANN001
    w, idx = node.args[:2]
    ri = val(idx).dim()
    r = ri + 1
    ioff = " + ".join(f"j{d} * si{d}" for d in range(ri)) or "0"
    body = [f"k = tl.load(idx_ptr + {ioff}, mask=mask, other=0).to(tl.int64)",
            f"tl.store(out_ptr + offs, tl.load(w_ptr + k * sw0 + j{ri} * sw1, mask=mask), mask=mask)"]
    params = ["out_ptr", "w_ptr", "idx_ptr", "sw0", "sw1"] + [f"si{d}" for d in range(ri)]
    src = _kernel(name, "embedding: out[..., c] = weight[indices[...], c].", params, r, body)
    wv, iv = names[w], names[idx]
    launch = _launch(name, names[node], f"[*{iv}.shape, {wv}.shape[1]]", torch_dtype(dtype(node)),
                     [wv, iv, f"*{wv}.stride()", f"*{iv}.stride()"])
    return src, launch, set()


def index_kernel(name: str, node: fx.Node, names: dict[fx.Node, str], expr) -> tuple[str, list[str], set[str]]:  # noqa: ANN001
    """x[..., idx, ...] with exactly one index tensor (at dim k): out = x dims before k, idx's dims, dims after."""
    x, indices = node.args[:2]
    tensors = [(k, t) for k, t in enumerate(indices) if t is not None]
    if not tensors or any(dtype(t).is_floating_point or dtype(t) == torch.bool for _, t in tensors):
        raise Unsupported(f"unsupported: {op_name(node)} with {len(tensors)} index tensors or a mask index")
    if len(tensors) == 1:
        k, it = tensors[0]
        return _index_at(name, node, names, x, k, it)
    return _index_multi(name, node, names, x, tensors)


def _index_multi(name: str, node: fx.Node, names: dict[fx.Node, str], x: fx.Node,
                 tensors: list[tuple[int, fx.Node]], put: fx.Node | None = None,
                 accumulate: bool = False) -> tuple[str, list[str], set[str]]:
    """x[..., i0, ..., i1, ...] with index tensors broadcast against each other (shape B); with `put`,
    index_put: a copy of x with `put` (broadcast to the indexed shape) written, or atomically added, there.

    As in numpy and torch: when the indexed dims are adjacent, B takes their place in the indexed shape;
    when a slice separates them, B comes first. Each index tensor is read through the strides of its
    expansion to B (0 along broadcast dims); the other dims of x are walked through."""
    rx = val(x).dim()
    dims = [k for k, _ in tensors]
    rb = max(val(t).dim() for _, t in tensors)
    adjacent = dims == list(range(dims[0], dims[-1] + 1))
    rest = [d for d in range(rx) if d not in dims]
    p0 = dims[0] if adjacent else 0
    # position, in the indexed shape, of each x dim that is not indexed
    pos = {d: (d if d < dims[0] else d - len(dims) + rb) for d in rest} if adjacent else \
        {d: rb + i for i, d in enumerate(rest)}
    r = rx - len(dims) + rb
    body = []
    xoff = [f"j{pos[d]} * sx{d}" for d in rest]
    for m, (k, _) in enumerate(tensors):
        ioff = " + ".join(f"j{p0 + q} * si{m}_{q}" for q in range(rb)) or "0"
        body += [f"k{m} = tl.load(i{m}_ptr + {ioff}, mask=mask, other=0).to(tl.int64)",
                 f"k{m} = tl.where(k{m} < 0, k{m} + kdim{m}, k{m})"]
        xoff.append(f"k{m} * sx{k}")
    where = "in their place" if adjacent else "first"
    wide = put is not None and accumulate and dtype(node) in (torch.float16, torch.bfloat16)
    if put is None:
        body.append(f"tl.store(out_ptr + offs, tl.load(x_ptr + {' + '.join(xoff)}, mask=mask), mask=mask)")
        doc = f"x indexed by {len(tensors)} broadcast index tensors at dims {dims} (their shape {where})."
    else:
        voff = " + ".join(f"j{d} * sv{d}" for d in range(r)) or "0"
        body.append(f"v = tl.load(v_ptr + {voff}, mask=mask)" + (".to(tl.float32)" if wide else ""))
        body.append(f"tl.atomic_add(x_ptr + {' + '.join(xoff)}, v, mask=mask)" if accumulate else
                    f"tl.store(x_ptr + {' + '.join(xoff)}, v, mask=mask)")
        doc = (f"index_put{' (accumulate)' if accumulate else ''} into a copy of x at {len(tensors)} broadcast index "
               f"tensors, dims {dims}.")
    params = ["out_ptr", "x_ptr"] + [f"i{m}_ptr" for m in range(len(tensors))] + \
        [f"kdim{m}" for m in range(len(tensors))] + [f"sx{d}" for d in range(rx)] + \
        [f"si{m}_{q}" for m in range(len(tensors)) for q in range(rb)] + \
        ([] if put is None else ["v_ptr"] + [f"sv{d}" for d in range(r)])
    src = _kernel(name, doc, params, r, body)
    xv, iv, v = names[x], [names[t] for _, t in tensors], names[node]
    B = f"torch.broadcast_shapes({', '.join(f'{t}.shape' for t in iv)})"
    shape = f"[*{xv}.shape[:{dims[0]}], *_B, *{xv}.shape[{dims[-1] + 1}:]]" if adjacent else \
        f"[*_B, {''.join(f'{xv}.shape[{d}], ' for d in rest)}]"
    if put is None:
        args = [xv, *iv, *(f"{xv}.shape[{k}]" for k, _ in tensors), f"*{xv}.stride()",
                *(f"*{t}.expand(_B).stride()" for t in iv)]
        launch = [f"_B = {B}"] + _launch(name, v, shape, torch_dtype(dtype(node)), args)
        return src, launch, set()
    # the copy of x is glue; the kernel walks the indexed shape (out_ptr is unused: the copy is written)
    acc, head, tail = _write_copy(v, xv, node, wide)
    launch = head + [f"_B = {B}", f"_shape = {shape}", f"_vals = {names[put]}.expand(_shape)", "_n = _numel(_shape)",
                     f"if _n: {name}[(triton.cdiv(_n, BLOCK),)]({acc}, {acc}, {', '.join(iv)}, "
                     f"{', '.join(f'{xv}.shape[{k}]' for k, _ in tensors)}, *{acc}.stride(), "
                     f"{''.join(f'*{t}.expand(_B).stride(), ' for t in iv)}_vals, *_vals.stride(), _n, "
                     "*_shape[1:], BLOCK=BLOCK, num_warps=NUM_WARPS)"] + tail
    return src, launch, set()


def _write_copy(v: str, xv: str, node: fx.Node, wide: bool) -> tuple[str, list[str], list[str]]:
    """The copy of x that a scatter writes into (glue), in fp32 when fp16/bf16 is accumulated (bf16
    atomics are missing in the interpreter and on older GPUs), cast back after: (name, before, after)."""
    acc = "_acc" if wide else v
    dt = "torch.float32" if wide else torch_dtype(dtype(node))
    tail = [f"{v} = {acc}.to({torch_dtype(dtype(node))})"] if wide else []
    return acc, [f"{acc} = torch.empty({xv}.shape, dtype={dt}, device=dev)", f"{acc}.copy_({xv})"], tail


def index_put_kernel(name: str, node: fx.Node, names: dict[fx.Node, str], expr) -> tuple[str, list[str], set[str]]:  # noqa: ANN001
    """index_put(x, indices, values, accumulate): duplicate indices without accumulate leave one of the
    written values, as PyTorch documents for its own kernel."""
    x, indices, values = node.args[:3]
    accumulate = bool(node.args[3] if len(node.args) > 3 else node.kwargs.get("accumulate", False))
    tensors = [(k, t) for k, t in enumerate(indices) if t is not None]
    if not tensors or any(dtype(t).is_floating_point or dtype(t) == torch.bool for _, t in tensors) or \
            not isinstance(values, fx.Node):
        raise Unsupported(f"unsupported: {op_name(node)} with a mask index, no index tensor or a scalar value")
    if accumulate and dtype(node) in (torch.bool, torch.int8, torch.uint8, torch.int16):
        raise Unsupported(f"unsupported: {op_name(node)} accumulating {dtype(node)}")
    if val(x).dim() == 0:
        raise Unsupported(f"unsupported: {op_name(node)} of a 0-d tensor")
    return _index_multi(name, node, names, x, tensors, put=values, accumulate=accumulate)


def index_select_kernel(name: str, node: fx.Node, names: dict[fx.Node, str], expr) -> tuple[str, list[str], set[str]]:  # noqa: ANN001
    """index_select(x, dim, idx) is x[:, ..., idx] with a 1-d (or 0-d) idx at dim."""
    x, dim, it = node.args[:3]
    return _index_at(name, node, names, x, dim % max(val(x).dim(), 1), it)


def _index_at(name: str, node: fx.Node, names: dict[fx.Node, str], x: fx.Node, k: int,
              it: fx.Node) -> tuple[str, list[str], set[str]]:
    rx, ri = val(x).dim(), val(it).dim()
    select = packet(node) == "index_select"
    if select:
        ri = 1  # a 0-d index still keeps the dim (of size 1)
    scalar = select and rx == 0  # a 0-d x is read as [1] and the result is 0-d, as torch does
    if scalar:
        rx = 1
    elif rx == 0:
        raise Unsupported(f"unsupported: {op_name(node)} of a 0-d tensor")
    r = rx - 1 + ri
    pre, post = list(range(k)), list(range(k + 1, rx))
    ioff = " + ".join(f"j{k + d} * si{d}" for d in range(ri)) or "0"
    xoff = [f"j{d} * sx{d}" for d in pre] + ["kk * sx_k"] + [f"j{d - 1 + ri} * sx{d}" for d in post]
    body = [f"kk = tl.load(idx_ptr + {ioff}, mask=mask, other=0).to(tl.int64)", "kk = tl.where(kk < 0, kk + kdim, kk)",
            f"tl.store(out_ptr + offs, tl.load(x_ptr + {' + '.join(xoff)}, mask=mask), mask=mask)"]
    params = ["out_ptr", "x_ptr", "idx_ptr", "kdim", "sx_k"] + [f"sx{d}" for d in pre + post] + \
        [f"si{d}" for d in range(ri)]
    src = _kernel(name, f"x[{', '.join([':'] * k + ['idx'])}, ...]: one index tensor at dim {k}.", params, r, body)
    xv, iv = (f"{names[x]}.reshape([1])" if scalar else names[x]), names[it]
    ishape = f"{iv}.reshape(-1).shape" if select else f"{iv}.shape"
    shape = "[]" if scalar else f"[*{xv}.shape[:{k}], *{ishape}, *{xv}.shape[{k + 1}:]]"
    sx = [f"{xv}.stride({d})" for d in pre + post]
    launch = _launch(name, names[node], shape, torch_dtype(dtype(node)),
                     [xv, iv, f"{xv}.shape[{k}]", f"{xv}.stride({k})", *sx,
                      f"*{iv}.reshape(-1).stride()" if select else f"*{iv}.stride()"])
    return src, launch, set()


def scatter_kernel(name: str, node: fx.Node, names: dict[fx.Node, str], expr) -> tuple[str, list[str], set[str]]:  # noqa: ANN001
    """scatter(x, dim, index, src | value) and scatter_add: a copy of x, then one program per block of
    `index` elements writing (or atomically adding) src into the copy. Duplicate indices in a plain
    scatter leave one of the written values, as PyTorch documents for its own kernel."""
    from workbench.lowering.graph import packet

    x, dim, index, src = node.args[:4]
    reduce = node.kwargs.get("reduce") or (node.args[4] if len(node.args) > 4 else None)
    # hook: scatter_reduce.py's pull kernel takes reduce="multiply" (prod) and a scalar value added in a float
    # dtype (the fp32 accumulation below calls .to on the value, a Python float: fp16/bf16 failed there)
    if (reduce == "multiply" or (reduce == "add" and not isinstance(src, fx.Node))) and dtype(node).is_floating_point:
        from workbench.lowering.scatter_reduce import pull_kernel
        return pull_kernel(name, node, names, expr)
    add = packet(node) == "scatter_add" or reduce == "add"
    if reduce not in (None, "add") or (add and dtype(node) in (torch.bool, torch.int8, torch.uint8, torch.int16)):
        raise Unsupported(f"unsupported: {op_name(node)} with reduce={reduce!r} on {dtype(node)}")
    rx, r = val(x).dim(), val(index).dim()
    flat0 = min(rx, r) == 0 and max(rx, r) <= 1  # as in gather: a 0-d x or index makes every operand 1-d
    r = max(r, 1) if flat0 else r
    dim = dim % max(r, 1)
    ioff = " + ".join(f"j{d} * si{d}" for d in range(r)) or "0"
    coords = [f"j{d}" if d != dim else "k" for d in range(r)]
    ooff = " + ".join(f"{c} * so{d}" for d, c in enumerate(coords)) or "0"
    scalar = not isinstance(src, fx.Node)
    soff = " + ".join(f"j{d} * ss{d}" for d in range(r)) or "0"
    value = "sv" if scalar else f"tl.load(src_ptr + {soff}, mask=mask)"
    # fp16/bf16 scatter_add accumulates in an fp32 copy (bf16 atomics are missing in the interpreter and
    # on older GPUs; fp32 is also what eager's CPU kernel accumulates in), then casts back (glue)
    wide = add and dtype(node) in (torch.float16, torch.bfloat16)
    if wide:
        value = f"{value}.to(tl.float32)"
    write = f"tl.atomic_add(out_ptr + {ooff}, v, mask=mask)" if add else f"tl.store(out_ptr + {ooff}, v, mask=mask)"
    body = [f"k = tl.load(idx_ptr + {ioff}, mask=mask, other=0).to(tl.int64)", "k = tl.where(k < 0, k + kdim, k)",
            f"v = {value}", write]
    params = ["out_ptr", "idx_ptr", "sv" if scalar else "src_ptr", "kdim"] + [f"so{d}" for d in range(r)] + \
        [f"si{d}" for d in range(r)] + ([] if scalar else [f"ss{d}" for d in range(r)])
    lines = ["offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)", "mask = offs < n"]
    rest = "offs"
    for d in range(r - 1, 0, -1):
        lines += [f"j{d} = {rest} % isize{d}", f"_q{d} = {rest} // isize{d}"]
        rest = f"_q{d}"
    if r:
        lines.append(f"j0 = {rest}")
    lines += body
    sig = ", ".join(params + ["n"] + [f"isize{d}" for d in range(1, r)] + ["BLOCK: tl.constexpr"])
    doc = f"{'scatter_add' if add else 'scatter'} along dim {dim} into a copy of x."
    head = [f"@triton.jit\ndef {name}({sig}):", f'    """{doc}"""']
    src_text = "\n".join(head + ["    " + ln for ln in lines]) + "\n"
    xv, iv, v = names[x], _as_1d(names[index], flat0), names[node]
    sv = expr(src) if scalar else _as_1d(names[src], flat0)
    # the copy of x is glue (a layout copy); the scatter itself is the kernel
    acc, head, tail = _write_copy(v, xv, node, wide)
    launch = head + [f"_n = {iv}.numel()",
                     f"if _n: {name}[(triton.cdiv(_n, BLOCK),)]({acc}, {iv}, {sv}, {_as_1d(acc, flat0)}.shape[{dim}], "
                     f"*{_as_1d(acc, flat0)}.stride(), "
                     f"*{iv}.stride(), {'' if scalar else f'*{sv}.stride(), '}_n, *{iv}.shape[1:], BLOCK=BLOCK, "
                     "num_warps=NUM_WARPS)"] + tail
    return src_text, launch, set()


register("flip", Primitive("flip", TUNABLES, flip_kernel))
register("scatter", Primitive("scatter", TUNABLES, scatter_kernel))
register("scatter_add", Primitive("scatter", TUNABLES, scatter_kernel))
register("gather", Primitive("gather", TUNABLES, gather_kernel))
register("embedding", Primitive("embedding", TUNABLES, embedding_kernel))
register("index", Primitive("index", TUNABLES, index_kernel))
register("index_select", Primitive("index", TUNABLES, index_select_kernel))
register("index_put", Primitive("index_put", TUNABLES, index_put_kernel))
