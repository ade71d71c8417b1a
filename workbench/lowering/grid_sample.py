"""grid_sampler_2d / grid_sampler_3d (F.grid_sample): one lane per output element of [N, C, *out].

Each lane reads its grid point (x, y[, z] in [-1, 1], the grid's last dim) and samples input plane (n, c) there,
as ATen's GridSampler.h: the coordinate is unnormalized to the input size (`align_corners`: -1 and 1 are the
corner pixels' centres, else their outer edges), then padded (`border`: clipped; `reflection`: reflected about
the edges, then clipped; `zeros`: taps outside read 0), and a non-finite or huge coordinate becomes -100 (out of
bounds), as `safe_downgrade_to_int_range`. Modes: bilinear (4 or 8 taps, weights the opposite sub-cell areas),
nearest (round half to even, as nearbyint) and bicubic (2-d only: 4 x 4 taps of the cubic convolution with
A = -0.75, the padding applied to each tap's integer coordinate, as `get_value_bounded`).
The mode, padding and align_corners are constants of the graph, so only their code is emitted; sums in fp32,
rounded once to the output dtype.
"""
from __future__ import annotations

import torch
import torch.fx as fx

from workbench.lowering import pointwise as pw
from workbench.lowering.epilogue import Unsupported, torch_dtype
from workbench.lowering.graph import dtype, op_name, packet
from workbench.lowering.primitives import Primitive, register

TUNABLES = ("BLOCK", "NUM_WARPS")
_FLOATS = (torch.float32, torch.float16, torch.bfloat16)
_MODES = {0: "bilinear", 1: "nearest", 2: "bicubic"}
_PADS = {0: "zeros", 1: "border", 2: "reflection"}


def _pad(c: str, size: str, padding: str, align: bool) -> list[str]:
    """Lines that pad coordinate `c` (already in pixel units) of a dim of `size` in place (compute_coordinates)."""
    L = []
    if padding == "reflection":
        # reflect_coordinates(c, twice_low, twice_high): align -> [0, 2(S-1)], else [-1, 2S-1]
        mn, span = ("0.0", f"({size} - 1.0)") if align else ("-0.5", f"{size}")
        L += [f"r_in = tl.abs({c} - {mn})", f"r_fl = tl.floor(r_in / {span})", f"r_ex = r_in - r_fl * {span}",
              f"r_c = tl.where(r_fl - 2.0 * tl.floor(r_fl * 0.5) == 0.0, r_ex + {mn}, {span} - r_ex + {mn})",
              # twice_low == twice_high (align and a size-1 dim) reflects everything to 0
              f"{c} = tl.where({span} == 0.0, 0.0, r_c)" if align else f"{c} = r_c"]
    if padding in ("border", "reflection"):
        L.append(f"{c} = tl.minimum({size} - 1.0, tl.maximum({c}, 0.0))")
    # safe_downgrade_to_int_range: nan, inf and values past int range become -100 (out of bounds)
    L.append(f"{c} = tl.where(({c} == {c}) & (tl.abs({c}) < 2147483647.0), {c}, -100.0)")
    return L


def _unnormalize(g: str, size: str, align: bool) -> str:
    return f"(({g} + 1.0) * 0.5 * ({size} - 1.0))" if align else f"((({g} + 1.0) * {size} - 1.0) * 0.5)"


def _cubic(t: str, var: str) -> list[str]:
    """The 4 cubic convolution weights of fraction t (get_cubic_upsample_coefficients, A = -0.75)."""
    a = -0.75
    c1 = f"(({a + 2} * {{x}} - {a + 3}) * {{x}} * {{x}} + 1.0)"
    c2 = f"((({a} * {{x}} - {5 * a}) * {{x}} + {8 * a}) * {{x}} - {4 * a})"
    return [f"{var}0 = {c2.format(x=f'({t} + 1.0)')}", f"{var}1 = {c1.format(x=t)}",
            f"{var}2 = {c1.format(x=f'(1.0 - {t})')}", f"{var}3 = {c2.format(x=f'(2.0 - {t})')}"]


def grid_sampler_kernel(name: str, node: fx.Node, names: dict[fx.Node, str], expr) -> tuple[str, list[str], set[str]]:  # noqa: ANN001
    x, grid, mode, padding, align = node.args[:5]
    S = 3 if packet(node).endswith("3d") else 2
    dt = dtype(node)
    if dt not in _FLOATS or mode not in _MODES or padding not in _PADS or (S == 3 and mode == 2):
        raise Unsupported(f"unsupported: {op_name(node)} on {dt} mode={mode} padding={padding}")
    mode, padding, align = _MODES[mode], _PADS[padding], bool(align)
    sp = "dhw"[3 - S:]  # spatial dims, outermost first; grid component k samples dim sp[S - 1 - k]
    used: set[str] = set()
    L = ["offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)", "mask = offs < TOTAL", "rest = offs"]
    for d in reversed(sp):
        L += [f"o{d} = rest % O{d}", "rest = rest // O" + d]
    L += ["c = rest % C", "n = rest // C", "gbase = n * gs_n + " + " + ".join(f"o{d} * gs_{d}" for d in sp)]
    for k, d in enumerate(reversed(sp)):
        L.append(f"g{d} = tl.load(g_ptr + gbase + {k} * gs_k, mask=mask, other=0.0).to(tl.float32)")
        L.append(f"u{d} = {_unnormalize(f'g{d}', f'I{d}f', align)}")
        if mode != "bicubic":
            L += _pad(f"u{d}", f"I{d}f", padding, align)
    L += ["xbase = n * xs_n + c * xs_c", "acc = tl.zeros([BLOCK], tl.float32)"]

    def tap(coords: dict[str, str], weight: str) -> list[str]:
        ok = " & ".join(["mask"] + [f"({coords[d]} >= 0) & ({coords[d]} < I{d})" for d in sp])
        off = " + ".join(f"{coords[d]} * xs_{d}" for d in sp)
        return [f"v = tl.load(x_ptr + xbase + {off}, mask={ok}, other=0.0).to(tl.float32)",
                f"acc += v * {weight}" if weight else "acc += v"]

    if mode == "nearest":
        for d in sp:  # nearbyint: half to even
            L += [f"r{d} = tl.floor(u{d} + 0.5)",
                  f"r{d} = tl.where((r{d} - u{d} == 0.5) & (r{d} - 2.0 * tl.floor(r{d} * 0.5) != 0.0), r{d} - 1.0, "
                  f"r{d}).to(tl.int64)"]
        L += tap({d: f"r{d}" for d in sp}, "")
    elif mode == "bilinear":
        for d in sp:
            L += [f"f{d} = tl.floor(u{d})", f"t{d} = u{d} - f{d}", f"a{d} = f{d}.to(tl.int64)"]
        for corner in range(1 << S):
            bits = {d: (corner >> (S - 1 - j)) & 1 for j, d in enumerate(sp)}
            w = " * ".join(f"t{d}" if bits[d] else f"(1.0 - t{d})" for d in sp)
            L += tap({d: f"(a{d} + {bits[d]})" for d in sp}, f"({w})")
    else:  # bicubic: the padding goes on each tap's integer coordinate
        for d in sp:
            L += [f"f{d} = tl.floor(u{d})", f"t{d} = u{d} - f{d}"] + _cubic(f"t{d}", f"w{d}")
            for j in range(4):
                L.append(f"q{d}{j} = f{d} + {j - 1}.0")
                L += _pad(f"q{d}{j}", f"I{d}f", padding, align)
                L.append(f"q{d}{j} = q{d}{j}.to(tl.int64)")
        for jh in range(4):
            for jw in range(4):
                L += tap({"h": f"qh{jh}", "w": f"qw{jw}"}, f"(wh{jh} * ww{jw})")
    L.append(f"tl.store(out_ptr + offs, {pw.narrow('acc', dt, used) if dt != torch.float32 else 'acc'}, mask=mask)")
    for d in sp:  # sizes as floats; `* 1.0`, not `.to`: Triton passes a size of 1 as a constexpr
        L.insert(0, f"I{d}f = I{d} * 1.0")
    params = (["x_ptr", "g_ptr", "out_ptr", "TOTAL", "C"] + [f"I{d}" for d in sp] + [f"O{d}" for d in sp]
              + ["xs_n", "xs_c"] + [f"xs_{d}" for d in sp] + ["gs_n"] + [f"gs_{d}" for d in sp]
              + ["gs_k", "BLOCK: tl.constexpr"])
    doc = (f'    """grid_sampler_{S}d, {mode}, {padding} padding, align_corners={align}: out[n, c, o...] = x[n, c] '
           'sampled at grid[n, o...]."""')
    src = "\n".join([f"@triton.jit\ndef {name}({', '.join(params)}):", doc] + ["    " + ln for ln in L]) + "\n"
    xv, gv, v = names[x], names[grid], names[node]
    launch = [f"_shape = [{xv}.shape[0], {xv}.shape[1], *{gv}.shape[1:-1]]",
              f"{v} = torch.empty(_shape, dtype={torch_dtype(dt)}, device=dev)", "_n = _numel(_shape)",
              f"if _n: {name}[(triton.cdiv(_n, BLOCK),)]({xv}, {gv}, {v}, _n, {xv}.shape[1], *{xv}.shape[2:], "
              f"*{gv}.shape[1:-1], *{xv}.stride(), *{gv}.stride(), BLOCK=BLOCK, num_warps=NUM_WARPS)"]
    return src, launch, used


for _op in ("grid_sampler_2d", "grid_sampler_3d"):
    register(_op, Primitive("gridsample", TUNABLES, grid_sampler_kernel))
