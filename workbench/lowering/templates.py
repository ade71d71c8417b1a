"""Kernel templates: pointwise, reduction and matmul, each with a fused pointwise epilogue.

Each function returns (kernel source, launch lines). The launch lines run in the generated
forward: they allocate outputs (glue), build broadcast views (glue) and launch the kernel; every
size is read from the tensors at run time. Block sizes are module-level TUNABLES of the candidate.
"""
from __future__ import annotations

import torch.fx as fx

from workbench.lowering import cat_chain
from workbench.lowering import pointwise as pw
from workbench.lowering.epilogue import Body, build_body, store_lines, torch_dtype
from workbench.lowering.families import Family, Space, register_family, register_space
from workbench.lowering.graph import dtype, packet, rank, reduction_dims, val
from workbench.lowering.partition import Group
from workbench.lowering.primitives import register_helper, register_tunables

TUNABLE_DEFAULTS = {
    "BLOCK": ([256, 512, 1024, 2048, 4096], 1024),
    "NUM_WARPS": ([2, 4, 8], 4),
    "RED_BLOCK_M": ([1, 2, 4, 8, 16], 4),
    "RED_BLOCK_N": ([64, 128, 256, 512, 1024], 256),
    # programs a split reduction aims for (`_red_split`): a schedule that depends on the shape (few long rows
    # want many programs per row; a loss over 2**30 elements reads at full bandwidth only with enough loads in
    # flight: 1056 programs of 4 warps are 8 an SM, 32 warps, where 528 left half the SM's warp slots empty)
    "RED_SPLIT_PROGS": ([264, 528, 1056, 2112], 1056),
    "MM_BLOCK_M": ([16, 32, 64, 128], 64),
    "MM_BLOCK_N": ([16, 32, 64, 128], 64),
    "MM_BLOCK_K": ([16, 32, 64], 32),
    "MM_NUM_WARPS": ([2, 4, 8], 4),
    "MM_NUM_STAGES": ([1, 2, 3, 4], 2),
    "MM_GROUP_M": ([1, 4, 8, 16], 8),
    "MM_PRECISION": (["ieee", "tf32x3"], "ieee"),
}
register_tunables(TUNABLE_DEFAULTS)
register_helper("_mul_combine", """@triton.jit
def _mul_combine(a, b):
    return a * b
""")


def indent(lines: list[str], n: int = 4) -> list[str]:
    return [" " * n + ln for ln in lines]


def mm_shape_lines(av: str, bv: str, batched: bool) -> list[str]:
    """A (b)mm launch's sizes and operand strides (`_B, _M, _N, _K`, `_shape`, `_sa`, `_sb`; a 2-d mm as one
    batch of stride 0), shared by the float and the integer matmul templates."""
    if batched:
        return [f"_B, _M, _K = {av}.shape", f"_N = {bv}.shape[2]", "_shape = [_B, _M, _N]",
                f"_sa = {av}.stride()", f"_sb = {bv}.stride()"]
    return [f"_M, _K = {av}.shape", f"_N = {bv}.shape[1]", "_B = 1", "_shape = [_M, _N]",
            f"_sa = (0, *{av}.stride())", f"_sb = (0, *{bv}.stride())"]


def _input_args(body: Body, names: dict[fx.Node, str], shape: str) -> tuple[list[str], list[str], list[str]]:
    """(prep lines, pointer args, stride args) for the body's external inputs broadcast to `shape`."""
    prep, ptrs, strides = [], [], []
    for k, node in enumerate(body.inputs):
        e = f"_e{k}"
        prep.append(f"{e} = {names[node]}.expand({shape})")
        ptrs.append(e)
        strides.append(f"*{e}.stride()")
    return prep, ptrs, strides


def pointwise_kernel(name: str, group: Group, mat: list[fx.Node],
                     names: dict[fx.Node, str]) -> tuple[str, list[str], set[str]]:
    r = rank(group.nodes[0])
    idx = [f"i{d}" for d in range(r)]
    body = build_body(group, mat, idx, "mask", "offs * 0")
    params = body.params(r)
    sizes = [f"size{d}" for d in range(1, r)]
    # 32-bit index math unless an offset can pass 2**31 (`_idx64`): the rank-r split of each offset is a
    # div/mod per dim and element, and a 64-bit one costs several times the 32-bit one on the GPU
    # SWZ (`_swizzle`): the programs walk dim 0 fastest (n0 rows of n // n0 elements, a whole number of blocks),
    # so that those in flight together read one block of an operand broadcast along dim 0 (a LayerNorm's 16 MB
    # weight and bias over its batch) and it comes from DRAM once, not once per row (40_LayerNorm's apply moved
    # 1 GB for its 0.5: 338 us on the H100, where a copy of x takes 182)
    lines = ["pid = tl.program_id(0)", "if IDX64:", "    p = pid.to(tl.int64)", "else:", "    p = pid",
             "if SWZ:", "    base = (p % n0) * (n // n0) + (p // n0) * BLOCK", "else:", "    base = p * BLOCK",
             "offs = base + tl.arange(0, BLOCK)", "mask = offs < n"]
    if r:
        rest = "offs"
        for d in range(r - 1, 0, -1):
            lines.append(f"i{d} = {rest} % size{d}")
            lines.append(f"t{d} = {rest} // size{d}")
            rest = f"t{d}"
        lines.append(f"i0 = {rest}")
    # an output stored into its slice of a cat's buffer (cat_chain.py) is addressed by its strides (coalesced
    # with the inputs'); of rank 1 the slice is contiguous
    strided = [j for j, n in enumerate(body.outputs) if n in group.into] if r > 1 else []
    lines += body.lines + store_lines(body, [" + ".join(f"i{d} * out{j}_s{d}" for d in range(r)) if j in strided
                                             else "offs" for j in range(len(body.outputs))], "mask")
    sig = ", ".join(params[:len(body.outputs) + len(body.inputs) + len(body.scalars)] + ["n", "n0"] + sizes
                    + params[len(body.outputs) + len(body.inputs) + len(body.scalars):] +
                    [f"out{j}_s{d}" for j in strided for d in range(r)] +
                    ["BLOCK: tl.constexpr", "IDX64: tl.constexpr", "SWZ: tl.constexpr"])
    doc = f'    """Fused pointwise: {", ".join(n.name for n in group.nodes)} (rank {r}, broadcast by strides)."""'
    src = "\n".join([f"@triton.jit\ndef {name}({sig}):", doc] + indent(lines)) + "\n"
    # launch
    shape = "_shape"
    outs = [names[n] for n in body.outputs]
    ext = [names[n] for n in body.inputs]
    launch = [f"_shape = _bshape({', '.join(f'{e}.shape' for e in ext)})" if ext else
              f"_shape = {_static_shape(group.nodes[0])}"]
    launch += cat_chain.out_lines(body.outputs, names, shape, group.into)
    prep, ptrs, strides = _input_args(body, names, shape)
    launch += prep
    launch.append("_n = _numel(_shape)")
    views = [outs[j] for j in strided]
    # adjacent dims merged where every input's strides allow (`_coalesce`): a norm's apply over [B, C, H, W]
    # with x, its per-row statistics and a [C, H, W] weight splits its flat index once, not three times
    if r > 1:
        launch.append(f"_cs, _cst = _coalesce(_shape{''.join(', ' + x for x in ptrs + views)})")
        launch.append("_n0, _swz = _swizzle(_cs, _cst, BLOCK)")
        sizes = [f"_cs[{d}]" for d in range(1, r)]
        strides = [f"*_cst[{k}]" for k in range(len(ptrs) + len(views))]
    else:
        launch.append("_n0, _swz = 1, False")
        sizes = []
    args = outs + ptrs + [names[s] for s in body.scalars] + ["_n", "_n0"] + sizes + strides
    launch.append(f"if _n: {name}[(triton.cdiv(_n, BLOCK),)]({', '.join(args)}, BLOCK=BLOCK, num_warps=NUM_WARPS, "
                  f"IDX64=_idx64(_n{''.join(', ' + x for x in ptrs + views)}), SWZ=_swz)")
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


ARG_KINDS = ("argmax", "argmin")


def _red_acc_dtype(kind: str, xdt):  # noqa: ANN001, ANN202 - torch dtypes
    import torch

    if kind in ("any", "all"):
        return torch.int32
    if kind in ("argmax", "argmin", "max", "min", "amax", "amin"):
        return pw.compute_dtype(xdt) if xdt != torch.bool else torch.int32
    if kind in ("sum", "prod") and not xdt.is_floating_point:
        return torch.int64
    return pw.compute_dtype(xdt) if xdt.is_floating_point else torch.float32


# the chunk walk shared by every kind: this program's columns are [n_lo, n_hi) (a split's chunk in phase 1,
# the whole row otherwise); X2: the columns are two strided groups (col // N2, col % N2), so that a
# reduction over dims (0, 2, 3) reads its input in place; K2: the rows likewise (a softmax over dim 1)
# K2 (rows in two groups: a reduction over a middle dim, [B, N, M2] reduced over N): a program's rows lie in
# one group, so that a contiguous inner group (x_sm2 == 1) is read as RED_BLOCK_M consecutive elements that the
# compiler sees as contiguous and coalesces (`(rows // M2) * x_sm + (rows % M2)` hid that: 47_Sum over dim 1
# ran at 0.55x eager on the H200); the grid has (M // M2) * cdiv(M2, RED_BLOCK_M) programs then
RED_ROWS = ["pid = tl.program_id(0)",
            "if K2:", "    nmb = tl.cdiv(M2, RED_BLOCK_M)", "    grp = (pid // nmb).to(tl.int64)",
            "    mi = (pid % nmb) * RED_BLOCK_M + tl.arange(0, RED_BLOCK_M)", "    rows = grp * M2 + mi",
            "    rmask = mi < M2", "    roff = grp * x_sm + mi.to(tl.int64) * x_sm2",
            "else:", "    rows = pid.to(tl.int64) * RED_BLOCK_M + tl.arange(0, RED_BLOCK_M)", "    rmask = rows < M",
            "    roff = rows * x_sm"]
# the launch's block sizes: fewer rows than a block holds (a full reduction: one): the block's rows go to its
# width instead, and rows shorter than the block (a softmax over 16 channels): its width goes to more rows; a
# contiguous inner row group (K2, stride 1) takes a wide row block and a short column block (coalesced reads)
RED_BLOCKS = ["_rbm = min(RED_BLOCK_M, triton.next_power_of_2(max(_M, 1)))",
              "_rbn = min(RED_BLOCK_N * (RED_BLOCK_M // _rbm), 4096)",
              "_rbn2 = min(_rbn, max(16, triton.next_power_of_2(max(_N, 1))))",
              "_rbm = min(_rbm * (_rbn // _rbn2), 256, triton.next_power_of_2(max(_M, 1)))",
              "_rbn = _rbn2",
              "if _k2 and _sm2 == 1:",
              "    _rbm = min(128, triton.next_power_of_2(max(_m2, 1)))",  # an empty tensor's groups: 0
              "    _rbn = max(8, min(RED_BLOCK_M * RED_BLOCK_N // _rbm, 64, triton.next_power_of_2(max(_N, 1))))",
              "_grid = (_M // max(_m2, 1)) * triton.cdiv(_m2, _rbm) if _k2 else triton.cdiv(_M, _rbm)"]
_RED_INDEX = RED_ROWS + [
              "if PHASE == 1:", "    n_lo = tl.program_id(1).to(tl.int64) * CHUNK",
              "    n_hi = tl.minimum(n_lo + CHUNK, N)", "else:", "    n_lo = 0", "    n_hi = N"]
# columns in two groups (X2) without an int64 division and modulo per element (a reduction over (0, 2, 3), a
# hinge loss's target broadcast along the rows): X2 == 3, the inner group N2 a multiple of the block: a block
# lies in one group (one scalar division; the columns stay a contiguous range, so loads vectorize); X2 == 2,
# N2 at least a block wide: a block crosses at most one group boundary; X2 == 1: the exact split per element
_RED_LOOP = ["for n0 in range(n_lo, n_hi, RED_BLOCK_N):", "    cols = n0 + tl.arange(0, RED_BLOCK_N)",
             "    m = rmask[:, None] & (cols[None, :] < n_hi)",
             "    if X2 == 3:", "        ca = n0 // N2", "        cb = (n0 - ca * N2) + tl.arange(0, RED_BLOCK_N)",
             "    elif X2 == 2:", "        cq = n0 // N2", "        cb = (n0 - cq * N2) + tl.arange(0, RED_BLOCK_N)",
             "        ov = cb >= N2", "        ca = tl.where(ov, cq + 1, cq)", "        cb = tl.where(ov, cb - N2, cb)",
             "    elif X2:", "        ca = cols // N2", "        cb = cols % N2",
             "    if X2:", "        coff = ca * x_sn + cb * x_sn2", "    else:",
             "        coff = cols * x_sn"]
_RED_LOAD = "tl.load(x_ptr + roff[:, None] + coff[None, :], mask=m, other={o})"


def _red_loader(kind: str, xdt, acc_dt):  # noqa: ANN001, ANN202
    """other -> the load of a chunk converted to the accumulator dtype (0/1 int32 for any/all)."""
    import torch

    acc_tl = pw.TL_DTYPE[acc_dt]

    def ld(other: str) -> str:
        s = _RED_LOAD.format(o=other)
        if kind in ("any", "all"):
            return f"{s}.to(tl.int32)" if xdt == torch.bool else f"({s} != 0).to(tl.int32)"
        return s + (f".to({acc_tl})" if acc_dt != xdt else "")
    return ld


def _red_arg_lines(kind: str, tuple_out: bool, init: str, acc_tl: str, acc_dt, ld) -> list[str]:  # noqa: ANN001
    """argmax/argmin and max/min.dim (values and indices): one program per row block, no split."""
    cmp = ">" if kind in ("argmax", "max") else "<"
    lines = [f"best = tl.full([RED_BLOCK_M, RED_BLOCK_N], {init}, {acc_tl})",
             "besti = tl.zeros([RED_BLOCK_M, RED_BLOCK_N], tl.int64)"]
    lines += _RED_LOOP + [f"    v = {ld(init)}",
                          f"    take = (v {cmp} best) | ((v != v) & (best == best))  # nan wins, as in torch",
                          "    best = tl.where(take & m, v, best)",
                          "    besti = tl.where(take & m, cols[None, :] + rows[:, None] * 0, besti)"]
    red = "tl.max" if cmp == ">" else "tl.min"
    lines += [f"rv = {red}(best, axis=1)",
              "has_nan = tl.max((best != best).to(tl.int32), axis=1) > 0",
              # a row with a nan names its first nan only (not a lane holding the finite extreme at a smaller
              # index: masked.argmax's [3.6, nan, ..] gave 0, eager 1), whatever tl.max makes of the nan
              "hit = tl.where(has_nan[:, None], best != best, best == rv[:, None])",
              "ri = tl.min(tl.where(hit, besti, N), axis=1)",
              "rv = tl.where(has_nan, float(\"nan\"), rv)" if acc_dt.is_floating_point else "rv = rv"]
    return lines


def _red_var_lines(corr, acc_tl: str, ld, load: list[str] | None = None) -> list[str]:  # noqa: ANN001
    """Variance and mean in one pass over x: each lane keeps Welford's (count, mean, M2) (Welford 1962; the
    update is one division per element, exact enough where a sum of squares cancels), the lanes are then
    combined by Chan et al.'s formula. Phase 1 stores each chunk's (mean, M2), phase 2 combines them with each
    split's count, min(CHUNK, NTOT - s * CHUNK). Was two passes over each chunk (x read twice). `load`: the
    chunk load with a prologue (`_red_prologue`). Leaves `mean` and `rv` (the variance) per row."""
    c = pw.literal(corr)
    zeros = f"tl.zeros([RED_BLOCK_M, RED_BLOCK_N], {acc_tl})"
    one_pass = [f"mu_l = {zeros}", f"m2_l = {zeros}", f"n_l = {zeros}"] + _RED_LOOP + \
        (load or [f"    v = {ld('0')}"]) + [
            f"    n_new = n_l + m.to({acc_tl})",
            "    d = tl.where(m, v - mu_l, 0.0)",
            "    mu_l += d / tl.maximum(n_new, 1.0)",
            "    m2_l += tl.where(m, d * (v - mu_l), 0.0)",
            "    n_l = n_new",
            "cnt = tl.maximum(tl.sum(n_l, axis=1), 1.0)",
            "mean = tl.sum(mu_l * n_l, axis=1) / cnt",
            "dm = tl.where(n_l > 0, mu_l - mean[:, None], 0.0)",
            "m2 = tl.sum(m2_l + n_l * dm * dm, axis=1)"]
    acc = zeros
    ld_m2 = ld("0").replace("x_ptr + ", "x_ptr + M * x_sm + ", 1)
    combine = [f"acc = {acc}"] + _RED_LOOP + [
        "    ns = tl.minimum(CHUNK, NTOT - cols[None, :] * CHUNK).to(tl.float32)",
        f"    acc += tl.where(m, ns * {ld('0')}, 0.0)",
        "mean = tl.sum(acc, axis=1) / NTOT", f"acc2 = {acc}"] + _RED_LOOP + [
        "    ns = tl.minimum(CHUNK, NTOT - cols[None, :] * CHUNK).to(tl.float32)",
        f"    d = {ld('0')} - mean[:, None]",
        f"    acc2 += tl.where(m, {ld_m2} + ns * d * d, 0.0)",
        "m2 = tl.sum(acc2, axis=1)"]
    return (["if PHASE == 2:"] + indent(combine) + ["else:"] + indent(one_pass) +
            [f"rv = m2 / tl.maximum(NTOT - {c}, 0)"])


def _red_lse_lines(ld) -> list[str]:  # noqa: ANN001
    """sum(exp(x - amax(x))) and amax(x) in one pass (online rescaling: Milakov and Gimelshein 2018, as the
    softmax kernel's first pass): each lane keeps a running max and the sum rescaled to it. Phase 1 stores each
    chunk's (max, sum), phase 2 combines them the same way. As eager: a nan makes both nan, an +inf the sum
    nan (inf - inf), a row of -inf a nan sum. Leaves `mx` and `rv` (the sum) per row."""
    ninf = '-float("inf")'
    online = ["    m_new = tl.where(m_i != m_i, m_i, tl.maximum(m_i, pm))", "    m_new = tl.where(pm != pm, pm, m_new)",
              "    live = m_new != -float(\"inf\")",
              "    s_i = tl.where(live, s_i * tl.exp(m_i - m_new) + ps * tl.exp(pm - m_new), s_i)",
              "    s_i = tl.where(pm != pm, pm, s_i)", "    m_i = m_new"]
    ld_s = ld("0").replace("x_ptr + ", "x_ptr + M * x_sm + ", 1)
    combine = _RED_LOOP + [f"    pm = {ld(ninf)}", f"    ps = {ld_s}"] + online
    one_pass = _RED_LOOP + [f"    pm = {ld(ninf)}", "    ps = tl.where(m, 1.0, 0.0)"] + online
    return ([f"m_i = tl.full([RED_BLOCK_M, RED_BLOCK_N], {ninf}, tl.float32)",
             "s_i = tl.zeros([RED_BLOCK_M, RED_BLOCK_N], tl.float32)", "if PHASE == 2:"] + indent(combine) +
            ["else:"] + indent(one_pass) +
            ["has_nan = tl.max((m_i != m_i).to(tl.int32), axis=1) > 0",
             "mx = tl.where(has_nan, float(\"nan\"), tl.max(m_i, axis=1))",
             f"rv = tl.sum(tl.where(m_i == {ninf}, 0.0, s_i * tl.exp(m_i - mx[:, None])), axis=1)",
             "if PHASE != 1:  # a chunk of -inf is a 0 partial; a row of them is nan, as x - amax is",
             f"    rv = tl.where(mx == {ninf}, float(\"nan\"), rv)"])


_RED_OP = {"sum": "acc + v", "mean": "acc + v", "nansum": "acc + tl.where(v != v, 0.0, v)", "prod": "acc * v",
           "amax": "tl.maximum(acc, v)", "amin": "tl.minimum(acc, v)", "max": "tl.maximum(acc, v)",
           "min": "tl.minimum(acc, v)", "any": "tl.maximum(acc, v)", "all": "tl.minimum(acc, v)"}
_RED_FIN = {"sum": "tl.sum(acc, axis=1)", "nansum": "tl.sum(acc, axis=1)", "mean": "tl.sum(acc, axis=1) / DIVN",
            "prod": "tl.reduce(acc, 1, _mul_combine)", "amax": "tl.max(acc, axis=1)", "max": "tl.max(acc, axis=1)",
            "amin": "tl.min(acc, axis=1)", "min": "tl.min(acc, axis=1)", "any": "tl.max(acc, axis=1)",
            "all": "tl.min(acc, axis=1)"}


def _prologue_inputs(group: Group) -> list[fx.Node]:
    """The tensors a reduction's prologue reads from outside it, in first-use order."""
    from workbench.lowering.graph import is_tensor_node

    cone = set(group.prologue)
    out: list[fx.Node] = []
    for n in group.prologue:
        for a in n.all_input_nodes:
            if a not in cone and is_tensor_node(a) and a not in out:
                out.append(a)
    return out


def prologue_source(group: Group) -> fx.Node | None:
    """The one tensor a reduction's prologue reads when it has x's shape (loaded through x's view, as an
    unprologued x); None when the prologue reads several tensors or a broadcast one (`pin` inputs, each
    through its own strides)."""
    from workbench.lowering.graph import shape_key

    ins = _prologue_inputs(group)
    x = group.anchor.args[0] if group.anchor is not None else None
    if len(ins) == 1 and x is not None and shape_key(ins[0]) == shape_key(x):
        return ins[0]
    return None


# the row part of a `pin` input's offset (the column part is in the loop): as x's, through its own strides
_PIN_ROWS = ["if K2:", "    pro{k} = grp * pin{k}_sm + mi.to(tl.int64) * pin{k}_sm2", "else:",
             "    pro{k} = rows * pin{k}_sm"]
_PIN_COLS = ["if X2:", "    pco{k} = ca * pin{k}_sn + cb * pin{k}_sn2", "else:", "    pco{k} = cols * pin{k}_sn"]


def _ws_code(expr: str, dt, mixed: bool, store: bool) -> str:  # noqa: ANN001
    """A partial as the workspace holds it: itself, or, when co-reductions of different accumulator dtypes share
    one int64 workspace (`mixed`), its bits (fp32 through int32, fp64 as int64); `store`: to it, else back."""
    import torch

    if not mixed or dt == torch.int64:
        return expr
    if dt == torch.float32:
        return f"{expr}.to(tl.int32, bitcast=True).to(tl.int64)" if store else \
            f"{expr}.to(tl.int32).to(tl.float32, bitcast=True)"
    assert dt == torch.float64, f"no workspace code for {dt}"
    return f"{expr}.to(tl.int64, bitcast=True)" if store else f"{expr}.to(tl.float64, bitcast=True)"


def _red_prologue(group: Group, init: str, acc_tl: str, helpers: set[str], partials: bool = True,
                  co: list[fx.Node] | None = None, co_acc: list | None = None, acc_dt=None,  # noqa: ANN001
                  mixed: bool = False) -> tuple[list[str], list[str], list[fx.Node]] | None:
    """The chunk load of a reduction with a prologue (partition.prologue_cone), loop-indented: phase 2 reads the
    partials as before (`partials`; a var combines its own), phases 0 and 1 load the prologue's inputs in their
    compute dtype, apply it and put the reduction's identity back in the masked lanes (exp(0) is not a sum's
    zero). (loop lines, lines after the row index, the `pin` inputs: [] when x's own view is read)."""
    import re

    if not group.prologue:
        return None
    src = prologue_source(group)
    x = group.anchor.args[0]
    sub = Group(gid=-1, shape="", nodes=list(group.prologue))
    rows: list[str] = []
    if src is not None:
        c = pw.compute_dtype(dtype(src))
        body = build_body(sub, [], [], "m", "0", {src: pw.Val("v", c)})
        assert not body.inputs and not body.scalars, "a one-source prologue reads its source only"
        head = [f"v = {_RED_LOAD.format(o='0')}.to({pw.TL_DTYPE[c]})"]
        ren = [re.sub(r"\bv(\d+)\b", r"p\1", ln) for ln in body.lines]
        pins: list[fx.Node] = []
    else:
        body = build_body(sub, [], ["PR", "PC"], "m", "0", {})
        assert not body.scalars, "a prologue takes no symbolic scalars (partition.prologue_cone)"
        pins = list(body.inputs)
        head = [ln.format(k=k) for k in range(len(pins)) for ln in _PIN_COLS]
        rows = [ln.format(k=k) for k in range(len(pins)) for ln in _PIN_ROWS]
        ren = []
        for ln in body.lines:
            ln = re.sub(r"\bin(\d+)_ptr \+ PR \* in\1_s0 \+ PC \* in\1_s1",
                        r"pin\1_ptr + pro\1[:, None] + pco\1[None, :]", ln)
            ren.append(re.sub(r"\bx(\d+)\b", r"px\1", re.sub(r"\bv(\d+)\b", r"p\1", ln)))
    helpers |= body.helpers
    last = re.sub(r"\bv(\d+)\b", r"p\1", body.values[x].expr)  # type: ignore[attr-defined]
    last = re.sub(r"\bx(\d+)\b", r"px\1", last) if src is None else last
    compute = head + ren + [f"v = tl.where(m, {last}.to({acc_tl}), {init})"]
    # the co-reductions' inputs (norm_stats.pair_row_reductions): vs0, vs1... beside v, from the same loads
    # (each in its own accumulator dtype: an int64 count beside a float sum, `co_acc`)
    co_acc = co_acc or [None] * len(co or [])
    for i, s in enumerate(co or []):
        e = re.sub(r"\bv(\d+)\b", r"p\1", body.values[s.args[0]].expr)  # type: ignore[attr-defined]
        e = re.sub(r"\bx(\d+)\b", r"px\1", e) if src is None else e
        ctl = pw.TL_DTYPE[co_acc[i]] if co_acc[i] is not None else acc_tl
        compute.append(f"vs{i} = tl.where(m, {e}.to({ctl}), {init})")
    if not partials:
        return indent(compute), rows, pins
    split = ["    if PHASE == 2:", "        v = " + _ws_code(_RED_LOAD.format(o=init), acc_dt, mixed, False)]
    for i in range(len(co or [])):
        at = _RED_LOAD.format(o=init).replace("x_ptr + ", f"x_ptr + {i + 1} * M * x_sm + ", 1)
        split.append(f"        vs{i} = " + _ws_code(at, co_acc[i], mixed, False))
    return split + ["    else:"] + indent(compute, 8), rows, pins


def _red_plain_lines(kind: str, init: str, acc_tl: str, acc_dt, ld, helpers: set[str],  # noqa: ANN001
                     load: list[str] | None = None, co: list[str] | None = None,
                     co_tl: list[str] | None = None) -> list[str]:
    """sum, mean, prod, min/max (values), any/all: a combine per lane, then across the lanes. Phase 1's partial
    is the same combine of a chunk (a mean's is its sum: DIVN is 1); phase 2 combines the partials. `load`:
    the chunk load with a prologue (`_red_prologue`) instead of the plain one."""
    nanprop = kind in ("amax", "amin", "max", "min") and acc_dt.is_floating_point
    op = _RED_OP[kind]
    lines = [f"acc = tl.full([RED_BLOCK_M, RED_BLOCK_N], {init}, {acc_tl})"]
    lines += [f"accs{i} = tl.full([RED_BLOCK_M, RED_BLOCK_N], {init}, {(co_tl or [acc_tl] * len(co))[i]})"
              for i in range(len(co or []))]
    lines += _RED_LOOP + (load or [f"    v = {ld(init)}"])
    if nanprop:  # nan propagates, as in torch: the default max.f32 drops a nan operand on the GPU (a lane's nan
        # was lost at its next finite value; the interpreter's np.maximum hid it); acc + v is nan when either is.
        # Spelled with wheres, not propagate_nan=ALL: ptxas unrolled that loop 4x, and 95_CrossEntropyLoss's split
        # amax kernel spilled 8 bytes (tests/lowering/test_row_gather.py)
        op = f"tl.where((acc != acc) | (v != v), acc + v, {op})"
    lines += [f"    acc = tl.where(m, {op}, acc)"]
    # co-reductions (sums or means: no nan rule): their accumulators beside acc, their results rs0, rs1...
    for i, k in enumerate(co or []):
        sub = _RED_OP[k].replace("acc", f"accs{i}").replace("v", f"vs{i}")
        lines.append(f"    accs{i} = tl.where(m, {sub}, accs{i})")
    fins = [f"rs{i} = " + _RED_FIN[k].replace("acc", f"accs{i}") for i, k in enumerate(co or [])]
    if kind == "prod":
        helpers.add("_mul_combine")
    if nanprop:
        # tl.max/tl.min drop nan on the GPU (and on the interpreter: np.nanmax): a lane's nan is flagged
        return lines + ["has_nan = tl.max((acc != acc).to(tl.int32), axis=1) > 0",
                        f"rv = tl.where(has_nan, float(\"nan\"), {_RED_FIN[kind]})"] + fins
    return lines + [f"rv = {_RED_FIN[kind]}"] + fins


def _red_wide(group: Group, body: Body, mat: list[fx.Node], out_rank: int) -> tuple[list[str], Body, list[int]]:
    """The wide epilogue members (`Group.wide`, partition.wide_dims: a GroupNorm's per-channel scale and shift
    from its per-group statistics) on a [RED_BLOCK_M, K] tile after the row epilogue: the row values they read
    broadcast along K, their other inputs loaded at (the row's kept dims, K's dims), stored contiguous (kept dims
    first: rows * K + k). Their names get a `w` (wv0, wx0, win0_ptr, wout0_ptr) beside the row body's.
    (lines, their body, the dims K spans)."""
    import re

    from workbench.lowering.partition import wide_dims

    grown = wide_dims(group, group.wide[0])
    assert grown is not None
    shape = val(group.wide[0]).shape
    k = 1
    for d in grown:
        k *= int(shape[d])
    lines = [f"kk = tl.arange(0, {max(2, 1 << (k - 1).bit_length())})",
             f"wm = rmask[:, None] & (kk[None, :] < {k})", "kq = kk"]
    idx = {}
    for d in reversed(grown):
        lines += [f"wk{d} = kq % {int(shape[d])}", f"kq = kq // {int(shape[d])}"]
        idx[d] = f"wk{d}[None, :]"
    vals = {}
    wide = set(group.wide)
    for n in group.wide:
        for a in n.all_input_nodes:
            if a in body.values and a not in wide and a not in vals:  # type: ignore[attr-defined]
                v = body.values[a]  # type: ignore[attr-defined]
                lines.append(f"wa{len(vals)} = {v.expr}[:, None]")
                vals[a] = pw.Val(f"wa{len(vals)}", v.dtype)
    sub = Group(gid=-1, shape="", nodes=list(group.wide))
    wb = build_body(sub, [n for n in mat if n in wide], [idx.get(d, f"o{d}[:, None]") for d in range(out_rank)],
                    "wm", "0", vals)
    assert not wb.scalars, "a wide epilogue takes no symbolic scalars (partition._widens)"
    ren = [re.sub(r"\bin(\d+)_", r"win\1_", re.sub(r"\bx(\d+)\b", r"wx\1", re.sub(r"\bv(\d+)\b", r"wv\1", ln)))
           for ln in wb.lines + store_lines(wb, f"rows[:, None] * {k} + kk[None, :]", "wm")]
    body.helpers |= wb.helpers
    return lines + [re.sub(r"\bout(\d+)_ptr", r"wout\1_ptr", ln) for ln in ren], wb, grown


def _red_gathers(body: Body, gathers: list[fx.Node]) -> list[fx.Node]:
    """The epilogue's gathers of one element per row (partition._gather_group: cross entropy's picked logit
    beside its log-sum-exp), spliced into the row body right after their index is known: `gth{j}` loaded from
    the source at the row's output coordinates, the index on the gathered dim. An index from outside the kernel
    is loaded first (`gidx{j}`). The external indices, in order."""
    ext: list[fx.Node] = []
    for j, g in enumerate(gathers):
        src, d, idx = g.args
        r = rank(src)
        d %= max(r, 1)
        vals = body.values  # type: ignore[attr-defined]
        if idx in vals:
            iexpr = vals[idx].expr
            pos = next((i + 1 for i, ln in enumerate(body.lines) if ln.startswith(f"{iexpr} = ")), 0)
        else:
            k = len(ext)
            ext.append(idx)
            off = " + ".join(f"o{e} * gidx{k}_s{e}" for e in range(r))
            body.lines.insert(0, f"gi{j} = tl.load(gidx{k}_ptr + {off}, mask=rmask, other=0)")
            iexpr, pos = f"gi{j}", 1
        c = pw.compute_dtype(dtype(src))
        off = " + ".join(f"{iexpr if e == d else f'o{e}'} * gs{j}_s{e}" for e in range(r))
        new = [f"gth{j} = tl.load(gs{j}_ptr + {off}, mask=rmask, other=0)" + (f".to({pw.TL_DTYPE[c]})"
                                                                               if c != dtype(src) else "")]
        # build_body rounds an fp16/bf16 value it is handed before its first line: after the load instead
        rnd = [i for i, ln in enumerate(body.lines) if ln.startswith(f"gth{j}_r = ")]
        moved = [body.lines.pop(rnd[0])] if rnd else []
        if rnd and rnd[0] < pos:
            pos -= 1
        body.lines[pos:pos] = new + moved
    return ext


def _red_epilogue(anchor: fx.Node, body: Body, mat: list[fx.Node], out_val, out_rank: int, tuple_out: bool,
                  acc_dt, res_val, group: Group | None = None) -> tuple[list[str], int, tuple | None]:  # noqa: ANN001
    """The output index of each row, the fused epilogue and the stores; (lines, stored anchor outputs, the wide
    epilogue's (body, dims) or None: `_red_wide`)."""
    import torch

    lines = []
    wide = group is not None and bool(group.wide)
    if out_rank and (body.lines or wide):
        rest = "rows"
        for d in range(out_rank - 1, 0, -1):
            lines += [f"o{d} = {rest} % osize{d}", f"q{d} = {rest} // osize{d}"]
            rest = f"q{d}"
        lines.append(f"o0 = {rest}")
    lines += body.lines
    winfo = None
    if wide:
        wl, wb, grown = _red_wide(group, body, mat, out_rank)
        lines += wl
        winfo = (wb, grown)
        mat = [n for n in mat if n not in set(group.wide)]
    body.values[anchor] = res_val  # type: ignore[attr-defined]
    stores = []
    if tuple_out:
        rv_out = pw.narrow("rv", out_val.dtype, body.helpers) if acc_dt == torch.float32 and \
            out_val.dtype != torch.float32 else f"rv.to({pw.TL_DTYPE[out_val.dtype]})"
        stores += [f"tl.store(out0_ptr + rows, {rv_out}, mask=rmask)",
                   "tl.store(out1_ptr + rows, ri, mask=rmask)"]
    body.outputs = [n for n in mat if n is not anchor]
    if anchor in mat and not tuple_out:
        body.outputs = [anchor] + body.outputs
    st = store_lines(body, "rows", "rmask")
    if tuple_out:
        st = [s.replace("out", "outE", 1) for s in st]
    return lines + stores + st, (2 if tuple_out else 0), winfo


# the split's combine runs in the last program of each row block to store its partial (no second launch): the
# programs of a row block take tickets (a counter per row block, `_tickets` in the candidate, zero between
# launches: the last program resets its own); the barrier orders every thread's partial stores before the
# ticket (bar.sync, then thread 0's gpu-scope acq_rel atomic: the pattern of a cooperative grid sync). The
# combine reads the partials in a fixed order, so the result does not depend on which program is last.
_TICKET = ["tl.debug_barrier()", "tk = tl.atomic_add(cnt_ptr + tl.program_id(0), 1, sem=\"acq_rel\")",
           "if tk == SPLIT - 1:", "    tl.store(cnt_ptr + tl.program_id(0), 0)"]
# phase 2's reads of the [M, SPLIT] partials, as the last program of phase 1 makes them: its own rows, the
# partials' row stride SPLIT, no column groups; the mean's divisor is the row's length
_FINALIZE_SUBS = (("PHASE", "2"), ("x_ptr", "ws_ptr"), ("roff", "(rows * SPLIT)"), ("x_sm", "SPLIT"),
                  ("n_lo", "0"), ("n_hi", "SPLIT"), ("X2", "0"), ("x_sn", "1"), ("DIVN", "NTOT"))


def _finalize_lines(lines: list[str]) -> list[str]:
    """A split reduction's phase-2 lines (the combine of the partials, then the epilogue) for the last program
    of phase 1: the phase and the view of x fixed to those of the partials (static ifs, which Triton and its
    interpreter both resolve at compile time), the partials read past L1 (another program of this SM may have
    cached a line of them before they were complete), every local renamed `f_...` (a name of phase 1 may hold
    another type: its columns are int64)."""
    import re

    out = []
    for ln in lines:
        for a, b in _FINALIZE_SUBS:
            ln = re.sub(rf"\b{a}\b", b, ln)
        out.append(re.sub(r"(tl\.load\(ws_ptr[^\n]*?, mask=\w+), other=", r'\1, cache_modifier=".cg", other=', ln))
    local = set()
    for ln in out:
        m = re.match(r"\s*(?:for\s+(\w+)\s+in\b|(\w+)\s*[-+*/]?=(?!=))", ln)
        if m:
            local.add(m.group(1) or m.group(2))
    out = _static_ifs(out)
    if not local:
        return out
    # no keyword argument (mask=, other=, axis=) and no attribute (tl.sum) is named like a local here
    pat = re.compile(r"(?<![.\w])(" + "|".join(sorted(local, key=len, reverse=True)) + r")\b")
    return [pat.sub(r"f_\1", ln) for ln in out]


_LITERAL_COND = r"\d+(?:\s*(?:==|!=)\s*\d+)?"


def _static_ifs(lines: list[str]) -> list[str]:
    """`if`/`elif`/`else` chains whose conditions are all integer literals or their comparisons (`if 0 == 3:`)
    replaced by the block taken, dedented: what Triton would compile, written out for the reader."""
    import re

    def ind(ln: str) -> int:
        return len(ln) - len(ln.lstrip())

    def block(i: int, d: int) -> int:  # the end of the block whose lines start at i, indented past d
        while i < len(lines) and (not lines[i].strip() or ind(lines[i]) > d):
            i += 1
        return i

    out: list[str] = []
    i = 0
    while i < len(lines):
        d = ind(lines[i])
        m = re.fullmatch(rf"\s*if ({_LITERAL_COND}):", lines[i])
        if not m:
            out.append(lines[i])
            i += 1
            continue
        taken: list[str] | None = None
        cond: str | None = m.group(1)
        while True:
            j = block(i + 1, d)
            if taken is None and (cond is None or eval(cond)):  # noqa: S307 - digits and == / != only
                taken = lines[i + 1:j]
            i = j
            if cond is None or i >= len(lines) or ind(lines[i]) != d:
                break
            m = re.fullmatch(r"\s*elif (.*):", lines[i])
            if m:
                cond = m.group(1)
                assert re.fullmatch(_LITERAL_COND, cond), f"a literal chain with a runtime condition: {cond}"
            elif lines[i].strip() == "else:":
                cond = None
            else:
                break
        out += _static_ifs([b[4:] for b in taken or []])
    return out


def reduction_kernel(name: str, group: Group, mat: list[fx.Node],
                     names: dict[fx.Node, str]) -> tuple[str, list[str], set[str]]:
    """Reduce x over `dims`: x is permuted so they are last and read as [M, N] (in place where its strides
    allow); a program owns RED_BLOCK_M rows and walks N in RED_BLOCK_N chunks, accumulating in fp32 (int64
    for integer sums). Few long rows (a full reduction, a per-channel norm) split: phase 1 runs SPLIT
    programs per row block, each storing its chunk's partial; the last of them to finish combines the partials
    (phase 2's code, `_finalize_lines`) and runs the epilogue: one launch either way."""
    import torch

    anchor = group.anchor
    assert anchor is not None
    kind = packet(anchor)
    x = anchor.args[0]
    xr = rank(x)
    dims, keep = reduction_dims(anchor)
    kept = [d for d in range(xr) if d not in dims]
    tuple_out = isinstance(val(anchor), (tuple, list))
    out_val = val(anchor)[0] if tuple_out else val(anchor)
    out_rank = out_val.dim()
    xdt = dtype(x)
    acc_dt = _red_acc_dtype(kind, xdt)
    acc_tl = pw.TL_DTYPE[acc_dt]
    init = _init_literal(kind, acc_dt)
    res_val = pw.Val("r", pw.compute_dtype(out_val.dtype))
    # a sibling (norm_stats: the sum or mean of x over the same dims beside a var) comes from the var's mean
    co = list(group.siblings) if group.siblings and anchor.meta.get("wb_co") and group.prologue else []
    # co-reductions keep their own accumulator dtypes; of several, their partials share one int64 workspace
    co_acc = [_red_acc_dtype(packet(c), dtype(c.args[0])) for c in co]
    mixed = any(d != acc_dt for d in co_acc)
    ws_dt = torch.int64 if mixed else acc_dt
    sib_vals = {s: pw.Val(f"rs{i}", co_acc[i] if co else acc_dt) for i, s in enumerate(group.siblings)}
    # the row epilogue; the wide members (Group.wide) after it on their own tile (`_red_wide`)
    # and the gathers of one element per row spliced in (`_red_gathers`)
    gathers = [n for n in group.nodes if packet(n) == "gather"]
    rows_group = Group(gid=group.gid, shape=group.shape, anchor=anchor, prologue=group.prologue,
                       siblings=group.siblings,
                       nodes=[n for n in group.nodes if n not in set(group.wide) and n not in gathers])
    gth_vals = {g: pw.Val(f"gth{j}", pw.compute_dtype(dtype(g))) for j, g in enumerate(gathers)}
    body = build_body(rows_group, [], [f"o{d}" for d in range(out_rank)], "rmask", "rows * 0",
                      {anchor: res_val, **sib_vals, **gth_vals})
    gidx = _red_gathers(body, gathers) if gathers else []
    ld = _red_loader(kind, xdt, acc_dt)
    splittable = not (kind in ARG_KINDS or tuple_out)
    # sum(exp(x - amax(x))) with the amax as its sibling (softmax_match.pair_logsumexp): one online pass over x
    lse = bool(anchor.meta.get("wb_lse"))
    pro = _red_prologue(group, init, acc_tl, body.helpers, partials=kind != "var", co=co, co_acc=co_acc,
                        acc_dt=acc_dt, mixed=mixed) \
        if splittable and not lse else None
    load, pro_rows, pins = pro if pro else (None, [], [])
    if lse:
        acc_lines = _red_lse_lines(ld) + ["rs0 = mx"]
        result = "rv"
    elif not splittable:
        acc_lines = _red_arg_lines(kind, tuple_out, init, acc_tl, acc_dt, ld)
        result = "ri" if kind in ARG_KINDS else "rv"
    elif kind == "var":
        # aten.var.correction takes it by keyword; prims.var (from the norm decompositions) positionally
        corr = anchor.kwargs.get("correction", anchor.args[2] if len(anchor.args) > 2 else 1)
        acc_lines = _red_var_lines(1 if corr is None else corr, acc_tl, ld, load)
        acc_lines += [f"rs{i} = mean * NTOT" if packet(s) == "sum" else f"rs{i} = mean"
                      for i, s in enumerate(group.siblings)]
        result = "rv"
    else:
        assert not group.siblings or co, "only a var or co-reductions compute siblings"
        acc_lines = _red_plain_lines(kind, init, acc_tl, acc_dt, ld, body.helpers, load, [packet(c) for c in co],
                                     [pw.TL_DTYPE[d] for d in co_acc])
        result = "rv"
    lines = _RED_INDEX + pro_rows + acc_lines
    is_bool = out_val.dtype == torch.bool
    if is_bool:
        res_val.dtype = torch.bool
    epi, anchor_outs, winfo = _red_epilogue(anchor, body, mat, out_val, out_rank, tuple_out, acc_dt, res_val, group)
    wb, grown = winfo if winfo else (None, [])
    epi = [f"r = {result}" + (" != 0" if is_bool else "")] + epi
    partial = [f"tl.store(ws_ptr + rows * SPLIT + tl.program_id(1), {_ws_code('rv', acc_dt, mixed, True)}, "
               "mask=rmask)"]
    partial += [f"tl.store(ws_ptr + {i + 1} * M * SPLIT + rows * SPLIT + tl.program_id(1), "
                f"{_ws_code(f'rs{i}', co_acc[i], mixed, True)}, mask=rmask)" for i in range(len(co))]
    if kind == "var" or lse:
        first, second = ("mx", "rv") if lse else ("mean", "m2")
        partial = [f"tl.store(ws_ptr + rows * SPLIT + tl.program_id(1), {first}, mask=rmask)",
                   f"tl.store(ws_ptr + M * SPLIT + rows * SPLIT + tl.program_id(1), {second}, mask=rmask)"]
    if splittable:
        fin = _finalize_lines(acc_lines + epi)
        lines += ["if PHASE == 1:"] + indent(partial + _TICKET + indent(fin)) + ["else:"] + indent(epi)
    else:
        lines += epi
    out_params = [f"out{j}_ptr" for j in range(anchor_outs)] + \
        [f"{'outE' if tuple_out else 'out'}{j}_ptr" for j in range(len(body.outputs))]
    in_params = [f"in{k}_ptr" for k in range(len(body.inputs))] + [f"sc{k}" for k in range(len(body.scalars))]
    in_params += [f"pin{k}_{p}" for k in range(len(pins)) for p in ("ptr", "sm", "sn", "sn2", "sm2")]
    if wb is not None:
        in_params += [f"wout{j}_ptr" for j in range(len(wb.outputs))] + [f"win{k}_ptr" for k in range(len(wb.inputs))]
    strides = [f"in{k}_s{d}" for k in range(len(body.inputs)) for d in range(out_rank)]
    if wb is not None:
        strides += [f"win{k}_s{d}" for k in range(len(wb.inputs)) for d in range(out_rank)]
    in_params += [f"gs{j}_ptr" for j in range(len(gathers))] + [f"gidx{k}_ptr" for k in range(len(gidx))]
    strides += [f"gs{j}_s{e}" for j, g in enumerate(gathers) for e in range(rank(g.args[0]))]
    strides += [f"gidx{k}_s{e}" for k in range(len(gidx)) for e in range(out_rank)]
    sizes = [f"osize{d}" for d in range(1, out_rank)]
    sig = ", ".join(["x_ptr"] + out_params + in_params + ["M", "N", "x_sm", "x_sn", "N2", "x_sn2", "M2", "x_sm2"] +
                    sizes + strides + ["ws_ptr", "cnt_ptr", "SPLIT", "CHUNK", "NTOT", "DIVN",
                                       "RED_BLOCK_M: tl.constexpr", "RED_BLOCK_N: tl.constexpr",
                                       "PHASE: tl.constexpr", "X2: tl.constexpr", "K2: tl.constexpr"])
    doc = (f'    """{kind} over the last axis of x viewed as [M, N] (dims {dims} of a rank-{xr} input), '
           + (f'with {", ".join(n.name for n in group.siblings)}, ' if group.siblings else "")
           + (f'prologue: {", ".join(n.name for n in group.prologue)}, ' if group.prologue else "")
           + f'epilogue: {", ".join(n.name for n in group.nodes) or "none"}'
           + (f' ({", ".join(n.name for n in group.wide)} on [rows, dims {grown}])' if group.wide else "") + '."""')
    src = "\n".join([f"@triton.jit\ndef {name}({sig}):", doc] + indent(lines)) + "\n"
    loaded = group.siblings[0].args[0] if lse else (prologue_source(group) or x) if group.prologue else x
    launch = _red_launch(name, names, anchor, body, loaded, xr, kept, dims, keep, tuple_out, out_val, out_rank,
                         ws_dt, splittable, 2 if kind == "var" or lse else 1 + len(co), pins,
                         (wb, grown, val(group.wide[0]).shape) if wb is not None else None,
                         ([g.args[0] for g in gathers], gidx))
    return src, launch, body.helpers


def _red_launch(name: str, names: dict[fx.Node, str], anchor: fx.Node, body: Body, x: fx.Node, xr: int,
                kept: list[int], dims: list[int], keep: bool, tuple_out: bool, out_val, out_rank: int,  # noqa: ANN001
                acc_dt, splittable: bool, n_ws: int, pins: list[fx.Node] | None = None,  # noqa: ANN001
                wide: tuple | None = None, gathers: tuple | None = None) -> list[str]:
    """Permute the reduced dims last, read as [M, N] (`_red_view`), allocate, launch (split, phase 1 with its
    combine in its last program per row block, when `_red_split` says so). `pins`: a prologue's inputs,
    broadcast to x's shape and read as [M, N] with one grouping of their dims shared by all (`_red_views`).
    `n_ws`: the partials each row stores per split (a var's mean and M2, co-reductions' sums). `wide`: the wide
    epilogue's (body, dims it puts back, its shape): its outputs and inputs at the output shape with those
    dims put back (`_red_wide`)."""
    perm = kept + dims
    k = len(kept) if xr else 0
    if pins:
        pv = [names[p] for p in pins]
        launch = [f"_pb = _bshape({', '.join(f'{v}.shape' for v in pv)})",
                  f"_M, _N, _n2, _x2, _m2, _k2, _pv = _red_views({k}, "
                  + ", ".join(f"{v}.expand(_pb).permute({perm})" if xr else f"{v}.reshape(1)" for v in pv) + ")",
                  "_x, _sm, _sn, _sn2, _sm2 = _pv[0]"]
        xshape = "_pb"
    else:
        xv = names[x]
        launch = [f"_xp = {xv}.permute({perm})" if xr else f"_xp = {xv}.reshape(1)",
                  f"_x, _M, _N, _sm, _n2, _sn, _sn2, _x2, _m2, _sm2, _k2 = _red_view(_xp, {k})"]
        xshape = f"{xv}.shape"
    if keep:
        oshape = "[" + ", ".join("1" if d in dims else f"{xshape}[{d}]" for d in range(xr)) + "]"
    else:
        oshape = "[" + ", ".join(f"{xshape}[{d}]" for d in kept) + "]"
    launch.append(f"_shape = {oshape}")
    outs = [names[anchor] + "_0", names[anchor] + "_1"] if tuple_out else [names[n] for n in body.outputs]
    all_outs = list(outs)
    if tuple_out:
        launch.append(f"{outs[0]} = torch.empty(_shape, dtype={torch_dtype(out_val.dtype)}, device=dev)")
        launch.append(f"{outs[1]} = torch.empty(_shape, dtype=torch.int64, device=dev)")
        ep_outs = [names[n] for n in body.outputs]
        all_outs = outs[:2] + ep_outs
    else:
        ep_outs = outs
    launch += [f"{o} = torch.empty(_shape, dtype={torch_dtype(dtype(n))}, device=dev)"
               for o, n in zip(ep_outs, body.outputs)]
    prep, ptrs, strd = _input_args(body, names, "_shape")
    launch += prep
    rest = all_outs + ptrs + [names[s] for s in body.scalars] + [f"*_pv[{j}]" for j in range(len(pins or []))]
    sizes = [f"_shape[{d}]" for d in range(1, out_rank)] + strd
    if wide is not None:
        wb, grown, wshape = wide
        launch.append("_wshape = [" + ", ".join(str(int(wshape[d])) if d in grown else f"_shape[{d}]"
                                                 for d in range(out_rank)) + "]")
        wouts = [names[n] for n in wb.outputs]
        launch += [f"{o} = torch.empty(_wshape, dtype={torch_dtype(dtype(n))}, device=dev)"
                   for o, n in zip(wouts, wb.outputs)]
        launch += [f"_w{k} = {names[n]}.expand(_wshape)" for k, n in enumerate(wb.inputs)]
        rest += wouts + [f"_w{k}" for k in range(len(wb.inputs))]
        sizes += [f"*_w{k}.stride()" for k in range(len(wb.inputs))]
    if gathers is not None:  # the gathers' sources as they are, their outside indices at the output's shape
        srcs, gidx = gathers
        launch += [f"_g{k} = {names[n]}.expand(_shape)" for k, n in enumerate(gidx)]
        rest += [names[n] for n in srcs] + [f"_g{k}" for k in range(len(gidx))]
        sizes += [f"*{names[n]}.stride()" for n in srcs] + [f"*_g{k}.stride()" for k in range(len(gidx))]
    launch += RED_BLOCKS
    # X2: 0 one column group; two: 3 the inner one a whole number of blocks, 2 at least a block wide (both
    # walked without a division per element), 1 otherwise (_RED_LOOP)
    launch.append("_x2 = (3 if _n2 % _rbn == 0 else 2 if _n2 >= _rbn else 1) if _x2 else 0")
    kw = "RED_BLOCK_M=_rbm, RED_BLOCK_N=_rbn, num_warps=NUM_WARPS"

    def call(x_args: list[str], tail: list[str], g: str, phase: int, x2: str) -> str:
        grid = f"({'triton.cdiv(_M, _rbm)' if phase == 2 else '_grid'}, {g})"  # phase 2 reads [M, SPLIT] rows
        return (f"{name}[{grid}]({', '.join(x_args[:1] + rest + x_args[1:] + sizes + tail)}, "
                f"{kw}, PHASE={phase}, X2={x2}, K2={'_k2' if x2 == '_x2' else 'False'})")
    view = ["_x", "_M", "_N", "_sm", "_sn", "_n2", "_sn2", "_m2", "_sm2"]
    whole = call(view, ["_x", "_x", "1", "_N", "_N", "_N"], "1", 0, "_x2")
    if not splittable:
        launch.append(f"if _M: {whole}")
        return launch
    # one launch either way: split, the last program of each row block to store its partial combines them
    # (`_TICKET`; phase 2 runs inside phase 1, no second kernel for a norm's statistics or a loss's mean)
    launch += ["_split = _red_split(_M, _N, _rbm, _rbn, RED_SPLIT_PROGS) if _M else 1",
               "if _split > 1:",
               "    _chunk = triton.cdiv(triton.cdiv(_N, _split), _rbn) * _rbn",
               "    _split = triton.cdiv(_N, _chunk)",
               f"    _ws = torch.empty([{n_ws} * _M * _split], dtype={torch_dtype(acc_dt)}, device=dev)",
               "    " + call(view, ["_ws", "_tickets(dev, _grid)", "_split", "_chunk", "_N", "1"], "_split", 1,
                             "_x2"),
               f"elif _M: {whole}"]
    return launch


def dot_precision(precision: str) -> str:
    """The input_precision argument of an fp32 tl.dot: `DOT_PREC` (the MM_PRECISION tunable: "ieee", or
    "tf32x3", three tf32 products, near fp32 accuracy, which the tuner keeps only where the outputs match)
    unless the spec allows tf32."""
    return ', input_precision="tf32"' if precision == "tf32" else ", input_precision=DOT_PREC"


def matmul_kernel(name: str, group: Group, mat: list[fx.Node], names: dict[fx.Node, str],
                  precision: str) -> tuple[str, list[str], set[str]]:
    """C[b] = A[b] @ B[b] tiled MM_BLOCK_M x MM_BLOCK_N (tiles ordered in groups of MM_GROUP_M rows of tiles,
    for L2 reuse), K walked in MM_BLOCK_K steps, fp32 accumulator; mm is the B = 1 case. The epilogue (bias,
    activation, scale) runs on the accumulator tile. Split-K (`_mm_split`: few tiles and a long K, or a K
    too long for one fp32 chain): phase 1 stores SPLIT_K partial tiles, phase 2 sums them in order and runs
    the epilogue."""
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
    prec = dot_precision(precision) if dtype(a) == torch.float32 else ""
    tile = "(pid_b * SPLIT_K + tl.program_id(1) % SPLIT_K) * M * N + rm[:, None].to(tl.int64) * N + rn[None, :]"
    lines = ["pid = tl.program_id(0)", "grid_m = tl.cdiv(M, MM_BLOCK_M)", "grid_n = tl.cdiv(N, MM_BLOCK_N)",
             "width = MM_GROUP_M * grid_n", "first_m = (pid // width) * MM_GROUP_M",
             "group_m = tl.minimum(grid_m - first_m, MM_GROUP_M)",
             "pid_m = first_m + (pid % width) % group_m", "pid_n = (pid % width) // group_m",
             "if PHASE == 1:", "    pid_b = (tl.program_id(1) // SPLIT_K).to(tl.int64)",
             "    k_lo = (tl.program_id(1) % SPLIT_K) * K_CHUNK", "    k_hi = tl.minimum(k_lo + K_CHUNK, K)",
             "else:", "    pid_b = tl.program_id(1).to(tl.int64)", "    k_lo = 0", "    k_hi = K",
             "rm = pid_m * MM_BLOCK_M + tl.arange(0, MM_BLOCK_M)", "rn = pid_n * MM_BLOCK_N + tl.arange(0, MM_BLOCK_N)",
             "cmask = (rm[:, None] < M) & (rn[None, :] < N)",
             f"acc = tl.zeros([MM_BLOCK_M, MM_BLOCK_N], {acc_tl})",
             "if PHASE == 2:",
             "    for s in range(0, SPLIT_K):",
             "        acc += tl.load(ws_ptr + (pid_b * SPLIT_K + s) * M * N + rm[:, None].to(tl.int64) * N "
             "+ rn[None, :], mask=cmask, other=0.0)",
             "else:",
             "    rk = k_lo + tl.arange(0, MM_BLOCK_K)",
             "    a_ptrs = a_ptr + pid_b * a_sb + rm[:, None].to(tl.int64) * a_sm + rk[None, :] * a_sk",
             "    b_ptrs = b_ptr + pid_b * b_sb + rk[:, None] * b_sk + rn[None, :].to(tl.int64) * b_sn",
             "    for k0 in range(0, k_hi - k_lo, MM_BLOCK_K):",
             "        a = tl.load(a_ptrs, mask=(rm[:, None] < M) & (rk[None, :] + k0 < k_hi), other=0.0)",
             "        b = tl.load(b_ptrs, mask=(rk[:, None] + k0 < k_hi) & (rn[None, :] < N), other=0.0)",
             *(["        if DOT_F32:  # Triton's interpreter computes bf16 tl.dot wrongly: fp32 there",
                "            a = a.to(tl.float32)", "            b = b.to(tl.float32)"] if bf16 else []),
             f"        acc += tl.dot(a, b{prec})",
             "        a_ptrs += MM_BLOCK_K * a_sk",
             "        b_ptrs += MM_BLOCK_K * b_sk"]
    # an output stored into its slice of a cat's buffer (cat_chain.py) has that buffer's batch and row strides;
    # its columns stay contiguous (the buffer is, and a slice along any dim keeps the last stride 1)
    strided = [j for j, n in enumerate(body.outputs) if n in group.into]
    offs = [f"pid_b * out{j}_sb + rm[:, None].to(tl.int64) * out{j}_sm + rn[None, :]" if j in strided else
            "pid_b * M * N + rm[:, None].to(tl.int64) * N + rn[None, :]" for j in range(len(body.outputs))]
    epi = body.lines + store_lines(body, offs, "cmask")
    lines += ["if PHASE == 1:", f"    tl.store(ws_ptr + {tile}, acc, mask=cmask)", "else:"] + indent(epi)
    r = 3 if batched else 2
    sig = ", ".join(["a_ptr", "b_ptr"] + [f"out{j}_ptr" for j in range(len(body.outputs))] +
                    [f"in{k}_ptr" for k in range(len(body.inputs))] + [f"sc{k}" for k in range(len(body.scalars))] +
                    ["M", "N", "K", "a_sb", "a_sm", "a_sk", "b_sb", "b_sk", "b_sn"] +
                    [f"in{k}_s{d}" for k in range(len(body.inputs)) for d in range(r)] +
                    [f"out{j}_s{d}" for j in strided for d in "bm"] + ["ws_ptr", "SPLIT_K", "K_CHUNK"] +
                    ["MM_BLOCK_M: tl.constexpr", "MM_BLOCK_N: tl.constexpr", "MM_BLOCK_K: tl.constexpr",
                     "MM_GROUP_M: tl.constexpr", "PHASE: tl.constexpr"] +
                    (["DOT_PREC: tl.constexpr"] if "DOT_PREC" in prec else []) +
                    (["DOT_F32: tl.constexpr"] if bf16 else []))
    doc = (f'    """{"bmm" if batched else "mm"} with an fp32 accumulator; epilogue: '
           f'{", ".join(n.name for n in group.nodes) or "none"}."""')
    src = "\n".join([f"@triton.jit\ndef {name}({sig}):", doc] + indent(lines)) + "\n"
    av, bv = names[a], names[b]
    launch = mm_shape_lines(av, bv, batched)
    outs = [names[n] for n in body.outputs]
    launch += cat_chain.out_lines(body.outputs, names, "_shape", group.into)
    prep, ptrs, strd = _input_args(body, names, "_shape")
    launch += prep
    args = [av, bv] + outs + ptrs + [names[s] for s in body.scalars] + \
        ["_M", "_N", "_K", "_sa[0]", "_sa[1]", "_sa[2]", "_sb[0]", "_sb[1]", "_sb[2]"] + strd + \
        [f"*{outs[j]}.stride()[:2]" if batched else f"0, {outs[j]}.stride(0)" for j in strided]
    # a thin operand (a matrix-vector product, a batch-1 linear) gets a tile no wider than it needs
    launch += ["_bm = min(MM_BLOCK_M, max(16, triton.next_power_of_2(_M)))",
               "_bn = min(MM_BLOCK_N, max(16, triton.next_power_of_2(_N)))",
               "_tiles = triton.cdiv(_M, _bm) * triton.cdiv(_N, _bn)",
               "_split = _mm_split(_M, _N, _K, _B, _bm, _bn, MM_BLOCK_K) if _M and _N and _B else 1"]
    kw = ("MM_BLOCK_M=_bm, MM_BLOCK_N=_bn, MM_BLOCK_K=MM_BLOCK_K, MM_GROUP_M=MM_GROUP_M, num_warps=MM_NUM_WARPS, "
          "num_stages=MM_NUM_STAGES" + (", DOT_PREC=MM_PRECISION" if "DOT_PREC" in prec else "") +
          (", DOT_F32=_DOT_F32" if bf16 else ""))
    call = f"{name}[(_tiles, {{g}})]({', '.join(args)}, {{tail}}, {kw}, PHASE={{ph}})"
    launch += ["if _split > 1:",
               "    _kc = triton.cdiv(triton.cdiv(_K, _split), MM_BLOCK_K) * MM_BLOCK_K",
               "    _split = triton.cdiv(_K, _kc)",
               "    _ws = torch.empty([_B * _split * _M * _N], dtype=torch.float32, device=dev)",
               "    " + call.format(g="_B * _split", tail="_ws, _split, _kc", ph=1),
               "    " + call.format(g="_B", tail="_ws, _split, _kc", ph=2),
               "elif _M and _N and _B: " + call.format(g="_B", tail=f"{av}, 1, _K", ph=0)]
    return src, launch, body.helpers


# -- the families these templates write, and the tuner's points of each (families.py) -----------------------
REDUCTIONS = frozenset({"sum", "mean", "amax", "amin", "prod", "argmax", "argmin", "var", "any", "all", "max",
                        "min", "nansum"})
MATMULS = frozenset({"mm", "bmm"})


def _is_reduction(node: fx.Node) -> bool:
    if node.op != "call_function" or packet(node) not in REDUCTIONS:
        return False
    # max/min with one tensor and no dim are full reductions; max/min of two tensors are pointwise
    return not (packet(node) in ("max", "min") and len(node.args) > 1 and isinstance(node.args[1], fx.Node))


def _is_matmul(node: fx.Node) -> bool:
    return packet(node) in MATMULS


register_family(Family("pointwise", "fused", lambda nm, g, mat, names, prec: pointwise_kernel(nm, g, mat, names),
                       ("BLOCK", "NUM_WARPS"), rank=20))
register_family(Family("matmul", "matmul", matmul_kernel,
                       ("MM_BLOCK_M", "MM_BLOCK_N", "MM_BLOCK_K", "MM_NUM_WARPS", "MM_NUM_STAGES", "MM_GROUP_M"),
                       anchor=_is_matmul, dot=True, rank=40))
register_family(Family("reduction", "reduce_{op}",
                       lambda nm, g, mat, names, prec: reduction_kernel(nm, g, mat, names),
                       ("RED_BLOCK_M", "RED_BLOCK_N", "NUM_WARPS", "RED_SPLIT_PROGS"), anchor=_is_reduction,
                       rank=50))
register_space(Space("pointwise", ("BLOCK", "NUM_WARPS"),
                     ((2048, 8), (4096, 8), (1024, 8), (512, 4), (2048, 4), (4096, 4), (256, 2), (1024, 2)), rank=10))
register_space(Space("reduction", ("RED_BLOCK_M", "RED_BLOCK_N", "NUM_WARPS"),
                     ((1, 1024, 4), (2, 512, 4), (1, 512, 2), (8, 128, 4), (4, 512, 8), (16, 64, 4), (1, 1024, 8),
                      (2, 256, 2)), rank=40))
# the split's program count is a schedule independent of the block sizes: its own space, so that a tuned config
# tries more and fewer programs per row beside each block shape
register_space(Space("reduction_split", ("RED_SPLIT_PROGS",), ((528,), (2112,), (264,), (1056,)), rank=45))
register_space(Space("matmul", ("MM_BLOCK_M", "MM_BLOCK_N", "MM_BLOCK_K", "MM_NUM_WARPS", "MM_NUM_STAGES",
                                "MM_PRECISION"),
                     ((128, 128, 32, 8, 3, "tf32x3"), (128, 64, 32, 4, 3, "tf32x3"), (128, 128, 16, 8, 3, "ieee"),
                      (64, 128, 32, 4, 3, "ieee"), (64, 64, 32, 4, 3, "tf32x3"), (128, 64, 16, 4, 4, "ieee"),
                      (64, 64, 64, 4, 2, "ieee"), (32, 64, 32, 2, 3, "ieee")), rank=70))
