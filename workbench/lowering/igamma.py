"""igamma(a, x) and igammac(a, x): the regularized lower and upper incomplete gamma functions P(a, x) and
Q(a, x) = 1 - P(a, x), one elementwise Triton kernel per node (broadcast inputs made contiguous by the launch,
as special.py's binary functions).

Boundaries as ATen's Math.h `calc_igamma` / `calc_igammac` (SciPy's), tested in its order: a < 0 or x < 0
gives nan; a = 0 gives P = 1, Q = 0 for x > 0 (nan at x = 0); x = 0 gives P = 0, Q = 1; a = inf gives P = 0,
Q = 1 (nan for x = inf too); x = inf gives P = 1, Q = 0; only then does a nan give nan (igamma(nan, 0) = 0).
Inside, computed in fp32 (fp16/bf16 rounded once at the end):
- x < a + 1: the series P = e^{-x} x^a / Gamma(a + 1) * sum_n x^n / ((a + 1)...(a + n)), Q = 1 - P;
- else: Legendre's continued fraction for Q (modified Lentz), P = 1 - Q
(Numerical Recipes' gser / gcf). The prefactor's logarithm a log x - x - lgamma(a) is taken as
a (log1p(t) - t) + 0.5 log(a / 2 pi) - 1/(12 a) + 1/(360 a^3), t = (x - a) / a, for a >= 10 (Stirling: the
three large terms of the plain form cancel there and leave fp32's rounding of a log a, 6e-5 at a = 200), and
plainly below. ATen switches to Temme's uniform asymptotic expansion for a > 20 near x = a; the series and the
fraction converge there too, in O(sqrt(a)) terms: the loop runs the block's bound `30 + 8 sqrt(max a)`, at most
`MAX_TERMS`, and ends early for no lane (a converged lane adds terms below its rounding).
"""
from __future__ import annotations

import torch
import torch.fx as fx

from workbench.lowering import pointwise as pw
from workbench.lowering.epilogue import Unsupported, torch_dtype
from workbench.lowering.graph import dtype, op_name, packet, val
from workbench.lowering.primitives import Primitive, register, register_helper

TUNABLES = ("BLOCK", "NUM_WARPS")
MAX_TERMS = 4096  # series / fraction terms: enough for a up to ~2.5e5 at fp32 precision

_HELPER = '''@triton.jit
def _ig_pq(a, x, nb, UPPER: tl.constexpr):
    """P(a, x) (UPPER false) or Q(a, x) in fp32, nb series / continued-fraction terms."""
    xs = tl.where(x > 0, x, 1.0)
    as_ = tl.where(a > 0, a, 1.0)
    t = (xs - as_) / as_
    ia = 1.0 / as_
    stirling = as_ * (_log1p(t) - t) + 0.5 * tl.log(as_ * 0.15915494309189535) - ia * (1.0 / 12.0) \\
        + ia * ia * ia * (1.0 / 360.0)
    plain = as_ * tl.log(xs) - xs - _lgamma(as_)
    fac = tl.exp(tl.where(as_ >= 10.0, stirling, plain))
    # series for P: sum = 1/a + x/(a(a+1)) + ...
    ap = as_
    term = 1.0 / as_
    ssum = term
    # continued fraction for Q (modified Lentz)
    b = xs + 1.0 - as_
    c = tl.zeros_like(xs) + 1.0e30
    d = 1.0 / tl.where(tl.abs(b) < 1.0e-30, 1.0e-30, b)
    h = d
    for i in range(1, nb + 1):
        ap += 1.0
        term *= xs / ap
        ssum += term
        an = -i * (i - as_)
        b += 2.0
        d = an * d + b
        d = tl.where(tl.abs(d) < 1.0e-30, 1.0e-30, d)
        c = b + an / c
        c = tl.where(tl.abs(c) < 1.0e-30, 1.0e-30, c)
        d = 1.0 / d
        h *= d * c
    p_ser = ssum * fac
    q_cf = h * fac
    use_ser = xs < as_ + 1.0
    if UPPER:
        r = tl.where(use_ser, 1.0 - p_ser, q_cf)
        big_x = 0.0  # the value at x = inf and at a = 0 (x > 0); 1 - it at a = inf and at x = 0
    else:
        r = tl.where(use_ser, p_ser, 1.0 - q_cf)
        big_x = 1.0
    nan = float("nan")
    inf = float("inf")
    # ATen's boundary tests in its order: each later where is an earlier test there, and wins
    r = tl.where((a != a) | (x != x), nan, r)
    r = tl.where(x == inf, big_x, r)
    r = tl.where(a == inf, tl.where(x == inf, nan, 1.0 - big_x), r)
    r = tl.where(x == 0, 1.0 - big_x, r)
    r = tl.where(a == 0, tl.where(x > 0, big_x, nan), r)
    return tl.where((a < 0) | (x < 0), nan, r)
'''
register_helper("_ig_pq", _HELPER)


def igamma_kernel(name: str, node: fx.Node, names: dict[fx.Node, str], expr) -> tuple[str, list[str], set[str]]:  # noqa: ANN001
    a, x = node.args[:2]
    out_dt = dtype(node)
    if out_dt not in (torch.float32, torch.float16, torch.bfloat16):
        raise Unsupported(f"unsupported: {op_name(node)} with a {out_dt} result")
    if not all(isinstance(t, fx.Node) and isinstance(val(t), torch.Tensor) for t in (a, x)):
        raise Unsupported(f"unsupported: {op_name(node)} of a scalar")
    used = {"_ig_pq", "_lgamma", "_log1p"}
    store = pw.narrow("r", out_dt, used) if out_dt != torch.float32 else "r"
    src = f'''@triton.jit
def {name}(a_ptr, x_ptr, out_ptr, n, MAX_NB: tl.constexpr, UPPER: tl.constexpr, BLOCK: tl.constexpr):
    """{packet(node)}(a, x) of each element: P (UPPER false) or Q of the regularized incomplete gamma."""
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    a = tl.load(a_ptr + offs, mask=mask, other=1.0).to(tl.float32)
    x = tl.load(x_ptr + offs, mask=mask, other=1.0).to(tl.float32)
    # terms for the block's largest finite positive a (O(sqrt(a)) near x = a)
    amax = tl.max(tl.where(mask & (a > 0) & (a < float("inf")), a, 0.0), axis=0)
    nb = tl.minimum(30.0 + 8.0 * tl.sqrt(amax), MAX_NB).to(tl.int32)
    r = _ig_pq(a, x, nb, UPPER)
    tl.store(out_ptr + offs, {store}, mask=mask)
'''
    v, av, xv = names[node], names[a], names[x]
    launch = [f"_shape = _bshape({av}.shape, {xv}.shape)",
              f"_a = {av}.expand(_shape).contiguous()", f"_x = {xv}.expand(_shape).contiguous()",
              f"{v} = torch.empty(_shape, dtype={torch_dtype(out_dt)}, device=dev)", f"_n = {v}.numel()",
              f"if _n: {name}[(triton.cdiv(_n, BLOCK),)](_a, _x, {v}, _n, MAX_NB={MAX_TERMS}, "
              f"UPPER={packet(node) == 'igammac'}, BLOCK=BLOCK, num_warps=NUM_WARPS)"]
    return src, launch, used


for _op in ("igamma", "igammac"):
    register(_op, Primitive("special", TUNABLES, igamma_kernel))
