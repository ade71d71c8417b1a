"""Inverse real FFTs of real input (`fft.irfft*`, `fft.hfft*` of a real tensor) as one Triton kernel: a direct
cosine sum, no complex value anywhere.

`torch.fft.irfftn(x)` of a real x is captured as `_to_copy(x, complex64)`, the slices and zero pads that bring each
dimension to its length, for `hfft*` a `_conj` and `_fft_c2c` over the leading dimensions, then `_fft_c2r` over the
rest. The lowering has no complex values, so `fold_real_c2r` (run by `lower.py` before emission) follows that
chain back to the real x and records it on the `_fft_c2r` node, which then reads x itself:
- slices from 0 with step 1 and zero pads at the end only shorten or lengthen a dimension: along transform dim j
  the first K_j = min(len of x, len after the chain) elements count, the rest are zeros;
- with x real, `_fft_c2c` gives sum_k x_k e^{-+i phi}, a `_conj` after it flips that sign, and `_fft_c2r`'s own
  leading dimensions are inverse transforms (+). Then, with Hermitian weights w = 1 at k = 0 and k = N/2, else 2
  along the half-spectrum (last) dimension, whose N is `_fft_c2r`'s `last_dim_size`,
      out[n] = scale * sum_k w(k_last) x[k] cos(2 pi sum_j s_j ((k_j n_j) mod N_j) / N_j),
  the real part c2r keeps (it drops the imaginary parts at k = 0 and N/2); `scale` multiplies each op's
  normalization (0: none, 1: 1/sqrt(prod N), 2: 1/prod N over its dimensions).
The phase is reduced modulo N_j in integers before the cosine (fp32 keeps it to an ulp of 2 pi). O(prod N * prod K)
per batch: OpInfo's sizes and short signals, not a fast transform (a radix-2 kernel is not written).
"""
from __future__ import annotations

import math

import torch
import torch.fx as fx

from workbench.lowering.epilogue import Unsupported, torch_dtype
from workbench.lowering.graph import dtype, op_name, packet, val
from workbench.lowering.primitives import Primitive, register

TUNABLES = ("BLOCK", "NUM_WARPS")
_MAX_T, _MAX_B = 3, 3  # transform dimensions, batch dimensions the kernel indexes


def _norm(mode: int, sizes: list[int]) -> float:
    n = math.prod(sizes)
    return 1.0 if mode == 0 else 1.0 / math.sqrt(n) if mode == 1 else 1.0 / n


def _int(a) -> int | None:  # noqa: ANN001
    """A graph argument as a Python int (a size computed in the graph: its traced value), None if it has none."""
    a = val(a) if isinstance(a, fx.Node) else a
    try:
        return int(a)
    except (TypeError, ValueError, RuntimeError):
        return None


def _chain(node: fx.Node) -> dict | None:
    """The real tensor behind `_fft_c2r`'s input and what the chain does to it, or None when it is not that chain.

    Walked from the c2r back to x: `flips` counts the conjs passed so far, so a c2c's sign is its own (forward: -)
    times (-1)^flips; `count[d]` is the shortest length along d of any tensor of the chain (a slice after a pad
    keeps fewer of x's elements than either length says)."""
    cur = node.args[0]
    rank = val(cur).dim()
    size = [int(s) for s in val(cur).shape]
    count = list(size)
    sign: dict[int, int] = {}
    flips, scale, resized, nodes = 0, 1.0, False, []
    while isinstance(cur, fx.Node) and cur.op == "call_function" and val(cur).dim() == rank:
        count = [min(c, int(s)) for c, s in zip(count, val(cur).shape)]
        p = packet(cur)
        nodes.append(cur)
        if p == "_to_copy":
            src = cur.args[0]
            if not isinstance(src, fx.Node) or dtype(src).is_complex or not val(cur).dtype.is_complex or \
                    val(src).dim() != rank:
                return None
            count = [min(c, int(s)) for c, s in zip(count, val(src).shape)]
            return {"src": src, "size": size, "count": count, "sign": sign, "scale": scale, "nodes": nodes}
        if p == "_conj":
            flips += 1
        elif p == "_fft_c2c":
            if resized:
                return None  # a slice or pad of its spectrum, not of x
            dims, mode, forward = cur.args[1], cur.args[2], cur.args[3]
            for d in dims:
                sign[d % rank] = (-1 if forward else 1) * (-1) ** flips
            scale *= _norm(mode, [size[d % rank] for d in dims])
        elif p in ("slice", "constant_pad_nd"):
            resized = True
            if p == "slice":
                rest = list(cur.args[2:])
                start = _int(rest[0]) if rest and rest[0] is not None else 0
                step = _int(rest[2]) if len(rest) > 2 else 1
                if start != 0 or step != 1:
                    return None
            else:
                pad, value = [_int(q) for q in cur.args[1]], cur.args[2] if len(cur.args) > 2 else 0
                if value != 0 or None in pad or any(pad[i] != 0 for i in range(0, len(pad), 2)) or min(pad) < 0:
                    return None
        elif p not in ("clone", "alias"):
            return None
        cur = cur.args[0]
    return None


def fold_real_c2r(graph: fx.Graph) -> int:
    """Point every `_fft_c2r` whose input is a real tensor made complex at that tensor; the number folded."""
    done = 0
    for node in list(graph.nodes):
        if node.op != "call_function" or packet(node) != "_fft_c2r":
            continue
        info = _chain(node)
        if info is None:
            continue
        node.meta["real_c2r"] = {k: v for k, v in info.items() if k != "nodes"}
        node.args = (info["src"], *node.args[1:])
        for n in info["nodes"]:
            if not n.users:
                graph.erase_node(n)
        done += 1
    return done


_KERNEL = '''@triton.jit
def __KNAME__(x_ptr, out_ptr, NOUT, scale,
              B1, B2, B3, XB1, XB2, XB3, OB1, OB2, OB3,
              N1, N2, N3, K1, K2, K3, XT1, XT2, XT3, OT1, OT2, OT3,
              S1: tl.constexpr, S2: tl.constexpr, S3: tl.constexpr, BLOCK: tl.constexpr):
    """out[b, n] = scale * sum_k w(k3) x[b, k] cos(2 pi sum_j S_j ((k_j n_j) mod N_j) / N_j); dim 3 the half
    spectrum (w = 1 at 0 and N3 / 2, else 2), K_j the counted input lengths; unused dims have size 1."""
    b = tl.program_id(0)
    b3 = b % B3
    b2 = (b // B3) % B2
    b1 = b // (B3 * B2)
    xb = b1.to(tl.int64) * XB1 + b2.to(tl.int64) * XB2 + b3.to(tl.int64) * XB3
    ob = b1.to(tl.int64) * OB1 + b2.to(tl.int64) * OB2 + b3.to(tl.int64) * OB3
    o = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    m = o < NOUT
    n3 = o % N3
    n2 = (o // N3) % N2
    n1 = o // (N3 * N2)
    acc = tl.zeros([BLOCK], tl.float32)
    for k1 in range(K1):
        for k2 in range(K2):
            for k3 in range(K3):
                xv = tl.load(x_ptr + xb + k1 * XT1 + k2 * XT2 + k3 * XT3).to(tl.float32)
                w = tl.where((k3 == 0) | (2 * k3 == N3), 1.0, 2.0)
                ph = S1 * ((k1 * n1) % N1).to(tl.float32) / N1 + S2 * ((k2 * n2) % N2).to(tl.float32) / N2 \\
                    + S3 * ((k3 * n3) % N3).to(tl.float32) / N3
                acc += (w * xv) * tl.cos(6.283185307179586 * ph)
    tl.store(out_ptr + ob + n1.to(tl.int64) * OT1 + n2.to(tl.int64) * OT2 + n3.to(tl.int64) * OT3,
             (acc * scale).to(out_ptr.dtype.element_ty), mask=m)
'''


def c2r_kernel(name: str, node: fx.Node, names: dict[fx.Node, str], expr) -> tuple[str, list[str], set[str]]:  # noqa: ANN001
    info = node.meta.get("real_c2r")
    if info is None:
        raise Unsupported(f"unsupported: {op_name(node)} of a complex tensor")
    x = node.args[0]
    out = val(node)
    rank = out.dim()
    dims = [d % rank for d in node.args[1]]
    mode, last_n = int(node.args[2]), int(out.shape[dims[-1]])  # the output's length is last_dim_size
    tdims = sorted(info["sign"]) + dims  # c2c dims first; the half-spectrum dim last
    if len(set(tdims)) != len(tdims) or len(tdims) > _MAX_T or rank - len(tdims) > _MAX_B:
        raise Unsupported(f"unsupported: {op_name(node)} over dims {tdims} of a rank-{rank} tensor")
    if out.dtype not in (torch.float32,):
        raise Unsupported(f"unsupported: {op_name(node)} with a {out.dtype} result")
    bdims = [d for d in range(rank) if d not in tdims]
    sizes = [int(s) for s in out.shape]
    N = [sizes[d] for d in tdims]
    K = [int(info["count"][d]) for d in tdims]
    K[-1] = min(K[-1], last_n // 2 + 1)
    S = [info["sign"][d] for d in tdims[:-len(dims)]] + [1] * len(dims)
    scale = info["scale"] * _norm(mode, [sizes[d] for d in dims])
    pad_t = _MAX_T - len(tdims)
    pad_b = _MAX_B - len(bdims)
    Bs = [1] * pad_b + [sizes[d] for d in bdims]
    Ns, Ks, Ss = [1] * pad_t + N, [1] * pad_t + K, [1] * pad_t + S
    xv, v = names[x], names[node]
    bd = [None] * pad_b + bdims
    td = [None] * pad_t + tdims
    xb = [f"{xv}.stride({d})" if d is not None else "0" for d in bd]
    xt = [f"{xv}.stride({d})" if d is not None else "0" for d in td]
    ob = [f"{v}.stride({d})" if d is not None else "0" for d in bd]
    ot = [f"{v}.stride({d})" if d is not None else "0" for d in td]
    nout = math.prod(N)
    nb = math.prod(Bs)
    launch = [f"{v} = torch.empty({sizes}, dtype={torch_dtype(out.dtype)}, device=dev)",
              f"if {nout} and {nb}: __KNAME__[({nb}, triton.cdiv({nout}, BLOCK))]({xv}, {v}, {nout}, {scale!r}, "
              f"{', '.join(map(str, Bs))}, {', '.join(xb)}, {', '.join(ob)}, {', '.join(map(str, Ns))}, "
              f"{', '.join(map(str, Ks))}, {', '.join(xt)}, {', '.join(ot)}, "
              f"S1={Ss[0]}, S2={Ss[1]}, S3={Ss[2]}, BLOCK=BLOCK, num_warps=NUM_WARPS)"]
    return _KERNEL, launch, set()


register("_fft_c2r", Primitive("fft_c2r", TUNABLES, c2r_kernel))
