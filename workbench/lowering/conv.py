"""Convolution 1d/2d/3d (stride, padding, dilation, groups, transposed) as an implicit GEMM.

out[n, g*Cg_out + co, o...] = sum_{ci, k...} x[n, g*Cg_in + ci, i...] * w[...]: the output positions
(n and the spatial o, flattened) are the GEMM rows, the group's output channels its columns, and
(ci, k...) the reduction axis, walked with `tl.dot` and an fp32 accumulator. Direct convolution reads
i = o * stride - padding + k * dilation; the transposed one gathers i = (o + padding - k * dilation) /
stride where that division is exact. Strides, paddings and dilations are the graph's constants, written
into the kernel as literals; every size is an argument. The bias and any fused pointwise epilogue run on
the accumulator tile. Index math is 32-bit unless an offset can pass 2**31 (`IDX64`).

A transposed convolution with a stride splits its outputs into stride-residue classes, one class per
program (axis 2 is group x class): within a class only the taps with k * dilation = o + padding (mod stride)
reach an input, and with dilation 1 exactly those are walked, instead of computing the stride**d - 1 of
every stride**d products that read nothing. Then one of two loops over the reduction axis, chosen from the
group's input channels (a weight size, fixed when lowering):
- tap-major, when a group has >= 16 input channels: one kernel tap at a time, CONV_BLOCK_R channels of it
  per step. The tap's input rows are computed once per step on a [CONV_BLOCK_P] vector, so the
  [CONV_BLOCK_P, CONV_BLOCK_R] tile costs one add per element. x and w are read channels-fastest (a
  channels-last copy of x, w permuted alike): the tiles are then contiguous along the reduction axis, so
  they load as 16-byte vectors and Hopper's wgmma takes them (checked in the sm_90 TTGIR/PTX: from 4-byte
  cp.async and mma.sync in NCHW to 16-byte cp.async and wgmma). Positions stay the tiles' first axis;
  put last, Triton's coalescing made a warp's lanes walk channels of NCHW, a plane apart each;
- flat, for fewer channels (an image's 3): (ci, taps) flattened, CONV_BLOCK_R at a time, so a 3-channel
  3x3 reduction is one step of 27 instead of nine steps of 16 mostly masked channels.
"""
from __future__ import annotations

import torch
import torch.fx as fx

from workbench.lowering import cat_chain
from workbench.lowering import pointwise as pw
from workbench.lowering.epilogue import Unsupported, build_body, store_lines
from workbench.lowering.families import Family, Space, register_family, register_space
from workbench.lowering.graph import dtype, op_name, packet, val
from workbench.lowering.partition import Group
from workbench.lowering.primitives import register_tunables

TUNABLES = ("CONV_BLOCK_P", "CONV_BLOCK_CO", "CONV_BLOCK_R", "CONV_NUM_WARPS", "DW_BLOCK_C", "DW_BLOCK_P",
            "DIRECT_BLOCK_P", "DIRECT_BLOCK_CO", "DIRECT_NUM_WARPS", "CONV_DIRECT", "CONV_NUM_STAGES")
# DW_*: the depthwise form's [channels, positions] tile. On the H200 (level 1 82-85, fp32, 4 warps) 4 x 256
# ran at 1.08-2.24x of cuDNN, the implicit GEMM's 32 x 64 at 0.20-0.52x (experiments/depthwise_tiles)
# CONV_*: the implicit GEMM's tile. The untuned draft's fp32 dot is "ieee", Triton's FMA path: each k step a
# thread reads its rows of x and columns of w from shared memory (LDS.128) and does one FFMA per output it
# holds. sm_90 SASS of the tap loop (python -m workbench.lowering.conv_sm90, level 1 63 and 61): a 64 x 32 tile
# on 4 warps (16 outputs a thread) issues 256 FFMA per 32 LDS.128, 128 x 64 on 8 warps (32 a thread) 512 per
# 48. An SM issues 4 FFMA warp-instructions a clock but moves one LDS.128 warp-instruction (512 B) per 4
# clocks, so FFMA-bound needs >= 16 FFMA per LDS.128: the 64 x 32 default was capped by shared-memory bandwidth
# at 8/16 = 50% of the FP32 peak, 128 x 64 x 8 warps at 67%. Two stages: with three, ptxas held level 1 68's
# kernel (transposed 3-D) at 128 registers and spilled 16 bytes; with two it takes 118, 34 KB of shared memory,
# and a k step's 1024 FFMA a thread are long enough to cover the next step's loads
DEFAULTS = {"CONV_BLOCK_P": ([16, 32, 64, 128], 128), "CONV_BLOCK_CO": ([16, 32, 64, 128], 64),
            "CONV_BLOCK_R": ([16, 32, 64], 32), "CONV_NUM_WARPS": ([2, 4, 8], 8),
            "CONV_NUM_STAGES": ([2, 3, 4, 5], 2),
            "DW_BLOCK_C": ([1, 2, 4, 8], 4), "DW_BLOCK_P": ([256, 512, 1024], 256),
            "DIRECT_BLOCK_P": ([128, 256, 512], 256), "DIRECT_BLOCK_CO": ([8, 16, 32, 64], 16),
            "DIRECT_NUM_WARPS": ([1, 2, 4], 4), "CONV_DIRECT": ([1, 0], 1)}
register_tunables(DEFAULTS)
TAP_MIN_CHANNELS = 16  # tl.dot's smallest K: fewer channels per group take the direct (or flat) loop
DIRECT_MAX_TAPS = 32  # the direct loop unrolls the last dim's taps: up to 32 of them


def _decompose(var: str, names: list[str], sizes: list[str], out: list[str]) -> str:
    """Lines splitting `var` into `names` (last fastest) over `sizes[1:]`; returns the leading index."""
    rest = var
    for d in range(len(names) - 1, 0, -1):
        out.append(f"{names[d]} = {rest} % {sizes[d]}")
        out.append(f"_q{names[d]} = {rest} // {sizes[d]}")
        rest = f"_q{names[d]}"
    out.append(f"{names[0]} = {rest}")
    return names[0]


def _per_dim(v: list, S: int) -> list[int]:
    return [int(x) for x in (list(v) * S if len(v) == 1 else list(v))]


def _taps(S: int, stride: list[int], padding: list[int], dilation: list[int], classes: bool,
          L: list[str]) -> list[tuple[str, int, str]]:
    """Per dim (first tap, tap step, tap count) as kernel expressions. In a stride-residue class r (a
    transposed convolution's outputs o = r + stride * j) only the taps with k * dilation = r + padding
    (mod stride) reach an input: with dilation 1 they are k = (r + padding) % stride + m * stride, walked
    exactly; with another dilation every tap is walked and the others are masked (`_in_pos`)."""
    kv = []
    for d in range(S):
        if classes and stride[d] > 1 and dilation[d] == 1:
            L.append(f"kst{d} = (cr{d} + {padding[d]}) % {stride[d]}")
            L.append(f"KV{d} = (K{d} - kst{d} + {stride[d] - 1}) // {stride[d]}")
            kv.append((f"kst{d}", stride[d], f"KV{d}"))
        else:
            kv.append(("0", 1, f"K{d}"))
    return kv


def _in_pos(d: int, transposed: bool, classes: bool, stride: list[int], padding: list[int], dilation: list[int],
            o: str, j: str, k: str, ok: str) -> list[str]:
    """Lines giving i{d}, the input position of output row `o` (class row `j`) and tap `k`, and and-ing
    its bounds (and, for a dilated class dim, its divisibility) into `ok`."""
    s, p, dl = stride[d], padding[d], dilation[d]
    if not transposed:
        lines = [f"i{d} = {o} * {s} + ({k} * {dl} - {p})"]
    elif classes and s > 1:
        # o = r + s * j: i = j + (r + p - k * dl) / s, exact for the class's taps
        lines = [f"tq{d} = cr{d} + {p} - {k} * {dl}", f"i{d} = {j} + tq{d} // {s}"]
        if dl != 1:
            lines.append(f"{ok} = {ok} & (tq{d} % {s} == 0)")
    else:
        lines = [f"i{d} = {o} + ({p} - {k} * {dl})"]
    return lines + [f"{ok} = {ok} & (i{d} >= 0) & (i{d} < I{d})"]


def _flat_loop(S: int, transposed: bool, stride: list[int], padding: list[int], dilation: list[int],
               classes: bool, prec: str, bf16: bool) -> list[str]:
    """The reduction over (ci, taps) flattened, CONV_BLOCK_R at a time: r splits into ci and the taps on a
    [CONV_BLOCK_R] vector, then each (row, r) pair gets its input position."""
    sp = range(S)
    L: list[str] = []
    kv = _taps(S, stride, padding, dilation, classes, L)
    if not transposed:
        # x's offset splits into a row part and a column part, i = (o * s - p) + k * dl: one add per element
        # of the [P, R] tile instead of an IMAD per dim (sm_90 SASS of level 1 54's flat kernel: 1861-3931
        # IMAD, the tap loop's 280), and a dim without padding needs no bounds test (its windows fit)
        L.append("xrow = pn * sx0")
        for d in sp:
            L += [f"b{d} = o{d} * {stride[d]} - {padding[d]}", f"xrow += b{d} * sx{2 + d}"]
    L += ["RT = CIN_G * " + " * ".join(n for _, _, n in kv), "for r0 in range(0, RT, CONV_BLOCK_R):",
          "    r = r0 + tl.arange(0, CONV_BLOCK_R)", "    rmask = r < RT"]
    inner: list[str] = []
    _decompose("r", ["ci"] + [f"m{d}" for d in sp], ["CIN_G"] + [n for _, _, n in kv], inner)
    inner += ["cig = g * CIN_G + ci", "valid = pmask[:, None] & rmask[None, :]"]
    xoff = ["pn[:, None] * sx0", "cig[None, :] * sx1"]
    xcol = ["cig * sx1"]
    for d in sp:
        first, step, _ = kv[d]
        inner.append(f"k{d} = {first} + m{d} * {step}" if step > 1 or first != "0" else f"k{d} = m{d}")
        if not transposed:
            inner.append(f"kd{d} = k{d} * {dilation[d]}")
            if padding[d] > 0:
                inner += [f"i{d} = b{d}[:, None] + kd{d}[None, :]", f"valid = valid & (i{d} >= 0) & (i{d} < I{d})"]
            xcol.append(f"kd{d} * sx{2 + d}")
            continue
        inner += _in_pos(d, transposed, classes, stride, padding, dilation, f"o{d}[:, None]", f"j{d}[:, None]",
                         f"k{d}[None, :]", "valid")
        xoff.append(f"i{d} * sx{2 + d}")
    if not transposed:
        inner.append(f"xcol = {' + '.join(xcol)}")
        xoff = ["xrow[:, None]", "xcol[None, :]"]
    inner.append(f"xt = tl.load(x_ptr + {' + '.join(xoff)}, mask=valid, other=0.0)")
    woff = ["cig[:, None] * sw0", "co[None, :] * sw1"] if transposed else ["cog[None, :] * sw0", "ci[:, None] * sw1"]
    woff += [f"k{d}[:, None] * sw{2 + d}" for d in sp]
    inner.append(f"wt = tl.load(w_ptr + {' + '.join(woff)}, mask=rmask[:, None] & cmask[None, :], other=0.0)")
    inner += _dot(prec, bf16)
    return L + ["    " + ln for ln in inner]


def _depthwise_loop(S: int, stride: list[int], padding: list[int], dilation: list[int]) -> list[str]:
    """Depthwise (one input channel a group): no reduction over channels, so no tl.dot. Each tap adds
    x[n, g, i...] * w[c, 0, k...] to a [CONV_BLOCK_CO, CONV_BLOCK_P] tile, positions last: in NCHW a warp's
    lanes then read neighbouring positions of one plane, with no channels-last copy."""
    sp = range(S)
    L = ["NT = " + " * ".join(f"K{d}" for d in sp), "for t in range(0, NT):"]
    inner: list[str] = []
    _decompose("t", [f"k{d}" for d in sp], [f"K{d}" for d in sp], inner)
    inner += ["rowok = pmask", "xrow = pn * sx0"]
    for d in sp:
        inner += _in_pos(d, False, False, stride, padding, dilation, f"o{d}", "", f"k{d}", "rowok")
        inner.append(f"xrow += i{d} * sx{2 + d}")
    wk = " + ".join(f"k{d} * sw{2 + d}" for d in sp)
    inner += ["xt = tl.load(x_ptr + g[:, None] * sx1 + xrow[None, :], mask=cmask[:, None] & rowok[None, :], "
              "other=0.0).to(tl.float32)",
              f"wt = tl.load(w_ptr + cog * sw0 + {wk}, mask=cmask, other=0.0).to(tl.float32)",
              "acc += wt[:, None] * xt"]
    return L + ["    " + ln for ln in inner]


def _direct_loop(S: int, stride: list[int], padding: list[int], dilation: list[int], taps: list[int]) -> list[str]:
    """Few input channels a group (an image's 3): no tl.dot. Each (channel, tap) adds the outer product of
    a [CONV_BLOCK_CO] vector of w and a [CONV_BLOCK_P] vector of x to the fp32 tile, so every FMA is a
    useful one (the flat GEMM padded a 3-channel 3x3x3 reduction of 81 to 96 and its output channels to
    the block, and split each (row, r) pair's index on the tile). The rows' input offsets are computed
    once; a tap adds its offset (the last dim's taps are unrolled: their count is the weight's, fixed when
    lowering), and only a padded dim tests its bounds.

    The tile is [channels, positions] with at least 32 * num_warps positions: Triton's default layout then
    puts lanes and warps along the positions and every channel of a position in one thread, which is
    exactly the layout of the x vector's own load (one coalesced load a tap, no shared-memory exchange)
    and makes w's vector a uniform load (its channels contiguous: `_wd`, a copy of w, channels last).
    [positions, channels] spread a 16-channel tile over 16 lanes: each tap's x went through shared
    memory, two barriers a tap (sm_90 SASS)."""
    sp = range(S)
    L = ["xrow = pn * sx0 + g * CIN_G * sx1"]
    for d in sp:
        L.append(f"b{d} = o{d} * {stride[d]} - {padding[d]}")
        L.append(f"xrow += b{d} * sx{2 + d}")
    # a runtime loop over (channel, every tap dim but the last), the last dim's taps unrolled: a full unroll
    # let ptxas hoist every tap's loads (a 3x3x3 tile of 128 x 64 spilled 11 KB a thread on sm_90)
    last, outer = S - 1, _numel(taps[:-1])
    # w is the padded copy `_wd` (launch): output channels fastest, each group's padded to whole blocks, so
    # a tap's [CONV_BLOCK_CO] vector loads unmasked as 16-byte vectors (a masked one went out as scalars)
    L += ["wrow = (g * COUT_GP + co) * sw0", f"for it in range(0, CIN_G * {outer}):"]
    inner: list[str] = []
    rest = "it"
    for d in range(last - 1, -1, -1):   # it -> (ci, k0 .. k[S-2]), last fastest; literal divisors
        inner.append(f"k{d} = {rest} % {taps[d]}")
        inner.append(f"_t{d} = {rest} // {taps[d]}")
        rest = f"_t{d}"
    inner.append(f"ci = {rest}")
    xo = "".join(f" + k{d} * {dilation[d]} * sx{2 + d}" for d in range(last))
    wo = "".join(f" + k{d} * sw{2 + d}" for d in range(last))
    inner += [f"xci = x_ptr + xrow + ci * sx1{xo}", f"wci = w_ptr + wrow + ci * sw1{wo}"]
    ok = " & ".join(["pmask"] + [f"(b{d} + k{d} * {dilation[d]} >= 0) & (b{d} + k{d} * {dilation[d]} < I{d})"
                                 for d in range(last) if padding[d] > 0])
    inner += [f"rowok = {ok}", f"for kl in tl.static_range({taps[last]}):"]
    okl = "rowok" + (f" & (b{last} + kl * {dilation[last]} >= 0) & (b{last} + kl * {dilation[last]} < I{last})"
                     if padding[last] > 0 else "")
    inner += [f"    xt = tl.load(xci + kl * {dilation[last]} * sx{2 + last}, mask={okl}, other=0.0).to(tl.float32)",
              f"    wt = tl.load(wci + kl * sw{2 + last}).to(tl.float32)",
              "    acc += wt[:, None] * xt[None, :]"]
    return L + ["    " + ln for ln in inner]


def _dot(prec: str, bf16: bool) -> list[str]:
    out = []
    if bf16:
        out += ["if DOT_F32:  # Triton's interpreter computes bf16 tl.dot wrongly: fp32 there",
                "    xt = xt.to(tl.float32)", "    wt = wt.to(tl.float32)"]
    return out + [f"acc += tl.dot(xt, wt{prec})"]


def _tap_loop(S: int, transposed: bool, stride: list[int], padding: list[int], dilation: list[int],
              classes: bool, prec: str, bf16: bool) -> list[str]:
    """One loop of (tap, channel block) steps: the tap's input rows (a [CONV_BLOCK_P] vector) and its
    weight offset, then CONV_BLOCK_R channels of it."""
    sp = range(S)
    L: list[str] = []
    kv = _taps(S, stride, padding, dilation, classes, L)
    L += ["NT = " + " * ".join(n for _, _, n in kv) + " * NCB", "for t in range(0, NT):"]
    inner = ["cb = t % NCB", "tap = t // NCB"]
    _decompose("tap", [f"m{d}" for d in sp], [n for _, _, n in kv], inner)
    inner += ["rowok = pmask", "xrow = pn * sx0"]
    for d in sp:
        first, step, _ = kv[d]
        inner.append(f"k{d} = {first} + m{d} * {step}" if step > 1 or first != "0" else f"k{d} = m{d}")
        inner += _in_pos(d, transposed, classes, stride, padding, dilation, f"o{d}", f"j{d}", f"k{d}", "rowok")
        inner.append(f"xrow += i{d} * sx{2 + d}")
    # whole channel blocks (CH_EVEN): a mask constant along the channels lets the loads be 16-byte vectors
    inner += ["c = cb * CONV_BLOCK_R + tl.arange(0, CONV_BLOCK_R)", "if CH_EVEN:",
              "    cm = tl.full([CONV_BLOCK_R], 1, tl.int1)", "else:", "    cm = c < CIN_G", "cig = g * CIN_G + c"]
    wk = " + ".join(f"k{d} * sw{2 + d}" for d in sp)
    inner.append("xt = tl.load(x_ptr + xrow[:, None] + cig[None, :] * sx1, mask=rowok[:, None] & cm[None, :], "
                 "other=0.0)")
    woff = "cig[:, None] * sw0 + co[None, :] * sw1" if transposed else "cog[None, :] * sw0 + c[:, None] * sw1"
    inner.append(f"wt = tl.load(w_ptr + {woff} + {wk}, mask=cm[:, None] & cmask[None, :], other=0.0)")
    inner += _dot(prec, bf16)
    return L + ["    " + ln for ln in inner]


def conv_kernel(name: str, group: Group, mat: list[fx.Node], names: dict[fx.Node, str],
                precision: str) -> tuple[str, list[str], set[str]]:
    """(source, launch lines, helpers) of a convolution group. A convolution that can take the direct form
    gets two kernels, direct and flat (`<name>_flat`), and the forward launches the one CONV_DIRECT names:
    the form is a tunable, so the tuner tries the tensor-core flat GEMM (tf32x3) against the FMA direct
    loop on each problem, each checked against eager like any config."""
    if not _direct_ok(group):
        return _conv_source(name, group, mat, names, precision, direct=False)
    src_d, launch_d, help_d = _conv_source(name, group, mat, names, precision, direct=True)
    src_f, launch_f, help_f = _conv_source(f"{name}_flat", group, mat, names, precision, direct=False)
    launch = ["if CONV_DIRECT:"] + ["    " + ln for ln in launch_d] + ["else:"] + ["    " + ln for ln in launch_f]
    return src_d + "\n\n" + src_f, launch, help_d | help_f


def _direct_ok(group: Group) -> bool:
    """Whether the direct form applies: not transposed, fewer than 16 input channels a group but more than
    one when grouped (one is the depthwise form), and static taps, at most DIRECT_MAX_TAPS along the last dim
    (unrolled)."""
    anchor = group.anchor
    assert anchor is not None
    x, w, _b, _stride, _padding, _dilation, transposed, _op, groups = anchor.args
    if transposed or val(x).dim() - 2 not in (1, 2, 3):
        return False
    cin_g = int(val(w).shape[1])
    if cin_g >= TAP_MIN_CHANNELS or (cin_g == 1 and int(groups) > 1):
        return False
    taps = val(w).shape[2:]
    return all(isinstance(k, int) for k in taps) and int(taps[-1]) <= DIRECT_MAX_TAPS


def _conv_source(name: str, group: Group, mat: list[fx.Node], names: dict[fx.Node, str], precision: str,
                 direct: bool) -> tuple[str, list[str], set[str]]:
    anchor = group.anchor
    assert anchor is not None
    x, w, b, stride, padding, dilation, transposed, output_padding, groups = anchor.args
    S = val(x).dim() - 2
    if S not in (1, 2, 3) or not dtype(x).is_floating_point or dtype(x) != dtype(w):
        raise Unsupported(f"unsupported: {op_name(anchor)} ({S}-d, {dtype(x)} x {dtype(w)})")
    stride, padding = _per_dim(stride, S), _per_dim(padding, S)
    dilation, output_padding = _per_dim(dilation, S), _per_dim(output_padding, S)
    G = int(groups)
    cin_g = int(val(w).shape[0]) // G if transposed else int(val(w).shape[1])
    dw = not transposed and cin_g == 1 and G > 1
    tap = cin_g >= TAP_MIN_CHANNELS
    taps = [int(k) for k in val(w).shape[2:]] if direct else []
    classes = bool(transposed) and any(s > 1 for s in stride)
    ncls = 1
    for s in (stride if classes else []):
        ncls *= s
    sp = list(range(S))
    o = [f"o{d}" for d in sp]
    res = pw.Val("acc", torch.float32)
    # the tile is [positions, channels], or [channels, positions] for a depthwise convolution
    P_, C_ = ("[None, :]", "[:, None]") if dw or direct else ("[:, None]", "[None, :]")
    idx = [f"pn{P_}", f"cog{C_}"] + [f"o{d}{P_}" for d in sp]
    body = build_body(group, [], idx, "omask", f"(pn{P_} * 0 + cog{C_} * 0)", {anchor: res})
    body.outputs = ([anchor] if anchor in mat else []) + [n for n in mat if n is not anchor]
    body.values[anchor] = res  # type: ignore[attr-defined]
    from workbench.lowering.templates import dot_precision

    prec = dot_precision(precision) if dtype(x) == torch.float32 else ""
    bf16 = dtype(x) == torch.bfloat16
    L: list[str] = ["pid_p = tl.program_id(0)", "pid_c = tl.program_id(1)", "pid_g = tl.program_id(2)",
                    "if IDX64:", "    rp = pid_p.to(tl.int64) * CONV_BLOCK_P + tl.arange(0, CONV_BLOCK_P)",
                    "else:", "    rp = pid_p * CONV_BLOCK_P + tl.arange(0, CONV_BLOCK_P)", "pmask = rp < P",
                    "co = pid_c * CONV_BLOCK_CO + tl.arange(0, CONV_BLOCK_CO)", "cmask = co < COUT_G"]
    if dw:
        # program axis 1 walks all output channels; g: each channel's group, which is its input channel
        L[-2:] = ["cog = pid_c * CONV_BLOCK_CO + tl.arange(0, CONV_BLOCK_CO)", "cmask = cog < COUT",
                  "g = cog // COUT_G", "sp = rp % PSP", "pn = rp // PSP"]
        _decompose("sp", o, [f"O{d}" for d in sp], L)
        L.append("osp = sp")
    elif classes:
        # program axis 2 is (group, stride-residue class): rows of one class are o = r + stride * j
        L += [f"g = pid_g // {ncls}", f"cls = pid_g % {ncls}"]
        _decompose("cls", [f"cr{d}" for d in sp], [str(s) for s in stride], L)
        L += ["cog = g * COUT_G + co", "sp = rp % PSP", "pn = rp // PSP"]
        _decompose("sp", [f"j{d}" for d in sp], [f"J{d}" for d in sp], L)
        for d in sp:
            L.append(f"o{d} = cr{d} + {stride[d]} * j{d}")
            L.append(f"pmask = pmask & (o{d} < O{d})")
        L.append("osp = " + "".join("(" for _ in sp[1:]) + "o0" + "".join(f") * O{d} + o{d}" for d in sp[1:]))
    else:
        L += ["g = pid_g", "cog = g * COUT_G + co", "sp = rp % PSP", "pn = rp // PSP"]
        _decompose("sp", o, [f"O{d}" for d in sp], L)
        L.append("osp = sp")
    if dw:
        prec, tap = "", False  # no tl.dot: elementwise fp32 products, exact as eager's
        L.append("acc = tl.zeros([CONV_BLOCK_CO, CONV_BLOCK_P], tl.float32)")
        L += _depthwise_loop(S, stride, padding, dilation)
    elif direct:
        prec = ""  # no tl.dot: fp32 products, one FMA chain per output as eager's fp32 convolution
        L.append("acc = tl.zeros([CONV_BLOCK_CO, CONV_BLOCK_P], tl.float32)")
        L += _direct_loop(S, stride, padding, dilation, taps)
    else:
        L.append("acc = tl.zeros([CONV_BLOCK_P, CONV_BLOCK_CO], tl.float32)")
        L += (_tap_loop(S, bool(transposed), stride, padding, dilation, classes, prec, bf16) if tap else
              _flat_loop(S, bool(transposed), stride, padding, dilation, classes, prec, bf16))
    has_bias = isinstance(b, fx.Node)
    if has_bias:
        L.append(f"acc += tl.load(b_ptr + cog, mask=cmask, other=0.0).to(tl.float32){C_}")
    L.append(f"omask = pmask{P_} & cmask{C_}")
    L += body.lines
    # an output stored into its slice of a cat's buffer (cat_chain.py) has that buffer's batch and channel
    # strides; its positions stay contiguous (a cat along dim 0 or 1)
    strided = [j for j, n in enumerate(body.outputs) if n in group.into]
    L += store_lines(body, [f"pn{P_} * out{j}_sn + cog{C_} * out{j}_sc + osp{P_}" if j in strided else
                            f"pn{P_} * (COUT * OSP) + cog{C_} * OSP + osp{P_}" for j in range(len(body.outputs))],
                     "omask")
    params = (["x_ptr", "w_ptr"] + (["b_ptr"] if has_bias else []) +
              [f"out{j}_ptr" for j in range(len(body.outputs))] + [f"in{q}_ptr" for q in range(len(body.inputs))] +
              [f"sc{q}" for q in range(len(body.scalars))] +
              ["P", "PSP", "OSP", "R", "NCB", "CIN_G", "COUT_G", "COUT"] + (["COUT_GP"] if direct else []) +
              [f"out{j}_s{c}" for j in strided for c in "nc"] +
              [f"I{d}" for d in sp] +
              [f"O{d}" for d in sp] + [f"J{d}" for d in sp] + [f"K{d}" for d in sp] +
              [f"sx{d}" for d in range(S + 2)] + [f"sw{d}" for d in range(S + 2)] +
              [f"in{q}_s{d}" for q in range(len(body.inputs)) for d in range(S + 2)] +
              ["CONV_BLOCK_P: tl.constexpr", "CONV_BLOCK_CO: tl.constexpr", "CONV_BLOCK_R: tl.constexpr",
               "IDX64: tl.constexpr"] + (["CH_EVEN: tl.constexpr"] if tap else []) +
              (["DOT_PREC: tl.constexpr"] if "DOT_PREC" in prec else []) +
              (["DOT_F32: tl.constexpr"] if bf16 and not (dw or direct) else []))
    kind = "transposed " if transposed else ""
    loop = ("depthwise" if dw else "direct (ci, taps)" if direct else "tap-major" if tap else "flat (ci, k)") + \
        (f", {ncls} stride classes" if classes else "")
    doc = (f'    """{kind}conv{S}d, stride {stride}, padding {padding}, dilation {dilation}, groups {groups}; '
           f'{loop} reduction; epilogue: {", ".join(n.name for n in group.nodes) or "none"}."""')
    src = "\n".join([f"@triton.jit\ndef {name}({', '.join(params)}):", doc] + ["    " + ln for ln in L]) + "\n"
    launch = _launch(name, body, names, x, w, b if has_bias else None, transposed, G, stride, padding,
                     dilation, output_padding, classes, ncls, tap, prec, bf16 and not (dw or direct), dw, direct,
                     group.into)
    return src, launch, body.helpers


def _numel(shape: list[int]) -> int:
    n = 1
    for d in shape:
        n *= d
    return n


def _launch(name: str, body, names: dict[fx.Node, str], x: fx.Node, w: fx.Node, b: fx.Node | None,  # noqa: ANN001
            transposed: bool, G: int, stride: list[int], padding: list[int], dilation: list[int],
            output_padding: list[int], classes: bool, ncls: int, tap: bool, prec: str, bf16: bool,
            dw: bool = False, direct: bool = False, into: dict | None = None) -> list[str]:
    xv, wv = names[x], names[w]
    launch = [f"_N, _CIN = {xv}.shape[0], {xv}.shape[1]", f"_I = {xv}.shape[2:]", f"_K = {wv}.shape[2:]"]
    if transposed:
        launch += [f"_COUT = {wv}.shape[1] * {G}", f"_CIN_G = {wv}.shape[0] // {G}",
                   "_O = [(_I[d] - 1) * s - 2 * p + dl * (_K[d] - 1) + op + 1 for d, (s, p, dl, op) in "
                   f"enumerate(zip({stride}, {padding}, {dilation}, {output_padding}))]"]
    else:
        launch += [f"_COUT = {wv}.shape[0]", f"_CIN_G = {wv}.shape[1]",
                   "_O = [(_I[d] + 2 * p - dl * (_K[d] - 1) - 1) // s + 1 for d, (s, p, dl) in "
                   f"enumerate(zip({stride}, {padding}, {dilation}))]"]
    # rows of one stride class: J = ceil(O / stride) per dim (the class's last row may fall past O: masked)
    launch += ["_shape = [_N, _COUT, *_O]", "_OSP = _numel(_O)",
               f"_J = [-(-_O[d] // s) for d, s in enumerate({stride})]" if classes else "_J = list(_O)",
               "_PSP = _numel(_J)", f"_COUT_G = _COUT // {G}", "_R = _CIN_G * _numel(_K)",
               # a channel block no wider than the channels (tl.dot needs 16): thin groups waste no lanes
               "_BR = min(CONV_BLOCK_R, max(16, triton.next_power_of_2(_CIN_G)))" if tap else "_BR = CONV_BLOCK_R",
               "_NCB = -(-_CIN_G // _BR)"]
    if tap:
        # channels fastest in memory (a copy of x, a few KB of w): a tap's [positions, channels] tile is then
        # contiguous along the reduction axis, the layout Hopper's wgmma reads and 16-byte loads fill
        wdim = 0 if transposed else 1
        launch += [f"_xc = {xv} if {xv}.stride(1) == 1 else {xv}.movedim(1, -1).contiguous().movedim(-1, 1)",
                   f"_wc = {wv} if {wv}.stride({wdim}) == 1 else "
                   f"{wv}.movedim({wdim}, -1).contiguous().movedim(-1, {wdim})"]
        xv, wv = "_xc", "_wc"
    if direct:
        # w (a few KB) as [G * COUT_GP, CIN_G, K...] with output channels fastest, each group's padded with
        # zeros to whole _BC blocks: a tap's [CONV_BLOCK_CO] vector is one unmasked, uniform 16-byte load
        launch += ["_BC = min(DIRECT_BLOCK_CO, max(4, triton.next_power_of_2(_COUT_G)))",
                   "_COUT_GP = -(-_COUT_G // _BC) * _BC",
                   f"_wd = torch.zeros([_CIN_G, *_K, {G}, _COUT_GP], dtype={wv}.dtype, device={wv}.device)",
                   f"_wd[..., :_COUT_G] = {wv}.reshape({G}, _COUT_G, _CIN_G, *_K).movedim(0, -1).movedim(0, -1)",
                   f"_wd = _wd.view(_CIN_G, *_K, {G} * _COUT_GP).movedim(-1, 0)"]
        wv = "_wd"
    outs = [names[n] for n in body.outputs]
    into = into or {}
    launch += cat_chain.out_lines(body.outputs, names, "_shape", into)
    strd, exp = [], []
    for q, node in enumerate(body.inputs):
        launch.append(f"_e{q} = {names[node]}.expand(_shape)")
        strd.append(f"*_e{q}.stride()")
        exp.append(f"_e{q}")
    args = [xv, wv] + ([names[b]] if b is not None else []) + outs + exp + \
        [names[s] for s in body.scalars] + ["_N * _PSP", "_PSP", "_OSP", "_R", "_NCB", "_CIN_G", "_COUT_G", "_COUT"] + \
        (["_COUT_GP"] if direct else []) + [f"*{names[n]}.stride()[:2]" for n in body.outputs if n in into] + \
        ["*_I", "*_O", "*_J", "*_K", f"*{xv}.stride()", f"*{wv}.stride()"] + strd
    big = ", ".join([xv, wv] + outs + exp)
    bp, bc = ("DW_BLOCK_P", "DW_BLOCK_C") if dw else ("CONV_BLOCK_P", "_BCO")
    nw, stages = "CONV_NUM_WARPS", ", num_stages=CONV_NUM_STAGES"
    if not dw and not direct:
        # output channels of a group in one block no wider than they are (tl.dot needs 16): 16 a group (level 1
        # 58, 75) or 8 (72, 73) left 3/4 of a 64-wide tile's columns idle
        launch.append("_BCO = min(CONV_BLOCK_CO, max(16, triton.next_power_of_2(_COUT_G)))")
    else:
        stages = ""  # the depthwise and direct forms (no tl.dot) keep Triton's default of 3 stages
    if direct:
        # output channels of a group in one block up to DIRECT_BLOCK_CO (16 for a 16-channel output: no lane
        # idle); DIRECT_BLOCK_P >= 32 * DIRECT_NUM_WARPS positions (their choices keep it so)
        bp, bc, nw = "DIRECT_BLOCK_P", "_BC", "DIRECT_NUM_WARPS"
    grid = f"triton.cdiv(_COUT, {bc}), 1" if dw else f"triton.cdiv(_COUT_G, {bc}), {G * ncls}"
    launch.append(f"if _N * _PSP and _COUT_G: {name}[(triton.cdiv(_N * _PSP, {bp}), {grid})]("
                  f"{', '.join(args)}, CONV_BLOCK_P={bp}, CONV_BLOCK_CO={bc}, "
                  f"CONV_BLOCK_R=_BR, IDX64=_idx64(_N * _COUT * _OSP, {big}), num_warps={nw}{stages}"
                  f"{', CH_EVEN=_CIN_G % _BR == 0' if tap else ''}"
                  f"{', DOT_PREC=MM_PRECISION' if 'DOT_PREC' in prec else ''}"
                  f"{', DOT_F32=_DOT_F32' if bf16 else ''})")
    return launch


register_family(Family("conv", "conv", conv_kernel, TUNABLES, anchor=lambda node: packet(node) == "convolution",
                       dot=True, rank=30))
# an fp32 implicit GEMM is 3-5x faster in tf32x3 than in "ieee" FMA (the conv probe on the H200): seven of
# eight points try it; positions >= 64 keep the tile on wgmma (64 rows a warpgroup). sm_90 SASS
# (workbench/lowering/conv_sm90.py): tf32x3 splits each operand into hi and lo tf32 halves in registers, so a
# 128 x 64 tile on 4 warps took 255 registers (one block of 4 warps an SM) and spilled on level 1 61
# (transposed 3-D); on 8 warps it takes 113-135, two blocks an SM, no spill: the 128-row points run 8 warps
# (128 x 32 on 4 spilled 184 bytes in level 1 75's transposed flat loop, on 8 it takes 183 registers).
# A schedule is more than a tile: CONV_NUM_STAGES deepens the cp.async pipeline where a k step is short
# (16 channels: 33 KB a stage-set at 3 stages) and the last point keeps the FMA path ("ieee", for problems where
# tf32x3 fails the tolerance) on a 64 x 64 tile of 4 warps: the default's 512 FFMA per 48 LDS.128 in 128
# registers, four blocks an SM instead of two. The FMA path's 128 x 128 (1024 FFMA per 80) took 252 registers
# and spilled 32 bytes in the flat loop
register_space(Space("conv", ("CONV_BLOCK_P", "CONV_BLOCK_CO", "CONV_BLOCK_R", "CONV_NUM_WARPS", "CONV_NUM_STAGES",
                              "MM_PRECISION"),
                     ((128, 64, 32, 8, 3, "tf32x3"), (128, 128, 32, 8, 3, "tf32x3"), (64, 64, 32, 4, 4, "tf32x3"),
                      (128, 32, 32, 8, 3, "tf32x3"), (128, 64, 16, 8, 5, "tf32x3"), (64, 128, 32, 4, 3, "tf32x3"),
                      (128, 64, 64, 8, 3, "tf32x3"), (64, 64, 32, 4, 4, "ieee")), rank=50))
# the direct form's tiles (checked on sm_90 without spills: tests/lowering/test_conv_direct.py); CONV_DIRECT 0
# (points 0 and 4) runs the flat GEMM instead, with the conv space's point of the same index (tf32x3 there:
# the form the tuner picked for these problems before the direct one)
register_space(Space("direct", ("DIRECT_BLOCK_P", "DIRECT_BLOCK_CO", "DIRECT_NUM_WARPS", "CONV_DIRECT"),
                     ((256, 16, 4, 0), (128, 16, 4, 1), (128, 32, 4, 1), (512, 16, 4, 1), (256, 16, 4, 0),
                      (256, 32, 4, 1), (128, 16, 2, 1), (128, 64, 4, 1)), rank=55))
# the depthwise convolution's tile, next best on the H200 after the default 4 x 256 (experiments/depthwise_tiles)
register_space(Space("depthwise", ("DW_BLOCK_C", "DW_BLOCK_P"), ((2, 512), (1, 1024), (4, 512), (8, 256)), rank=60))
