"""Pointwise ATen ops as Triton expressions, with PyTorch's type promotion.

Every value inside a kernel is held in its *compute dtype*: fp32 for fp16/bf16/fp32 (fp64 stays
fp64), integers and bool as themselves. A node's operands are cast to the node's compute dtype
before the op; the result is cast to the node's real dtype only when it is stored. A cast to a
narrower float (`_to_copy` to fp16) rounds through that dtype so a later op sees what eager sees.
Triton's interpreter has no libdevice, so tanh, pow, log1p and friends are small @triton.jit
helpers written with `tl.exp`/`tl.log` (HELPERS below), emitted only when a kernel uses them.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable

import torch

from workbench.lowering.primitives import HELPERS

TL_DTYPE = {
    torch.float16: "tl.float16", torch.bfloat16: "tl.bfloat16", torch.float32: "tl.float32",
    torch.float64: "tl.float64", torch.int8: "tl.int8", torch.int16: "tl.int16", torch.int32: "tl.int32",
    torch.int64: "tl.int64", torch.uint8: "tl.uint8", torch.bool: "tl.int1",
}


def compute_dtype(dtype: torch.dtype) -> torch.dtype:
    if dtype in (torch.float16, torch.bfloat16, torch.float32):
        return torch.float32
    return dtype


def literal(value: Any) -> str:
    """A Python scalar as Triton source (inf and nan spelled as float(...))."""
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, float):
        if math.isinf(value):
            return 'float("inf")' if value > 0 else '(-float("inf"))'
        if math.isnan(value):
            return 'float("nan")'
        return repr(value)
    if isinstance(value, int):
        return repr(value)
    raise TypeError(f"not a scalar literal: {value!r}")


@dataclass
class Val:
    """A value inside a kernel: its expression and its compute dtype (None for a Python scalar)."""

    expr: str
    dtype: torch.dtype | None


def cast(v: Val, to: torch.dtype) -> str:
    if v.dtype is None:
        return v.expr  # a literal: Triton promotes it against the tensor operand
    if v.dtype == to:
        return v.expr
    if to == torch.bool:
        return f"({v.expr} != 0)"
    return f"{v.expr}.to({TL_DTYPE[to]})"


def narrow(expr: str, dt: torch.dtype, used: set[str]) -> str:
    """`expr` (fp32) converted to `dt` with round-to-nearest-even, as eager converts."""
    if dt == torch.bfloat16:
        used.add("_rbf16")
        return f"_rbf16({expr}).to(tl.bfloat16)"
    return f"{expr}.to({TL_DTYPE[dt]})"


def _promote(vals: list[Val]) -> torch.dtype:
    dts = [v.dtype for v in vals if v.dtype is not None]
    if not dts:
        return torch.float32
    out = dts[0]
    for d in dts[1:]:
        out = torch.promote_types(out, d)
    if any(v.dtype is None and ("." in v.expr or "float" in v.expr) for v in vals) and not out.is_floating_point:
        out = torch.float32
    return compute_dtype(out)


# Helper functions emitted into the candidate when used: name -> source.
# eager's max/min-like ops (relu, clamp, hardtanh, maximum, amax...) return nan for a nan operand: tl.maximum's
# default (PropagateNan.NONE) is max.f32 on the GPU, which gives the *other* operand (the interpreter's
# np.maximum propagates, so only the GPU showed it); PropagateNan.ALL is max.NaN.f32, one instruction too.
# Integer operands ignore it.
NANP = ", propagate_nan=tl.PropagateNan.ALL"

HELPERS.update({  # the registry's table (workbench/lowering/primitives.py): one place for every helper
    "_fmax": '''@triton.jit
def _fmax(a, b):
    # fmax: a nan operand gives the other (both nan: nan), on the GPU as on the interpreter (whose
    # tl.maximum propagates nan, where the GPU's max.f32 drops it)
    return tl.where(a != a, b, tl.where(b != b, a, tl.maximum(a, b)))
''',
    "_fmin": '''@triton.jit
def _fmin(a, b):
    # fmin: as _fmax
    return tl.where(a != a, b, tl.where(b != b, a, tl.minimum(a, b)))
''',
    "_rbf16": '''@triton.jit
def _rbf16(x):
    # fp32 -> bf16 rounding to nearest even, done on the bits: Triton's interpreter truncates in
    # `.to(tl.bfloat16)` (half of all values one ulp off); after this the cast is exact everywhere
    b = x.to(tl.uint32, bitcast=True)
    b = (b + (0x7FFF + ((b >> 16) & 1))) & 0xFFFF0000
    return b.to(tl.float32, bitcast=True)
''',
    "_tanh": '''@triton.jit
def _tanh(x):
    # tanh from exp: t = exp(-2|x|) never overflows; sign restored at the end
    t = tl.exp(-2.0 * tl.abs(x))
    r = (1.0 - t) / (1.0 + t)
    return tl.where(x < 0, -r, r)
''',
    "_pow": '''@triton.jit
def _pow(x, y):
    # x ** y through exp2/log2 of |x|; a negative base keeps its sign for odd integer exponents
    # and gives nan for non-integer ones, as torch.pow does
    mag = tl.exp2(y * tl.log2(tl.abs(x)))
    y_int = tl.floor(y) == y
    odd = y_int & ((tl.floor(y * 0.5) * 2.0) != y)
    r = tl.where((x < 0) & odd, -mag, mag)
    r = tl.where((x < 0) & (y_int == 0), float("nan"), r)
    r = tl.where(y == 0, 1.0, r)
    return tl.where((x == 0) & (y > 0), 0.0, r)
''',
    "_log1p": '''@triton.jit
def _log1p(x):
    # log(1+x) with the rounding of 1+x corrected (Goldberg's trick)
    u = 1.0 + x
    return tl.where(u == 1.0, x, tl.log(u) * (x / tl.where(u == 1.0, 1.0, u - 1.0)))
''',
    "_expm1": '''@triton.jit
def _expm1(x):
    # exp(x)-1 with the cancellation near 0 corrected (Kahan's trick)
    u = tl.exp(x)
    return tl.where(u == 1.0, x, tl.where(u - 1.0 == -1.0, -1.0, (u - 1.0) * x / tl.log(u)))
''',
    "_trunc": '''@triton.jit
def _trunc(x):
    return tl.where(x >= 0, tl.floor(x), tl.ceil(x))
''',
    "_round": '''@triton.jit
def _round(x):
    # round half to even, as torch.round
    r = tl.floor(x + 0.5)
    tie = (r - x) == 0.5
    odd = (tl.floor(r * 0.5) * 2.0) != r
    return tl.where(tie & odd, r - 1.0, r)
''',
    "_atan": '''@triton.jit
def _atan(x):
    # argument reduction to [0, tan(pi/12)] and a degree-7 odd polynomial (Cephes atanf); |err| < 2e-7
    a = tl.abs(x)
    inv = a > 2.414213562373095
    mid = (a > 0.4142135623730950) & (inv == 0)
    z = tl.where(inv, -1.0 / tl.where(inv, a, 1.0), tl.where(mid, (a - 1.0) / (a + 1.0), a))
    base = tl.where(inv, 1.5707963267948966, tl.where(mid, 0.7853981633974483, 0.0))
    z2 = z * z
    p = (((8.05374449538e-2 * z2 - 1.38776856032e-1) * z2 + 1.99777106478e-1) * z2 - 3.33329491539e-1) * z2 * z + z
    r = base + p
    return tl.where(x < 0, -r, r)
''',
    "_i0": '''@triton.jit
def _i0(x):
    # modified Bessel I0: its power series (all terms positive, no cancellation) for |x| <= 30, the
    # asymptotic series e^|x| / sqrt(2 pi |x|) * sum ((2k-1)!!)^2 / (k! (8|x|)^k) above (11 terms: < 1e-13)
    a = tl.abs(x)
    q = a * a * 0.25
    s = a * 0.0 + 1.0
    t = s
    for k in range(1, 64):
        t = t * q / (k * k)
        s = s + t
    big = tl.maximum(a, 30.0)
    u = 1.0 / (8.0 * big)
    c = a * 0.0 + 1.0
    term = c
    for k in range(1, 12):
        term = term * ((2 * k - 1) * (2 * k - 1)) * u / k
        c = c + term
    asym = tl.exp(big) / tl.sqrt(6.283185307179586 * big) * c
    r = tl.where(a <= 30.0, s, asym)
    r = tl.where(a == float("inf"), float("inf"), r)
    return tl.where(x != x, x, r)
''',
    "_gcd": '''@triton.jit
def _gcd(a, b):
    # Euclid's loop as c10's calc_gcd (|a|, |b|; while a != 0: a, b = b % a, a), each lane stopping at its own
    # zero inside a loop that runs until every lane of the block has (at most 93 steps for 64-bit values)
    a = tl.abs(a)
    b = tl.abs(b)
    while tl.max((a != 0).to(tl.int32)) > 0:
        t = a
        nz = a != 0
        a = tl.where(nz, b % tl.where(nz, a, 1), 0)
        b = tl.where(nz, t, b)
    return b
''',
    "_lgamma": '''@triton.jit
def _lgamma(x):
    # log|Gamma(x)|: Lanczos (g = 7, 9 terms) for x >= 0.5, reflection log(pi / |sin(pi x)|) - lgamma(1 - x)
    # below, with sin taken of x minus its nearest integer (exact) so that large negative x keep their
    # digits; poles (0, -1, ...) and +-inf give inf, as torch does
    w = tl.where(x < 0.5, 1.0 - x, x) - 1.0
    a = w * 0.0 + 0.99999999999980993
    a = a + 676.5203681218851 / (w + 1.0)
    a = a - 1259.1392167224028 / (w + 2.0)
    a = a + 771.32342877765313 / (w + 3.0)
    a = a - 176.61502916214059 / (w + 4.0)
    a = a + 12.507343278686905 / (w + 5.0)
    a = a - 0.13857109526572012 / (w + 6.0)
    a = a + 9.9843695780195716e-6 / (w + 7.0)
    a = a + 1.5056327351493116e-7 / (w + 8.0)
    t = w + 7.5
    lg = 0.9189385332046727 + (w + 0.5) * tl.log(t) - t + tl.log(a)
    r = x - tl.floor(x + 0.5)
    refl = tl.log(3.141592653589793 / tl.abs(tl.sin(3.141592653589793 * r))) - lg
    out = tl.where(x < 0.5, refl, lg)
    out = tl.where(tl.abs(x) == float("inf"), float("inf"), out)
    return tl.where(x != x, x, out)
''',
})


def _h(name: str, used: set[str]) -> str:
    used.add(name)
    if name == "_atan2":
        used.add("_atan")
    return name


Handler = Callable[[list[Val], list[Any], torch.dtype, set[str]], str]


def _bin(op: str) -> Handler:
    def f(vals: list[Val], args: list[Any], c: torch.dtype, used: set[str]) -> str:
        return f"({cast(vals[0], c)} {op} {cast(vals[1], c)})"
    return f


def _fn(template: str, helper: str | None = None, float_in: bool = True) -> Handler:
    """One-operand op: template has {0}; operand cast to the node's compute dtype."""
    def f(vals: list[Val], args: list[Any], c: torch.dtype, used: set[str]) -> str:
        if helper:
            _h(helper, used)
        return template.format(cast(vals[0], c))
    return f


def _cmp(op: str) -> Handler:
    def f(vals: list[Val], args: list[Any], c: torch.dtype, used: set[str]) -> str:
        p = _promote(vals[:2])
        return f"({cast(vals[0], p)} {op} {cast(vals[1], p)})"
    return f


def _add(vals: list[Val], args: list[Any], c: torch.dtype, used: set[str], sign: str = "+") -> str:
    alpha = args[2] if len(args) > 2 else 1
    rhs = cast(vals[1], c)
    if alpha != 1:
        rhs = f"({rhs} * {literal(alpha)})"
    return f"({cast(vals[0], c)} {sign} {rhs})"


def _div(vals: list[Val], args: list[Any], c: torch.dtype, used: set[str], mode: str | None = None) -> str:
    a, b = cast(vals[0], c), cast(vals[1], c)
    if mode is None:
        return f"({a} / {b})"
    if not c.is_floating_point:
        q = f"({a} // {b})" if mode == "trunc" else f"(({a} - ((({a} % {b}) + {b}) % {b})) // {b})"
        return q
    q = f"({a} / {b})"
    return f"{_h('_trunc', used)}({q})" if mode == "trunc" else f"tl.floor({q})"


def _pow(vals: list[Val], args: list[Any], c: torch.dtype, used: set[str]) -> str:
    base, ex = vals
    if ex.dtype is None:
        e = float(args[1])
        b = cast(base, c)
        if e == 2:
            return f"({b} * {b})"
        if e == 3:
            return f"({b} * {b} * {b})"
        if e == 1:
            return b
        if e == 0.5:
            return f"tl.sqrt({b})"
        if e == -1:
            return f"(1.0 / {b})"
        if e == -0.5:
            return f"tl.rsqrt({b})"
        # a constant exponent: its parity is known here, so the sign rule is decided at lowering time
        mag = f"tl.exp2({e!r} * tl.log2(tl.abs({b})))"
        if e == int(e):
            signed = f"tl.where({b} < 0, -{mag}, {mag})" if int(e) % 2 else mag
        else:
            signed = f'tl.where({b} < 0, float("nan"), {mag})'
        at_zero = "0.0" if e > 0 else 'float("inf")'
        return f"tl.where({b} == 0, {at_zero}, {signed})" if e != 0 else "1.0"
    if base.dtype is None:
        b0 = float(args[0])
        if b0 <= 0:
            raise NotImplementedError("pow of a non-positive scalar base")
        return f"tl.exp2({cast(ex, c)} * {math.log2(b0)!r})"
    if not c.is_floating_point:
        raise NotImplementedError("integer pow")
    return f"{_h('_pow', used)}({cast(base, c)}, {cast(ex, c)})"


def _where(vals: list[Val], args: list[Any], c: torch.dtype, used: set[str]) -> str:
    return f"tl.where({cast(vals[0], torch.bool)}, {cast(vals[1], c)}, {cast(vals[2], c)})"


def _clamp(vals: list[Val], args: list[Any], c: torch.dtype, used: set[str]) -> str:
    x = cast(vals[0], c)
    lo = vals[1] if len(vals) > 1 else Val("None", None)
    hi = vals[2] if len(vals) > 2 else Val("None", None)
    if lo.expr != "None":
        x = f"tl.maximum({x}, {cast(lo, c)}{NANP})"
    if hi.expr != "None":
        x = f"tl.minimum({x}, {cast(hi, c)}{NANP})"
    return x


def _gelu(vals: list[Val], args: list[Any], c: torch.dtype, used: set[str]) -> str:
    x = cast(vals[0], c)
    approx = args[1] if len(args) > 1 else "none"
    if approx == "tanh":
        return (f"(0.5 * {x} * (1.0 + {_h('_tanh', used)}(0.7978845608028654 * "
                f"({x} + 0.044715 * {x} * {x} * {x}))))")
    return f"(0.5 * {x} * (1.0 + tl.erf({x} * 0.7071067811865476)))"


def _cast_op(vals: list[Val], args: list[Any], c: torch.dtype, used: set[str], target: torch.dtype) -> str:
    v = vals[0]
    if target in (torch.float16, torch.bfloat16) and v.dtype != target:
        # round through the narrow dtype, as eager's cast does
        return f"{narrow(cast(v, torch.float32), target, used)}.to(tl.float32)"
    if target.is_floating_point and v.dtype is not None and not v.dtype.is_floating_point:
        return cast(v, c)
    if not target.is_floating_point and target != torch.bool and v.dtype is not None and v.dtype.is_floating_point:
        # float -> int truncates toward zero in torch and in Triton's cast alike
        return cast(v, c)
    return cast(v, c)


def _sign(vals: list[Val], args: list[Any], c: torch.dtype, used: set[str]) -> str:
    x = cast(vals[0], c)
    return f"(({x} > 0).to({TL_DTYPE[c]}) - ({x} < 0).to({TL_DTYPE[c]}))"


def _remainder(vals: list[Val], args: list[Any], c: torch.dtype, used: set[str]) -> str:
    a, b = cast(vals[0], c), cast(vals[1], c)
    if c.is_floating_point:
        return f"({a} - tl.floor({a} / {b}) * {b})"
    return f"((({a} % {b}) + {b}) % {b})"


def _fmod(vals: list[Val], args: list[Any], c: torch.dtype, used: set[str]) -> str:
    a, b = cast(vals[0], c), cast(vals[1], c)
    if c.is_floating_point:
        return f"({a} - {_h('_trunc', used)}({a} / {b}) * {b})"
    return f"({a} % {b})"


def _logical(op: str) -> Handler:
    def f(vals: list[Val], args: list[Any], c: torch.dtype, used: set[str]) -> str:
        return f"({cast(vals[0], torch.bool)} {op} {cast(vals[1], torch.bool)})"
    return f


def _atan2(vals: list[Val], args: list[Any], c: torch.dtype, used: set[str]) -> str:
    y, x = cast(vals[0], c), cast(vals[1], c)
    _h("_atan", used)
    at = f"_atan({y} / tl.where({x} == 0, 1.0, {x}))"
    pi = "3.141592653589793"
    return (f"tl.where({x} > 0, {at}, tl.where({x} < 0, tl.where({y} >= 0, {at} + {pi}, {at} - {pi}), "
            f"tl.where({y} > 0, {pi} / 2, tl.where({y} < 0, -{pi} / 2, 0.0))))")


def _bitwise(op: str) -> Handler:
    def f(vals: list[Val], args: list[Any], c: torch.dtype, used: set[str]) -> str:
        return f"({cast(vals[0], c)} {op} {cast(vals[1], c)})"
    return f


def _nan_to_num(vals: list[Val], args: list[Any], c: torch.dtype, used: set[str]) -> str:
    x = cast(vals[0], c)
    nan = args[1] if len(args) > 1 and args[1] is not None else 0.0
    big = {torch.float32: 3.4028234663852886e38, torch.float64: 1.7976931348623157e308}[c]
    pos = args[2] if len(args) > 2 and args[2] is not None else big
    neg = args[3] if len(args) > 3 and args[3] is not None else -big
    return (f"tl.where({x} != {x}, {literal(float(nan))}, tl.where({x} == float(\"inf\"), {literal(float(pos))}, "
            f"tl.where({x} == -float(\"inf\"), {literal(float(neg))}, {x})))")


def _round_decimals(vals: list[Val], args: list[Any], c: torch.dtype, used: set[str]) -> str:
    """round(x, decimals) as torch computes it: nearbyint(x * 10^d) / 10^d (d > 0) or nearbyint(x / 10^-d) *
    10^-d, with 10^d and every step in the input's dtype (fp16/bf16 steps rounded back to it)."""
    _h("_round", used)
    x = cast(vals[0], c)
    d = int(args[1]) if len(args) > 1 and args[1] is not None else 0
    if d == 0:
        return f"_round({x})"
    if not c.is_floating_point:
        raise ValueError("round with decimals of an integer tensor")
    dt = vals[0].dtype if vals[0].dtype in (torch.float16, torch.bfloat16) else c
    p = literal(float(torch.tensor(10.0 ** abs(d), dtype=dt)))

    def step(e: str) -> str:
        return e if dt == c else f"{narrow(e, dt, used)}.to(tl.float32)"
    if d > 0:
        return step(f"(_round({step(f'({x} * {p})')}) / {p})")
    return step(f"(_round({step(f'({x} / {p})')}) * {p})")


def _copysign(vals: list[Val], args: list[Any], c: torch.dtype, used: set[str]) -> str:
    mag = f"tl.abs({cast(vals[0], c)})"
    if vals[1].dtype is None:  # a scalar sign: decided here
        return f"(-{mag})" if math.copysign(1.0, float(args[1])) < 0 else mag
    # the sign bit, not `< 0`: copysign(x, -0.0) and copysign(x, -nan) are negative
    bits = "tl.int64" if c == torch.float64 else "tl.int32"
    return f"tl.where({cast(vals[1], c)}.to({bits}, bitcast=True) < 0, -{mag}, {mag})"


def _ldexp(vals: list[Val], args: list[Any], c: torch.dtype, used: set[str]) -> str:
    # x * 2 ** e, as torch computes it (mul by pow(2, e)); exp2 of an integer is exact
    return f"({cast(vals[0], c)} * tl.exp2({cast(vals[1], c)}))"


_INT_BITS = {torch.int8: 8, torch.uint8: 8, torch.int16: 16, torch.int32: 32, torch.int64: 64}


def _shift(left: bool) -> Handler:
    """a << b and a >> b as ATen's CPU kernels: a shift outside [0, width) gives 0 (left) or a >> (width - 1)
    for signed, 0 for unsigned (right); the shift amount is read signed (uint8's 200 is -56: out of range).
    LLVM leaves such shifts undefined, so the amount is clamped before the shift and the result chosen after."""
    def f(vals: list[Val], args: list[Any], c: torch.dtype, used: set[str]) -> str:
        if c not in _INT_BITS:
            raise NotImplementedError(f"bit shift of {c}")
        w = _INT_BITS[c]
        a, b = cast(vals[0], c), cast(vals[1], c)
        if vals[0].dtype is None:  # a scalar shifted by a tensor: the scalar in the tensor's dtype
            a = f"tl.full([], {a}, {TL_DTYPE[c]})"
        if vals[1].dtype is None:
            b = f"tl.full([], {b}, {TL_DTYPE[c]})"
        signed = f"{b}.to(tl.int8, bitcast=True)" if c == torch.uint8 else b
        bad = f"(({signed} < 0) | ({b} >= {w - (0 if left or c == torch.uint8 else 1)}))"
        safe = f"tl.where({bad}, 0, {b})"
        if left:
            return f"tl.where({bad}, 0, {a} << {safe})"
        edge = f"({a} >> {w - 1})" if c != torch.uint8 else "0"
        return f"tl.where({bad}, {edge}, {a} >> {safe})"
    return f


def _c_int(c: torch.dtype) -> torch.dtype:
    """The type C++ computes an int8/uint8/int16 expression in (int), so |.| and products wrap as eager's do."""
    return torch.int32 if _INT_BITS.get(c, 64) < 32 else c


def _gcd(vals: list[Val], args: list[Any], c: torch.dtype, used: set[str]) -> str:
    if c not in _INT_BITS:
        raise NotImplementedError(f"gcd of {c}")
    w = _c_int(c)
    return f"{_h('_gcd', used)}({cast(vals[0], w)}, {cast(vals[1], w)}).to({TL_DTYPE[c]})"


def _lcm(vals: list[Val], args: list[Any], c: torch.dtype, used: set[str]) -> str:
    """ATen's lcm: 0 where gcd is 0, else |a / g * b| computed in C++'s promoted int (int8 91 and -8: -728,
    |.| 728, stored as -40), truncated to the dtype on the way out."""
    if c not in _INT_BITS:
        raise NotImplementedError(f"lcm of {c}")
    w = _c_int(c)
    a, b = cast(vals[0], w), cast(vals[1], w)
    g = f"{_h('_gcd', used)}({a}, {b})"
    return f"tl.where({g} == 0, 0, tl.abs({a} // tl.where({g} == 0, 1, {g}) * {b})).to({TL_DTYPE[c]})"


POINTWISE: dict[str, Handler] = {
    "add": _add,
    "sub": lambda v, a, c, u: _add(v, a, c, u, "-"),
    "rsub": lambda v, a, c, u: _add([v[1], v[0]], [a[1], a[0], *a[2:]], c, u, "-"),
    "mul": _bin("*"),
    "div": lambda v, a, c, u: _div(v, a, c, u, a[2] if len(a) > 2 else None),
    "true_divide": lambda v, a, c, u: _div(v, a, c, u, None),
    "neg": _fn("(-{0})"),
    "abs": _fn("tl.abs({0})"),
    "exp": _fn("tl.exp({0})"),
    "exp2": _fn("tl.exp2({0})"),
    "expm1": _fn("_expm1({0})", "_expm1"),
    "log": _fn("tl.log({0})"),
    "log2": _fn("tl.log2({0})"),
    "log10": _fn("(tl.log({0}) * 0.4342944819032518)"),
    "log1p": _fn("_log1p({0})", "_log1p"),
    "sqrt": _fn("tl.sqrt({0})"),
    "rsqrt": _fn("tl.rsqrt({0})"),
    "reciprocal": _fn("(1.0 / {0})"),
    "sin": _fn("tl.sin({0})"),
    "cos": _fn("tl.cos({0})"),
    "tan": _fn("(tl.sin({0}) / tl.cos({0}))"),
    "sinh": _fn("((tl.exp({0}) - tl.exp(-{0})) * 0.5)"),
    "cosh": _fn("((tl.exp({0}) + tl.exp(-{0})) * 0.5)"),
    "tanh": _fn("_tanh({0})", "_tanh"),
    "atan": _fn("_atan({0})", "_atan"),
    "asinh": _fn("tl.where({0} < 0, -tl.log(-{0} + tl.sqrt({0} * {0} + 1.0)), tl.log({0} + tl.sqrt({0} * {0} + 1.0)))"),
    "acosh": _fn("tl.log({0} + tl.sqrt({0} * {0} - 1.0))"),
    "atanh": _fn("(0.5 * tl.log((1.0 + {0}) / (1.0 - {0})))"),
    "atan2": _atan2,
    # asin/acos through atan (no libdevice in the interpreter); (1-x)(1+x) keeps 1-x^2 exact near |x| = 1
    "asin": _fn("_atan({0} / tl.sqrt((1.0 - {0}) * (1.0 + {0})))", "_atan"),
    "acos": _fn("(2.0 * _atan(tl.sqrt((1.0 - {0}) / (1.0 + {0}))))", "_atan"),
    "i0": _fn("_i0({0})", "_i0"),
    "lgamma": _fn("_lgamma({0})", "_lgamma"),
    "copysign": _copysign,
    "ldexp": _ldexp,
    "sigmoid": _fn("(1.0 / (1.0 + tl.exp(-{0})))"),
    "erf": _fn("tl.erf({0})"),
    "erfc": _fn("(1.0 - tl.erf({0}))"),
    "relu": _fn("tl.maximum({0}, 0" + NANP + ")"),
    "gelu": _gelu,
    "pow": _pow,
    "maximum": lambda v, a, c, u: f"tl.maximum({cast(v[0], c)}, {cast(v[1], c)}{NANP})",
    "minimum": lambda v, a, c, u: f"tl.minimum({cast(v[0], c)}, {cast(v[1], c)}{NANP})",
    "fmax": lambda v, a, c, u: f"{_h('_fmax', u)}({cast(v[0], c)}, {cast(v[1], c)})",
    "fmin": lambda v, a, c, u: f"{_h('_fmin', u)}({cast(v[0], c)}, {cast(v[1], c)})",
    "clamp": _clamp,
    "clamp_min": lambda v, a, c, u: f"tl.maximum({cast(v[0], c)}, {cast(v[1], c)}{NANP})",
    "clamp_max": lambda v, a, c, u: f"tl.minimum({cast(v[0], c)}, {cast(v[1], c)}{NANP})",
    "where": _where,
    "eq": _cmp("=="), "ne": _cmp("!="), "lt": _cmp("<"), "le": _cmp("<="), "gt": _cmp(">"), "ge": _cmp(">="),
    "logical_and": _logical("&"), "logical_or": _logical("|"), "logical_xor": _logical("^"),
    "logical_not": lambda v, a, c, u: f"({cast(v[0], torch.bool)} == 0)",
    "bitwise_and": _bitwise("&"), "bitwise_or": _bitwise("|"), "bitwise_xor": _bitwise("^"),
    "bitwise_left_shift": _shift(True), "bitwise_right_shift": _shift(False), "__lshift__": _shift(True),
    "__rshift__": _shift(False), "gcd": _gcd, "lcm": _lcm,
    "bitwise_not": lambda v, a, c, u: f"({cast(v[0], torch.bool)} == 0)" if c == torch.bool else f"(~{cast(v[0], c)})",
    "sign": _sign, "sgn": _sign,
    "signbit": lambda v, a, c, u: f"({cast(v[0], torch.float32)} < 0)",
    "floor": _fn("tl.floor({0})"),
    "ceil": _fn("tl.ceil({0})"),
    "trunc": _fn("_trunc({0})", "_trunc"),
    "round": _round_decimals,
    "remainder": _remainder,
    "fmod": _fmod,
    "isnan": lambda v, a, c, u: f"({cast(v[0], torch.float32)} != {cast(v[0], torch.float32)})",
    "isinf": lambda v, a, c, u: f"(tl.abs({cast(v[0], torch.float32)}) == float(\"inf\"))",
    "nan_to_num": _nan_to_num,
    "clone": lambda v, a, c, u: cast(v[0], c),
    "alias": lambda v, a, c, u: cast(v[0], c),
    "lift_fresh_copy": lambda v, a, c, u: cast(v[0], c),
    "copy": lambda v, a, c, u: cast(v[1], c),
}

# ops whose result dtype is set by a kwarg (`_to_copy(x, dtype=...)`): handled by the caller
CAST_OPS = {"_to_copy", "to", "convert_element_type"}


def is_pointwise(name: str) -> bool:
    return name in POINTWISE or name in CAST_OPS


def emit(name: str, vals: list[Val], args: list[Any], out_dtype: torch.dtype, used: set[str]) -> str:
    """The expression of one pointwise node in its compute dtype."""
    c = compute_dtype(out_dtype)
    if name in CAST_OPS:
        return _cast_op(vals, args, c, used, out_dtype)
    return POINTWISE[name](vals, args, c, used)
