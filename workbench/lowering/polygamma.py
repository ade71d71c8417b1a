"""polygamma(n, x): the n-th derivative of digamma, one elementwise Triton kernel per node.

ATen's CPU kernel (UnaryOpsKernel.cpp `polygamma_kernel`) is three algorithms, picked by the integer n, which
the graph holds as a constant, so the kernel gets it as a constexpr and compiles only its own branch:
- n = 0: digamma (special.py's `_sp_digamma`, Math.h calc_digamma);
- n = 1: trigamma, Math.h `calc_trigamma(float)`: reflection pi^2 / sin^2(pi x) below 1/2, six shift steps
  1/x^2, then the asymptotic series 1/x + 1/(2x^2) + 1/(6x^3) - 1/(30x^5) + 1/(42x^7);
- n >= 2: Math.h `calc_polygamma`, (-1)^(n+1) n! zeta(n + 1, x) with special.py's Hurwitz zeta.
Computed in fp32 and rounded once to the output dtype (PyTorch upcasts fp16/bf16 to float for n <= 1).
"""
from __future__ import annotations

import math

import torch
import torch.fx as fx

from workbench.lowering import pointwise as pw
from workbench.lowering.epilogue import Unsupported, torch_dtype
from workbench.lowering.graph import dtype, op_name
from workbench.lowering.primitives import Primitive, register, register_helper
from workbench.lowering.special import _closure, _fn

TUNABLES = ("BLOCK", "NUM_WARPS")

_TRIGAMMA = _fn("_pg_trigamma", "x", [
    "s = tl.sin(3.141592653589793 * x)",
    "refl = x < 0.5",
    # the reflection term is only used on reflected lanes; elsewhere s may be 0 (x integral) and gives inf
    "result = tl.where(refl, -9.869604401089358 / (s * s), 0.0)",
    "sign = tl.where(refl, -1.0, 1.0)",
    "x = tl.where(refl, 1.0 - x, x)",
    "for _ in range(6):",
    "    result += 1.0 / (x * x)",
    "    x += 1.0",
    "ixx = 1.0 / (x * x)",
    "result += (1.0 + 1.0 / (2.0 * x) + ixx * (1.0 / 6.0 - ixx * (1.0 / 30.0 - ixx * (1.0 / 42.0)))) / x",
    "return sign * result"], "trigamma (Math.h calc_trigamma, float)")
register_helper("_pg_trigamma", _TRIGAMMA)


def polygamma_kernel(name: str, node: fx.Node, names: dict[fx.Node, str], expr) -> tuple[str, list[str], set[str]]:  # noqa: ANN001
    n, x = node.args[:2]
    out_dt = dtype(node)
    if not isinstance(n, int) or n < 0 or not isinstance(x, fx.Node):
        raise Unsupported(f"unsupported: {op_name(node)} with n={n!r}")
    if out_dt not in (torch.float32, torch.float16, torch.bfloat16):
        raise Unsupported(f"unsupported: {op_name(node)} with a {out_dt} result")
    used = {"_sp_digamma"} if n == 0 else {"_pg_trigamma"} if n == 1 else {"_sp_zeta"}
    L = ["offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)", "mask = offs < n_elem",
         "x = tl.load(x_ptr + offs, mask=mask, other=1.0).to(tl.float32)"]
    # only n's branch is emitted: a candidate names no helper it does not define (the harness's policy)
    if n == 0:
        L.append("r = _sp_digamma(x)")
    elif n == 1:
        L.append("r = _pg_trigamma(x)")
    else:  # zeta's direct sum runs until q + i passes 9: the block's longest lane bounds the loop
        L += ["nb = tl.max(tl.where(mask & (x == x), tl.maximum(9.0, tl.minimum(tl.floor(9.0 - x) + 1.0, 1.0e6)),"
              " 0.0), axis=0).to(tl.int32)",
              "r = SIGN_FACT * _sp_zeta(tl.zeros_like(x) + (N + 1.0), x, nb)"]
    store = pw.narrow("r", out_dt, used) if out_dt != torch.float32 else "r"
    L.append(f"tl.store(out_ptr + offs, {store}, mask=mask)")
    src = "\n".join([f"@triton.jit\ndef {name}(x_ptr, out_ptr, n_elem, SIGN_FACT, N: tl.constexpr, "
                     "BLOCK: tl.constexpr):",
                     '    """polygamma(N, x) of each element; SIGN_FACT = (-1)^(N+1) N! for N >= 2."""']
                    + ["    " + ln for ln in L]) + "\n"
    v, xv = names[node], names[x]
    # n! as ATen's exp(lgamma(n + 1)) in float: exact to fp32 rounding for the n a float result can hold
    sign_fact = (1.0 if n % 2 else -1.0) * float(math.factorial(n)) if n <= 170 else float("inf")
    launch = [f"_x = {xv}.contiguous()",
              f"{v} = torch.empty({xv}.shape, dtype={torch_dtype(out_dt)}, device=dev)", f"_n = {v}.numel()",
              f"if _n: {name}[(triton.cdiv(_n, BLOCK),)](_x, {v}, _n, {sign_fact!r}, N={n}, BLOCK=BLOCK, "
              "num_warps=NUM_WARPS)"]
    return src, launch, _closure(used)


register("polygamma", Primitive("special", TUNABLES, polygamma_kernel))
