"""Kernel templates: pointwise, reduction and matmul, each with a fused pointwise epilogue.

Each function returns (kernel source, launch lines). The launch lines run in the generated
forward: they allocate outputs (glue), build broadcast views (glue) and launch the kernel; every
size is read from the tensors at run time. Block sizes are module-level TUNABLES of the candidate.
"""
from __future__ import annotations

import torch.fx as fx

from workbench.lowering import pointwise as pw
from workbench.lowering.epilogue import Body, build_body, store_lines, torch_dtype
from workbench.lowering.graph import dtype, rank, val
from workbench.lowering.partition import Group
from workbench.lowering.primitives import register_helper, register_tunables

TUNABLE_DEFAULTS = {
    "BLOCK": ([256, 512, 1024, 2048, 4096], 1024),
    "NUM_WARPS": ([2, 4, 8], 4),
    "RED_BLOCK_M": ([1, 2, 4, 8, 16], 4),
    "RED_BLOCK_N": ([64, 128, 256, 512, 1024], 256),
    "MM_BLOCK_M": ([16, 32, 64, 128], 64),
    "MM_BLOCK_N": ([16, 32, 64, 128], 64),
    "MM_BLOCK_K": ([16, 32, 64], 32),
    "MM_NUM_WARPS": ([2, 4, 8], 4),
    "MM_NUM_STAGES": ([1, 2, 3, 4], 2),
}
register_tunables(TUNABLE_DEFAULTS)
register_helper("_mul_combine", """@triton.jit
def _mul_combine(a, b):
    return a * b
""")


def indent(lines: list[str], n: int = 4) -> list[str]:
    return [" " * n + ln for ln in lines]


def _input_args(body: Body, names: dict[fx.Node, str], shape: str) -> tuple[list[str], list[str], list[str]]:
    """(prep lines, pointer args, stride args) for the body's external inputs broadcast to `shape`."""
    prep, ptrs, strides = [], [], []
    for k, node in enumerate(body.inputs):
        e = f"_e{k}"
        prep.append(f"{e} = {names[node]}.expand({shape})")
        ptrs.append(e)
        strides.append(f"*{e}.stride()")
    return prep, ptrs, strides


def _alloc(body: Body, shape: str, outs: list[str]) -> list[str]:
    return [f"{o} = torch.empty({shape}, dtype={torch_dtype(dtype(n))}, device=dev)"
            for o, n in zip(outs, body.outputs)]


def pointwise_kernel(name: str, group: Group, mat: list[fx.Node],
                     names: dict[fx.Node, str]) -> tuple[str, list[str], set[str]]:
    r = rank(group.nodes[0])
    idx = [f"i{d}" for d in range(r)]
    body = build_body(group, mat, idx, "mask", "offs * 0")
    params = body.params(r)
    sizes = [f"size{d}" for d in range(1, r)]
    lines = ["pid = tl.program_id(0)", "offs = pid.to(tl.int64) * BLOCK + tl.arange(0, BLOCK)", "mask = offs < n"]
    if r:
        rest = "offs"
        for d in range(r - 1, 0, -1):
            lines.append(f"i{d} = {rest} % size{d}")
            lines.append(f"t{d} = {rest} // size{d}")
            rest = f"t{d}"
        lines.append(f"i0 = {rest}")
    lines += body.lines + store_lines(body, "offs", "mask")
    sig = ", ".join(params[:len(body.outputs) + len(body.inputs) + len(body.scalars)] + ["n"] + sizes
                    + params[len(body.outputs) + len(body.inputs) + len(body.scalars):] + ["BLOCK: tl.constexpr"])
    doc = f'    """Fused pointwise: {", ".join(n.name for n in group.nodes)} (rank {r}, broadcast by strides)."""'
    src = "\n".join([f"@triton.jit\ndef {name}({sig}):", doc] + indent(lines)) + "\n"
    # launch
    shape = "_shape"
    outs = [names[n] for n in body.outputs]
    ext = [names[n] for n in body.inputs]
    launch = [f"_shape = _bshape({', '.join(f'{e}.shape' for e in ext)})" if ext else
              f"_shape = {_static_shape(group.nodes[0])}"]
    launch += _alloc(body, shape, outs)
    prep, ptrs, strides = _input_args(body, names, shape)
    launch += prep
    launch.append("_n = _numel(_shape)")
    args = outs + ptrs + [names[s] for s in body.scalars] + ["_n"] + [f"_shape[{d}]" for d in range(1, r)] + strides
    launch.append(f"if _n: {name}[(triton.cdiv(_n, BLOCK),)]({', '.join(args)}, BLOCK=BLOCK, num_warps=NUM_WARPS)")
    return src, launch, body.helpers


def _static_shape(node: fx.Node) -> str:
    return repr([int(s) for s in val(node).shape])


REDUCE_INIT = {"sum": "0", "mean": "0", "nansum": "0", "prod": "1", "amax": "-inf", "amin": "inf", "max": "-inf",
               "min": "inf", "any": "0", "all": "1", "argmax": "-inf", "argmin": "inf", "var": "0"}


def _init_literal(kind: str, acc_dt) -> str:
    v = REDUCE_INIT[kind]
    if v in ("inf", "-inf"):
        if acc_dt.is_floating_point:
            return 'float("inf")' if v == "inf" else '-float("inf")'
        import torch

        info = torch.iinfo(acc_dt)
        return str(info.max if v == "inf" else info.min)
    return v


def reduction_dims(node: fx.Node) -> tuple[list[int], bool]:
    """(reduced dims, normalized and sorted; keepdim) of a reduction node."""
    from workbench.lowering.graph import packet

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
    if not dims:
        dims = list(range(r))
    return sorted({d % max(r, 1) for d in dims}) if r else [], keep


def reduction_kernel(name: str, group: Group, mat: list[fx.Node],
                     names: dict[fx.Node, str]) -> tuple[str, list[str], set[str]]:
    """Reduce x over `dims`: x is permuted so they are last and viewed as [M, N]; one program owns
    RED_BLOCK_M rows and walks N in RED_BLOCK_N chunks, accumulating in fp32 (int64 for integer sums)."""
    import torch

    from workbench.lowering.graph import packet

    anchor = group.anchor
    assert anchor is not None
    kind = packet(anchor)
    x = anchor.args[0]
    xr = rank(x)
    dims, keep = reduction_dims(anchor)
    kept = [d for d in range(xr) if d not in dims]
    tuple_out = isinstance(val(anchor), (tuple, list))
    out_node_val = val(anchor)[0] if tuple_out else val(anchor)
    out_rank = out_node_val.dim()
    xdt = dtype(x)
    if kind in ("any", "all"):
        acc_dt = torch.int32
    elif kind in ("argmax", "argmin", "max", "min", "amax", "amin"):
        acc_dt = pw.compute_dtype(xdt) if xdt != torch.bool else torch.int32
    elif kind == "sum" and not xdt.is_floating_point:
        acc_dt = torch.int64
    elif kind == "prod" and not xdt.is_floating_point:
        acc_dt = torch.int64
    else:
        acc_dt = pw.compute_dtype(xdt) if xdt.is_floating_point else torch.float32
    acc_tl = pw.TL_DTYPE[acc_dt]
    init = _init_literal(kind, acc_dt)
    idx = [f"o{d}" for d in range(out_rank)]
    res_val = pw.Val("r", pw.compute_dtype(out_node_val.dtype))
    anchor_vals = {anchor: res_val}
    body = build_body(group, [], idx, "rmask", "rows * 0", anchor_vals)
    lines = ["pid = tl.program_id(0)", "rows = pid.to(tl.int64) * RED_BLOCK_M + tl.arange(0, RED_BLOCK_M)",
             "rmask = rows < M"]
    load = "tl.load(x_ptr + rows[:, None] * x_sm + cols[None, :] * x_sn, mask=m, other={o})"
    cvt = f".to({acc_tl})" if acc_dt != xdt else ""
    if kind in ("any", "all"):
        cvt = ".to(tl.int32)" if xdt == torch.bool else " != 0).to(tl.int32"
    loop = ["for n0 in range(0, N, RED_BLOCK_N):", "    cols = n0 + tl.arange(0, RED_BLOCK_N)",
            "    m = rmask[:, None] & (cols[None, :] < N)"]

    def ld(other: str) -> str:
        s = load.format(o=other)
        if kind in ("any", "all") and xdt != torch.bool:
            return f"({s} != 0).to(tl.int32)"
        return s + cvt

    if kind in ("argmax", "argmin", "max", "min") and tuple_out or kind in ("argmax", "argmin"):
        cmp = ">" if kind in ("argmax", "max") else "<"
        lines += [f"best = tl.full([RED_BLOCK_M, RED_BLOCK_N], {init}, {acc_tl})",
                  "besti = tl.zeros([RED_BLOCK_M, RED_BLOCK_N], tl.int64)"]
        lines += loop + [f"    v = {ld(init)}",
                         f"    take = (v {cmp} best) | ((v != v) & (best == best))  # nan wins, as in torch",
                         "    best = tl.where(take & m, v, best)",
                         "    besti = tl.where(take & m, cols[None, :] + rows[:, None] * 0, besti)"]
        red = "tl.max" if cmp == ">" else "tl.min"
        lines += [f"rv = {red}(best, axis=1)",
                  "has_nan = tl.max((best != best).to(tl.int32), axis=1) > 0",
                  "hit = (best == rv[:, None]) | ((best != best) & has_nan[:, None])",
                  "ri = tl.min(tl.where(hit, besti, N), axis=1)",
                  "rv = tl.where(has_nan, float(\"nan\"), rv)" if acc_dt.is_floating_point else "rv = rv"]
        result = "ri" if kind in ("argmax", "argmin") else "rv"
    elif kind == "var":
        # aten.var.correction takes it by keyword; prims.var (from the norm decompositions) positionally
        corr = anchor.kwargs.get("correction", anchor.args[2] if len(anchor.args) > 2 else 1)
        corr = 1 if corr is None else corr
        lines += [f"acc = tl.zeros([RED_BLOCK_M, RED_BLOCK_N], {acc_tl})"]
        lines += loop + [f"    acc += {ld('0')}"]
        lines += ["mean = tl.sum(acc, axis=1) / N", f"acc2 = tl.zeros([RED_BLOCK_M, RED_BLOCK_N], {acc_tl})"]
        lines += loop + [f"    d = tl.where(m, {ld('0')} - mean[:, None], 0.0)", "    acc2 += d * d"]
        lines += [f"rv = tl.sum(acc2, axis=1) / tl.maximum(N - {pw.literal(corr)}, 0)"]
        result = "rv"
    else:
        op = {"sum": "acc + v", "mean": "acc + v", "nansum": "acc + tl.where(v != v, 0.0, v)", "prod": "acc * v",
              "amax": "tl.maximum(acc, v)", "amin": "tl.minimum(acc, v)", "max": "tl.maximum(acc, v)",
              "min": "tl.minimum(acc, v)", "any": "tl.maximum(acc, v)", "all": "tl.minimum(acc, v)"}[kind]
        lines += [f"acc = tl.full([RED_BLOCK_M, RED_BLOCK_N], {init}, {acc_tl})"]
        nanprop = kind in ("amax", "amin", "max", "min") and acc_dt.is_floating_point
        lines += loop + [f"    v = {ld(init)}", f"    acc = tl.where(m, {op}, acc)"]
        if nanprop:
            lines[-1:] = ["    acc = tl.where(m, tl.where(v != v, v, " + op + "), acc)  # nan propagates, as in torch"]
        fin = {"sum": "tl.sum(acc, axis=1)", "nansum": "tl.sum(acc, axis=1)", "mean": "tl.sum(acc, axis=1) / N",
               "prod": "tl.reduce(acc, 1, _mul_combine)", "amax": "tl.max(acc, axis=1)", "max": "tl.max(acc, axis=1)",
               "amin": "tl.min(acc, axis=1)", "min": "tl.min(acc, axis=1)", "any": "tl.max(acc, axis=1)",
               "all": "tl.min(acc, axis=1)"}[kind]
        if kind == "prod":
            body.helpers.add("_mul_combine")
        if nanprop:
            lines += ["has_nan = tl.max((acc != acc).to(tl.int32), axis=1) > 0",
                      f"rv = tl.where(has_nan, float(\"nan\"), {fin})"]
        else:
            lines += [f"rv = {fin}"]
        result = "rv"
    lines.append(f"r = {result}" + (" != 0" if out_node_val.dtype == torch.bool else ""))
    if out_node_val.dtype == torch.bool:
        res_val.dtype = torch.bool
    if out_rank and group.nodes:
        rest = "rows"
        for d in range(out_rank - 1, 0, -1):
            lines += [f"o{d} = {rest} % osize{d}", f"q{d} = {rest} // osize{d}"]
            rest = f"q{d}"
        lines.append(f"o0 = {rest}")
    lines += body.lines
    body.values[anchor] = res_val  # type: ignore[attr-defined]
    # stores: the anchor (values, plus indices for max/min.dim) and the epilogue outputs
    stores = []
    anchor_outs = 2 if tuple_out else (1 if anchor in mat else 0)
    if tuple_out:
        rv_out = pw.narrow("rv", out_node_val.dtype, body.helpers) if acc_dt == torch.float32 and \
            out_node_val.dtype != torch.float32 else f"rv.to({pw.TL_DTYPE[out_node_val.dtype]})"
        stores += [f"tl.store(out0_ptr + rows, {rv_out}, mask=rmask)",
                   "tl.store(out1_ptr + rows, ri, mask=rmask)"]
    body.outputs = [n for n in mat if n is not anchor]
    if anchor in mat and not tuple_out:
        body.outputs = [anchor] + body.outputs
    st = store_lines(body, "rows", "rmask")
    if tuple_out:
        st = [s.replace("out", "outE", 1) for s in st]
    lines += stores + st
    out_params = [f"out{j}_ptr" for j in range(anchor_outs if tuple_out else 0)] + \
        [f"{'outE' if tuple_out else 'out'}{j}_ptr" for j in range(len(body.outputs))]
    in_params = [f"in{k}_ptr" for k in range(len(body.inputs))] + [f"sc{k}" for k in range(len(body.scalars))]
    strides = [f"in{k}_s{d}" for k in range(len(body.inputs)) for d in range(out_rank)]
    sizes = [f"osize{d}" for d in range(1, out_rank)]
    sig = ", ".join(["x_ptr"] + out_params + in_params + ["M", "N", "x_sm", "x_sn"] + sizes + strides +
                    ["RED_BLOCK_M: tl.constexpr", "RED_BLOCK_N: tl.constexpr"])
    doc = (f'    """{kind} over the last axis of x viewed as [M, N] (dims {dims} of a rank-{xr} input), '
           f'epilogue: {", ".join(n.name for n in group.nodes) or "none"}."""')
    src = "\n".join([f"@triton.jit\ndef {name}({sig}):", doc] + indent(lines)) + "\n"
    # launch: permute the reduced dims last, view as [M, N]
    xv = names[x]
    perm = kept + dims
    launch = []
    # explicit sizes, not -1: a zero-size input makes -1 ambiguous
    m_expr = f"_numel([{xv}.shape[d] for d in {kept}])"
    n_expr = f"_numel([{xv}.shape[d] for d in {dims}])"
    if perm != list(range(xr)):
        launch.append(f"_x = {xv}.permute({perm}).reshape({m_expr}, {n_expr})")
    else:
        launch.append(f"_x = {xv}.reshape({m_expr}, {n_expr})" if xr else
                      f"_x = {xv}.reshape(1, 1)")
    if keep:
        oshape = "[" + ", ".join("1" if d in dims else f"{xv}.shape[{d}]" for d in range(xr)) + "]"
    else:
        oshape = "[" + ", ".join(f"{xv}.shape[{d}]" for d in kept) + "]"
    launch.append(f"_shape = {oshape}")
    outs = [names[anchor] + "_0", names[anchor] + "_1"] if tuple_out else [names[n] for n in body.outputs]
    all_outs = list(outs)
    if tuple_out:
        launch.append(f"{outs[0]} = torch.empty(_shape, dtype={torch_dtype(out_node_val.dtype)}, device=dev)")
        launch.append(f"{outs[1]} = torch.empty(_shape, dtype=torch.int64, device=dev)")
        ep_outs = [names[n] for n in body.outputs]
        all_outs = outs[:2] + ep_outs
    else:
        ep_outs = outs
    launch += [f"{o} = torch.empty(_shape, dtype={torch_dtype(dtype(n))}, device=dev)"
               for o, n in zip(ep_outs, body.outputs)]
    prep, ptrs, strd = _input_args(body, names, "_shape")
    launch += prep
    launch.append("_M, _N = _x.shape")
    args = ["_x"] + all_outs + ptrs + [names[s] for s in body.scalars] + ["_M", "_N", "*_x.stride()"] + \
        [f"_shape[{d}]" for d in range(1, out_rank)] + strd
    launch.append(f"if _M: {name}[(triton.cdiv(_M, RED_BLOCK_M),)]({', '.join(args)}, RED_BLOCK_M=RED_BLOCK_M, "
                  "RED_BLOCK_N=RED_BLOCK_N, num_warps=NUM_WARPS)")
    return src, launch, body.helpers


def matmul_kernel(name: str, group: Group, mat: list[fx.Node], names: dict[fx.Node, str],
                  precision: str) -> tuple[str, list[str], set[str]]:
    """C[b] = A[b] @ B[b] tiled MM_BLOCK_M x MM_BLOCK_N, K walked in MM_BLOCK_K steps, fp32 accumulator;
    mm is the B = 1 case. The epilogue (bias, activation, scale) runs on the accumulator tile."""
    import torch

    anchor = group.anchor
    assert anchor is not None
    a, b = anchor.args[:2]
    batched = rank(anchor) == 3
    out_dt = dtype(anchor)
    if not (out_dt.is_floating_point and dtype(a) == dtype(b)):
        from workbench.lowering.graph import op_name

        raise_unsupported = f"unsupported: {op_name(anchor)} on {dtype(a)} x {dtype(b)}"
        from workbench.lowering.epilogue import Unsupported

        raise Unsupported(raise_unsupported)
    idx = (["pid_b"] if batched else []) + ["rm[:, None]", "rn[None, :]"]
    res = pw.Val("acc", torch.float64 if out_dt == torch.float64 else torch.float32)
    body = build_body(group, [], idx, "cmask", "(rm[:, None] * 0 + rn[None, :] * 0)", {anchor: res})
    body.outputs = ([anchor] if anchor in mat else []) + [n for n in mat if n is not anchor]
    body.values[anchor] = res  # type: ignore[attr-defined]
    acc_tl = pw.TL_DTYPE[res.dtype]
    bf16 = dtype(a) == torch.bfloat16
    prec = f', input_precision="{precision}"' if dtype(a) == torch.float32 else ""
    lines = ["pid_m = tl.program_id(0)", "pid_n = tl.program_id(1)", "pid_b = tl.program_id(2).to(tl.int64)",
             "rm = pid_m * MM_BLOCK_M + tl.arange(0, MM_BLOCK_M)", "rn = pid_n * MM_BLOCK_N + tl.arange(0, MM_BLOCK_N)",
             "rk = tl.arange(0, MM_BLOCK_K)",
             "a_ptrs = a_ptr + pid_b * a_sb + rm[:, None] * a_sm + rk[None, :] * a_sk",
             "b_ptrs = b_ptr + pid_b * b_sb + rk[:, None] * b_sk + rn[None, :] * b_sn",
             f"acc = tl.zeros([MM_BLOCK_M, MM_BLOCK_N], {acc_tl})",
             "for k0 in range(0, K, MM_BLOCK_K):",
             "    a = tl.load(a_ptrs, mask=(rm[:, None] < M) & (rk[None, :] + k0 < K), other=0.0)",
             "    b = tl.load(b_ptrs, mask=(rk[:, None] + k0 < K) & (rn[None, :] < N), other=0.0)",
             *(["    if DOT_F32:  # Triton's interpreter computes bf16 tl.dot wrongly: fp32 there",
                "        a = a.to(tl.float32)", "        b = b.to(tl.float32)"] if bf16 else []),
             f"    acc += tl.dot(a, b{prec})",
             "    a_ptrs += MM_BLOCK_K * a_sk",
             "    b_ptrs += MM_BLOCK_K * b_sk",
             "cmask = (rm[:, None] < M) & (rn[None, :] < N)"]
    lines += body.lines + store_lines(body, "pid_b * M * N + rm[:, None] * N + rn[None, :]", "cmask")
    r = 3 if batched else 2
    sig = ", ".join(["a_ptr", "b_ptr"] + [f"out{j}_ptr" for j in range(len(body.outputs))] +
                    [f"in{k}_ptr" for k in range(len(body.inputs))] + [f"sc{k}" for k in range(len(body.scalars))] +
                    ["M", "N", "K", "a_sb", "a_sm", "a_sk", "b_sb", "b_sk", "b_sn"] +
                    [f"in{k}_s{d}" for k in range(len(body.inputs)) for d in range(r)] +
                    ["MM_BLOCK_M: tl.constexpr", "MM_BLOCK_N: tl.constexpr", "MM_BLOCK_K: tl.constexpr"] +
                    (["DOT_F32: tl.constexpr"] if bf16 else []))
    doc = (f'    """{"bmm" if batched else "mm"} with an fp32 accumulator; epilogue: '
           f'{", ".join(n.name for n in group.nodes) or "none"}."""')
    src = "\n".join([f"@triton.jit\ndef {name}({sig}):", doc] + indent(lines)) + "\n"
    av, bv = names[a], names[b]
    launch = []
    if batched:
        launch += [f"_B, _M, _K = {av}.shape", f"_N = {bv}.shape[2]", "_shape = [_B, _M, _N]",
                   f"_sa = {av}.stride()", f"_sb = {bv}.stride()"]
    else:
        launch += [f"_M, _K = {av}.shape", f"_N = {bv}.shape[1]", "_B = 1", "_shape = [_M, _N]",
                   f"_sa = (0, *{av}.stride())", f"_sb = (0, *{bv}.stride())"]
    outs = [names[n] for n in body.outputs]
    launch += [f"{o} = torch.empty(_shape, dtype={torch_dtype(dtype(n))}, device=dev)"
               for o, n in zip(outs, body.outputs)]
    prep, ptrs, strd = _input_args(body, names, "_shape")
    launch += prep
    args = [av, bv] + outs + ptrs + [names[s] for s in body.scalars] + \
        ["_M", "_N", "_K", "_sa[0]", "_sa[1]", "_sa[2]", "_sb[0]", "_sb[1]", "_sb[2]"] + strd
    launch.append(f"if _M and _N and _B: {name}[(triton.cdiv(_M, MM_BLOCK_M), triton.cdiv(_N, MM_BLOCK_N), _B)]("
                  f"{', '.join(args)}, "
                  "MM_BLOCK_M=MM_BLOCK_M, MM_BLOCK_N=MM_BLOCK_N, MM_BLOCK_K=MM_BLOCK_K, num_warps=MM_NUM_WARPS, "
                  f"num_stages=MM_NUM_STAGES{', DOT_F32=_DOT_F32' if bf16 else ''})")
    return src, launch, body.helpers
