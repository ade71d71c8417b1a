"""Convolution 1d/2d/3d (stride, padding, dilation, groups, transposed) as an implicit GEMM.

out[n, g*Cg_out + co, o...] = sum_{ci, k...} x[n, g*Cg_in + ci, i...] * w[...]: the output positions
(n and the spatial o, flattened) are the GEMM rows, the group's output channels its columns, and
(ci, k...) the reduction axis, walked CONV_BLOCK_R at a time with `tl.dot` and an fp32 accumulator.
Direct convolution reads i = o * stride - padding + k * dilation; the transposed one gathers
i = (o + padding - k * dilation) / stride where that division is exact. Strides, paddings and
dilations are the graph's constants, written into the kernel as literals; every size is an argument.
The bias and any fused pointwise epilogue run on the accumulator tile.
"""
from __future__ import annotations

import torch
import torch.fx as fx

from workbench.lowering import pointwise as pw
from workbench.lowering.epilogue import Unsupported, build_body, store_lines, torch_dtype
from workbench.lowering.graph import dtype, op_name, val
from workbench.lowering.partition import Group
from workbench.lowering.primitives import register_tunables

TUNABLES = ("CONV_BLOCK_P", "CONV_BLOCK_CO", "CONV_BLOCK_R", "CONV_NUM_WARPS")
DEFAULTS = {"CONV_BLOCK_P": ([16, 32, 64, 128], 64), "CONV_BLOCK_CO": ([16, 32, 64, 128], 32),
            "CONV_BLOCK_R": ([16, 32, 64], 32), "CONV_NUM_WARPS": ([2, 4, 8], 4)}
register_tunables(DEFAULTS)


def _decompose(var: str, names: list[str], sizes: list[str], out: list[str]) -> str:
    """Lines splitting `var` into `names` (last fastest) over `sizes[1:]`; returns the leading index."""
    rest = var
    for d in range(len(names) - 1, 0, -1):
        out.append(f"{names[d]} = {rest} % {sizes[d]}")
        out.append(f"_q{names[d]} = {rest} // {sizes[d]}")
        rest = f"_q{names[d]}"
    out.append(f"{names[0]} = {rest}")
    return names[0]


def conv_kernel(name: str, group: Group, mat: list[fx.Node], names: dict[fx.Node, str],
                precision: str) -> tuple[str, list[str], set[str]]:
    anchor = group.anchor
    assert anchor is not None
    x, w, b, stride, padding, dilation, transposed, output_padding, groups = anchor.args
    S = val(x).dim() - 2
    if S not in (1, 2, 3) or not dtype(x).is_floating_point or dtype(x) != dtype(w):
        raise Unsupported(f"unsupported: {op_name(anchor)} ({S}-d, {dtype(x)} x {dtype(w)})")
    stride = list(stride) * (S if len(stride) == 1 else 1)
    padding = list(padding) * (S if len(padding) == 1 else 1)
    dilation = list(dilation) * (S if len(dilation) == 1 else 1)
    output_padding = list(output_padding) * (S if len(output_padding) == 1 else 1)
    sp = list(range(S))
    o = [f"o{d}" for d in sp]
    k = [f"k{d}" for d in sp]
    res = pw.Val("acc", torch.float32)
    idx = ["pn[:, None]", "cog[None, :]"] + [f"o{d}[:, None]" for d in sp]
    body = build_body(group, [], idx, "omask", "(pn[:, None] * 0 + cog[None, :] * 0)", {anchor: res})
    body.outputs = ([anchor] if anchor in mat else []) + [n for n in mat if n is not anchor]
    body.values[anchor] = res  # type: ignore[attr-defined]
    from workbench.lowering.templates import dot_precision

    prec = dot_precision(precision) if dtype(x) == torch.float32 else ""
    L: list[str] = ["pid_p = tl.program_id(0)", "pid_c = tl.program_id(1)", "g = tl.program_id(2)",
                    "rp = pid_p.to(tl.int64) * CONV_BLOCK_P + tl.arange(0, CONV_BLOCK_P)", "pmask = rp < P",
                    "co = pid_c * CONV_BLOCK_CO + tl.arange(0, CONV_BLOCK_CO)", "cmask = co < COUT_G",
                    "cog = g * COUT_G + co", "sp = rp % PSP", "pn = rp // PSP"]
    _decompose("sp", o, [f"O{d}" for d in sp], L)
    L += ["acc = tl.zeros([CONV_BLOCK_P, CONV_BLOCK_CO], tl.float32)",
          "for r0 in range(0, R, CONV_BLOCK_R):",
          "    r = r0 + tl.arange(0, CONV_BLOCK_R)",
          "    rmask = r < R"]
    inner: list[str] = []
    _decompose("r", ["ci"] + k, ["CIN_G"] + [f"K{d}" for d in sp], inner)
    inner.append("cig = g * CIN_G + ci")
    inner.append("valid = pmask[:, None] & rmask[None, :]")
    xoff = ["pn[:, None] * sx0", "cig[None, :] * sx1"]
    for d in sp:
        if transposed:
            inner.append(f"t{d} = o{d}[:, None] + {padding[d]} - k{d}[None, :] * {dilation[d]}")
            inner.append(f"i{d} = t{d} // {stride[d]}")
            inner.append(f"valid = valid & (t{d} >= 0) & (t{d} % {stride[d]} == 0) & (i{d} < I{d})")
        else:
            inner.append(f"i{d} = o{d}[:, None] * {stride[d]} - {padding[d]} + k{d}[None, :] * {dilation[d]}")
            inner.append(f"valid = valid & (i{d} >= 0) & (i{d} < I{d})")
        xoff.append(f"i{d} * sx{2 + d}")
    inner.append(f"xt = tl.load(x_ptr + {' + '.join(xoff)}, mask=valid, other=0.0)")
    if transposed:
        woff = ["cig[:, None] * sw0", "co[None, :] * sw1"]
    else:
        woff = ["cog[None, :] * sw0", "ci[:, None] * sw1"]
    woff += [f"k{d}[:, None] * sw{2 + d}" for d in sp]
    inner.append(f"wt = tl.load(w_ptr + {' + '.join(woff)}, mask=rmask[:, None] & cmask[None, :], other=0.0)")
    if dtype(x) == torch.bfloat16:
        inner += ["if DOT_F32:  # Triton's interpreter computes bf16 tl.dot wrongly: fp32 there",
                  "    xt = xt.to(tl.float32)", "    wt = wt.to(tl.float32)"]
    inner.append(f"acc += tl.dot(xt, wt{prec})")
    L += ["    " + ln for ln in inner]
    has_bias = isinstance(b, fx.Node)
    if has_bias:
        L.append("acc += tl.load(b_ptr + cog, mask=cmask, other=0.0).to(tl.float32)[None, :]")
    L.append("omask = pmask[:, None] & cmask[None, :]")
    L += body.lines
    L += store_lines(body, "pn[:, None] * (COUT * PSP) + cog[None, :] * PSP + sp[:, None]", "omask")
    params = (["x_ptr", "w_ptr"] + (["b_ptr"] if has_bias else []) +
              [f"out{j}_ptr" for j in range(len(body.outputs))] + [f"in{q}_ptr" for q in range(len(body.inputs))] +
              [f"sc{q}" for q in range(len(body.scalars))] +
              ["P", "PSP", "R", "CIN_G", "COUT_G", "COUT"] + [f"I{d}" for d in sp] + [f"O{d}" for d in sp] +
              [f"K{d}" for d in sp] + [f"sx{d}" for d in range(S + 2)] + [f"sw{d}" for d in range(S + 2)] +
              [f"in{q}_s{d}" for q in range(len(body.inputs)) for d in range(S + 2)] +
              ["CONV_BLOCK_P: tl.constexpr", "CONV_BLOCK_CO: tl.constexpr", "CONV_BLOCK_R: tl.constexpr"] +
              (["DOT_PREC: tl.constexpr"] if "DOT_PREC" in prec else []) +
              (["DOT_F32: tl.constexpr"] if dtype(x) == torch.bfloat16 else []))
    kind = "transposed " if transposed else ""
    doc = (f'    """{kind}conv{S}d, stride {stride}, padding {padding}, dilation {dilation}, groups {groups}; '
           f'epilogue: {", ".join(n.name for n in group.nodes) or "none"}."""')
    src = "\n".join([f"@triton.jit\ndef {name}({', '.join(params)}):", doc] + ["    " + ln for ln in L]) + "\n"
    xv, wv = names[x], names[w]
    G = int(groups)
    launch = [f"_N, _CIN = {xv}.shape[0], {xv}.shape[1]", f"_I = {xv}.shape[2:]", f"_K = {wv}.shape[2:]"]
    if transposed:
        launch += [f"_COUT = {wv}.shape[1] * {G}", f"_CIN_G = {wv}.shape[0] // {G}",
                   "_O = [(_I[d] - 1) * s - 2 * p + dl * (_K[d] - 1) + op + 1 for d, (s, p, dl, op) in "
                   f"enumerate(zip({stride}, {padding}, {dilation}, {output_padding}))]"]
    else:
        launch += [f"_COUT = {wv}.shape[0]", f"_CIN_G = {wv}.shape[1]",
                   "_O = [(_I[d] + 2 * p - dl * (_K[d] - 1) - 1) // s + 1 for d, (s, p, dl) in "
                   f"enumerate(zip({stride}, {padding}, {dilation}))]"]
    launch += ["_shape = [_N, _COUT, *_O]", "_PSP = _numel(_O)", f"_COUT_G = _COUT // {G}",
               "_R = _CIN_G * _numel(_K)"]
    outs = [names[n] for n in body.outputs]
    launch += [f"{ov} = torch.empty(_shape, dtype={torch_dtype(dtype(n))}, device=dev)"
               for ov, n in zip(outs, body.outputs)]
    strd = []
    for q, node in enumerate(body.inputs):
        launch.append(f"_e{q} = {names[node]}.expand(_shape)")
        strd.append(f"*_e{q}.stride()")
    args = [xv, wv] + ([names[b]] if has_bias else []) + outs + [f"_e{q}" for q in range(len(body.inputs))] + \
        [names[s] for s in body.scalars] + ["_N * _PSP", "_PSP", "_R", "_CIN_G", "_COUT_G", "_COUT", "*_I", "*_O",
                                            "*_K", f"*{xv}.stride()", f"*{wv}.stride()"] + strd
    launch.append(f"if _N * _PSP and _COUT_G: {name}[(triton.cdiv(_N * _PSP, CONV_BLOCK_P), "
                  f"triton.cdiv(_COUT_G, CONV_BLOCK_CO), {G})]("
                  f"{', '.join(args)}, CONV_BLOCK_P=CONV_BLOCK_P, CONV_BLOCK_CO=CONV_BLOCK_CO, "
                  f"CONV_BLOCK_R=CONV_BLOCK_R, num_warps=CONV_NUM_WARPS"
                  f"{', DOT_PREC=MM_PRECISION' if 'DOT_PREC' in prec else ''}"
                  f"{', DOT_F32=_DOT_F32' if dtype(x) == torch.bfloat16 else ''})")
    return src, launch, body.helpers
