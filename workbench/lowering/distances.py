"""p-norm distances: dist (one norm of a broadcast difference), _cdist_forward (every row pair of two batched sets)
and _pdist_forward (the upper triangle of one set's row pairs).

One accumulation rule for all, by p: p = 0 counts the nonzero differences, p = inf takes the largest |d|,
p = -inf the smallest, p = 1 sums |d|, p = 2 sums d^2 and takes the root, any other p sums |d|^p and takes the
1/p power, in fp32, rounded once to the output dtype. cdist's lanes are (batch, row of x1, row of x2) and walk
the features one at a time, pdist's lanes are (i, j) pairs with i < j stored at their triangle
index; dist is one program per DIST_BLOCK chunk of the flattened difference, the partials combined by a
second one-program launch. The direct sum is what PyTorch's cdist computes with
compute_mode='donot_use_mm_for_euclid_dist'; its default (the mm form for p = 2 above 25 rows) rounds
differently, within fp32's tolerance.
"""
from __future__ import annotations

import math

import torch
import torch.fx as fx

from workbench.lowering import pointwise as pw
from workbench.lowering.epilogue import Unsupported, torch_dtype
from workbench.lowering.graph import dtype, op_name
from workbench.lowering.primitives import Primitive, register

TUNABLES = ("BLOCK", "NUM_WARPS")


def _rule(p: float) -> tuple[str, str, str, str]:
    """(identity, the term of |d| = `a`, how terms combine (`acc`, `t`), the finish of `acc`) for norm p."""
    if p == 0:
        return "0.0", "(a != 0).to(tl.float32)", "acc + t", "acc"
    if p == math.inf:
        return "0.0", "a", "tl.maximum(acc, t, propagate_nan=tl.PropagateNan.ALL)", "acc"
    if p == -math.inf:
        return 'float("inf")', "a", "tl.minimum(acc, t, propagate_nan=tl.PropagateNan.ALL)", "acc"
    if p == 1:
        return "0.0", "a", "acc + t", "acc"
    if p == 2:
        return "0.0", "a * a", "acc + t", "tl.sqrt(acc)"
    return ("0.0", f"tl.where(a == 0, 0.0, tl.exp2({p!r} * tl.log2(a)))", "acc + t",
            f"tl.where(acc == 0, 0.0, tl.exp2(tl.log2(acc) * {1.0 / p!r}))")


def _store(out_dt: torch.dtype, used: set[str], e: str = "r") -> str:
    return pw.narrow(e, out_dt, used) if out_dt != torch.float32 else e


def _p(node: fx.Node, at: int, default: float) -> float:
    p = node.args[at] if len(node.args) > at else node.kwargs.get("p", default)
    if not isinstance(p, (int, float)):
        raise Unsupported(f"unsupported: {op_name(node)} with a tensor p")
    return float(p)


def cdist_kernel(name: str, node: fx.Node, names: dict[fx.Node, str], expr) -> tuple[str, list[str], set[str]]:  # noqa: ANN001
    x1, x2 = node.args[:2]
    p = _p(node, 2, 2.0)
    out_dt = dtype(node)
    if out_dt not in (torch.float32, torch.float16, torch.bfloat16) or p < 0:
        raise Unsupported(f"unsupported: {op_name(node)} on {out_dt} with p={p}")
    ident, term, comb, fin = _rule(p)
    used: set[str] = set()
    L = ["offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)", "mask = offs < n",
         "j = offs % R", "i = (offs // R) % P", "b = offs // (R * P)",
         f"acc = tl.zeros([BLOCK], tl.float32) + {ident}",
         "for k in range(0, M):",
         "    u = tl.load(a_ptr + b * a_b + i * a_i + k * a_k, mask=mask, other=0).to(tl.float32)",
         "    w = tl.load(c_ptr + b * c_b + j * c_j + k * c_k, mask=mask, other=0).to(tl.float32)",
         "    a = tl.abs(u - w)", f"    t = {term}", f"    acc = {comb}",
         f"r = {fin}", f"tl.store(out_ptr + offs, {_store(out_dt, used)}, mask=mask)"]
    sig = "a_ptr, c_ptr, out_ptr, n, P, R, M, a_b, a_i, a_k, c_b, c_j, c_k, BLOCK: tl.constexpr"
    src = "\n".join([f"@triton.jit\ndef {name}({sig}):", f'    """cdist, p = {p}: one (batch, i, j) a lane."""']
                    + ["    " + ln for ln in L]) + "\n"
    v, a, c = names[node], names[x1], names[x2]
    # the batch dims broadcast (glue: an expand, a copy only where the reshape needs one)
    launch = [f"_bs = _bshape({a}.shape[:-2], {c}.shape[:-2])",
              f"_a = {a}.expand([*_bs, *{a}.shape[-2:]]).reshape(-1, *{a}.shape[-2:])",
              f"_c = {c}.expand([*_bs, *{c}.shape[-2:]]).reshape(-1, *{c}.shape[-2:])",
              "_B, _P, _M = _a.shape", "_R = _c.shape[1]",
              f"_o = torch.empty([_B, _P, _R], dtype={torch_dtype(out_dt)}, device=dev)",
              f"if _o.numel(): {name}[(triton.cdiv(_o.numel(), BLOCK),)](_a, _c, _o, _o.numel(), _P, _R, _M, "
              "*_a.stride(), *_c.stride(), BLOCK=BLOCK, num_warps=NUM_WARPS)",
              f"{v} = _o.reshape([*_bs, _P, _R])"]
    return src, launch, used


def pdist_kernel(name: str, node: fx.Node, names: dict[fx.Node, str], expr) -> tuple[str, list[str], set[str]]:  # noqa: ANN001
    x = node.args[0]
    p = _p(node, 1, 2.0)
    out_dt = dtype(node)
    if out_dt not in (torch.float32, torch.float16, torch.bfloat16) or p < 0:
        raise Unsupported(f"unsupported: {op_name(node)} on {out_dt} with p={p}")
    ident, term, comb, fin = _rule(p)
    used: set[str] = set()
    L = ["offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)",
         "i = offs // N", "j = offs % N", "mask = (offs < N * N) & (i < j)",
         f"acc = tl.zeros([BLOCK], tl.float32) + {ident}",
         "for k in range(0, M):",
         "    u = tl.load(x_ptr + i * x_i + k * x_k, mask=mask, other=0).to(tl.float32)",
         "    w = tl.load(x_ptr + j * x_i + k * x_k, mask=mask, other=0).to(tl.float32)",
         "    a = tl.abs(u - w)", f"    t = {term}", f"    acc = {comb}",
         f"r = {fin}",
         # the pair (i, j), i < j, in row-major order of the upper triangle
         "pos = i * N - i * (i + 1) // 2 + (j - i - 1)",
         f"tl.store(out_ptr + pos, {_store(out_dt, used)}, mask=mask)"]
    sig = "x_ptr, out_ptr, N, M, x_i, x_k, BLOCK: tl.constexpr"
    src = "\n".join([f"@triton.jit\ndef {name}({sig}):", f'    """pdist, p = {p}: one (i, j) pair a lane."""']
                    + ["    " + ln for ln in L]) + "\n"
    v, xv = names[node], names[x]
    launch = [f"_N, _M = {xv}.shape",
              f"{v} = torch.empty([_N * (_N - 1) // 2], dtype={torch_dtype(out_dt)}, device=dev)",
              f"if {v}.numel(): {name}[(triton.cdiv(_N * _N, BLOCK),)]({xv}, {v}, _N, _M, *{xv}.stride(), "
              "BLOCK=BLOCK, num_warps=NUM_WARPS)"]
    return src, launch, used


def dist_kernel(name: str, node: fx.Node, names: dict[fx.Node, str], expr) -> tuple[str, list[str], set[str]]:  # noqa: ANN001
    a, b = node.args[:2]
    p = _p(node, 2, 2.0)
    out_dt = dtype(node)
    if out_dt not in (torch.float32, torch.float16, torch.bfloat16):
        raise Unsupported(f"unsupported: {op_name(node)} on {out_dt}")
    ident, term, comb, fin = _rule(p)
    used: set[str] = set()
    # phase 1: one partial per program; phase 2 (a single program) combines them in order and finishes
    part = ["offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)", "mask = offs < n",
            "u = tl.load(a_ptr + offs, mask=mask, other=0).to(tl.float32)",
            "w = tl.load(b_ptr + offs, mask=mask, other=0).to(tl.float32)",
            "a = tl.abs(u - w)", f"t = tl.where(mask, {term}, {ident})",
            f"acc = tl.zeros([BLOCK], tl.float32) + {ident}", f"acc = {comb}"]
    red = "tl.max(acc, 0)" if p == math.inf else "tl.min(acc, 0)" if p == -math.inf else "tl.sum(acc, 0)"
    if p in (math.inf, -math.inf):  # a nan |d| makes eager's dist nan: tl.max/tl.min drop it (GPU, interpreter)
        red = f'tl.where(tl.max((acc != acc).to(tl.int32), 0) > 0, float("nan"), {red})'
    part += [f"tl.store(part_ptr + tl.program_id(0) + tl.arange(0, 1), {red} + tl.zeros([1], tl.float32))"]
    fin_l = [f"acc = tl.zeros([BLOCK], tl.float32) + {ident}",
             "for k0 in range(0, nb, BLOCK):",
             "    ks = k0 + tl.arange(0, BLOCK)",
             f"    t = tl.load(part_ptr + ks, mask=ks < nb, other={ident})", f"    acc = {comb}",
             f"acc = tl.zeros([1], tl.float32) + {red}", f"r = {fin}",
             f"tl.store(out_ptr + tl.arange(0, 1), {_store(out_dt, used)})"]
    src = ("\n".join([f"@triton.jit\ndef {name}(a_ptr, b_ptr, part_ptr, n, BLOCK: tl.constexpr):",
                      f'    """dist, p = {p}: this block\'s partial."""'] + ["    " + ln for ln in part]) + "\n\n\n"
           + "\n".join([f"@triton.jit\ndef {name}_fin(part_ptr, out_ptr, nb, BLOCK: tl.constexpr):",
                        '    """dist: the partials combined, the norm finished."""'] + ["    " + ln for ln in fin_l])
           + "\n")
    v = names[node]
    launch = [f"_shape = _bshape({names[a]}.shape, {names[b]}.shape)",
              f"_a = {names[a]}.expand(_shape).contiguous()", f"_b = {names[b]}.expand(_shape).contiguous()",
              "_n = _a.numel()", "_nb = max(triton.cdiv(_n, BLOCK), 1)",
              "_part = torch.empty([_nb], dtype=torch.float32, device=dev)",
              f"{v} = torch.empty([], dtype={torch_dtype(out_dt)}, device=dev)",
              f"{name}[(_nb,)](_a, _b, _part, _n, BLOCK=BLOCK, num_warps=NUM_WARPS)",
              f"{name}_fin[(1,)](_part, {v}, _nb, BLOCK=BLOCK, num_warps=NUM_WARPS)"]
    return src, launch, used


register("_cdist_forward", Primitive("cdist", TUNABLES, cdist_kernel))
register("_pdist_forward", Primitive("pdist", TUNABLES, pdist_kernel))
register("dist", Primitive("dist", TUNABLES, dist_kernel))
