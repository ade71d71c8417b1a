"""Special functions (torch.special and friends) as elementwise Triton kernels, one standalone kernel per node.

Each op is PyTorch's own scalar algorithm (ATen/native/Math.h: Cephes polynomials and Chebyshev series, the
Chebyshev/Hermite/Laguerre/Legendre recurrences, digamma's shift-and-asymptote, erfinv's rational guess and
two Newton steps) written as a `@triton.jit` helper over a block of lanes: the branches of the scalar code
are all computed and selected with `tl.where`, and its loops run either a fixed count (the series' known
lengths) or, for the recurrences whose length is the degree n, up to the largest n of the block, each lane
stopping at its own n. The coefficient tables are special_tables.py.

Values are computed in fp32 and rounded once to the output dtype, as PyTorch does for fp16 and bf16 (it
upcasts to float); fp64 results are not lowered (the acos of the polynomials' trig forms and the erfcx
continued fraction are fp32-accurate). Inputs of any real dtype, broadcast against each other; a Python scalar
argument (the `x_scalar`/`n_scalar` overloads) is passed to the kernel as a float. Integer inputs give the
float result PyTorch gives (its type promotion is the node's dtype).

Standalone kernels, not entries of the pointwise table (pointwise.py): the recurrences need a per-block loop
bound that a fused chain cannot compute, and the table is being restructured elsewhere. `erfcx` is not
PyTorch's 100-piece Chebyshev table but exp(x^2) erfc(x) below 2 and the continued fraction above; both
agree with it to a few fp32 ulps (tests/lowering/test_special.py).
"""
from __future__ import annotations

import re
from dataclasses import dataclass

import torch
import torch.fx as fx

from workbench.lowering import pointwise as pw
from workbench.lowering import special_tables as tab
from workbench.lowering.epilogue import Unsupported, torch_dtype
from workbench.lowering.graph import dtype, op_name, packet, val
from workbench.lowering.primitives import Primitive, register, register_helper

TUNABLES = ("BLOCK", "NUM_WARPS")


def _horner(var: str, x: str, coeffs: list[float]) -> list[str]:
    """`var = polevl(x, coeffs)`, highest power first (Cephes' polevl; Math.h's explicit loops)."""
    out = [f"{var} = tl.zeros_like({x}) + {coeffs[0]!r}"]
    out += [f"{var} = {var} * {x} + {c!r}" for c in coeffs[1:]]
    return out


def _chbevl(var: str, y: str, coeffs: list[float]) -> list[str]:
    """`var = chbevl(y, coeffs)`: Clenshaw's recurrence of a Chebyshev series, as Cephes' chbevl."""
    out = [f"{var}_b0 = tl.zeros_like({y}) + {coeffs[0]!r}", f"{var}_b1 = tl.zeros_like({y})",
           f"{var}_b2 = tl.zeros_like({y})"]
    for c in coeffs[1:]:
        out += [f"{var}_b2 = {var}_b1", f"{var}_b1 = {var}_b0", f"{var}_b0 = {y} * {var}_b1 - {var}_b2 + {c!r}"]
    out.append(f"{var} = 0.5 * ({var}_b0 - {var}_b2)")
    return out


# a branch's argument clamped to its range (`tl.maximum(a, 8.0)`, then a tl.where on `a <= 8.0`): a nan must stay
# nan through the clamp, or the branch a nan selects (no comparison holds) computes a finite value: the GPU's
# max.f32 (tl.maximum's default) gives the constant for a nan (the interpreter's np.maximum hid it: i1e, the
# scaled K0/K1, J0/J1/Y0/Y1 and airy_ai of nan were finite). PropagateNan.ALL is max.NaN.f32, one instruction.
_CLAMP = re.compile(r"tl\.(maximum|minimum)\(([\w. -]+), (-?[\d.]+(?:e-?\d+)?)\)")


def _nan_clamps(line: str) -> str:
    while True:
        new = _CLAMP.sub(r"tl.\1(\2, \3, propagate_nan=tl.PropagateNan.ALL)", line)
        # a clamp nested in another (airy's min(max(x, lo), hi)): the inner one, marked, is a plain argument
        new2 = re.sub(r"tl\.(maximum|minimum)\((tl\.(?:maximum|minimum)\([\w. -]+, -?[\d.]+, "
                      r"propagate_nan=tl\.PropagateNan\.ALL\)), (-?[\d.]+)\)",
                      r"tl.\1(\2, \3, propagate_nan=tl.PropagateNan.ALL)", new)
        if new2 == line:
            return line
        line = new2


def _fn(name: str, args: str, body: list[str], doc: str) -> str:
    return "\n".join([f"@triton.jit\ndef {name}({args}):", f"    # {doc}"] +
                     ["    " + _nan_clamps(ln) for ln in body]) + "\n"


INF = 'float("inf")'
NAN = 'float("nan")'
PI = "3.141592653589793"


def _digamma() -> str:
    a = [8.33333333333333333333E-2, -2.10927960927960927961E-2, 7.57575757575757575758E-3,
         -4.16666666666666666667E-3, 3.96825396825396825397E-3, -8.33333333333333333333E-3,
         8.33333333333333333333E-2]
    body = ["t = tl.where(x >= 0, tl.floor(x), tl.ceil(x))", "neg = x < 0",
            # modf's fractional part, then its distance to the nearest integer (exact): tan(pi r) keeps its
            # digits where pi x would not (torch takes it in fp64)
            "r = x - t", "r = r - tl.floor(r + 0.5)",
            f"refl = {PI} * tl.cos({PI} * r) / tl.sin({PI} * r)",
            "y = tl.where(neg, 1.0 - x, x)", "res = tl.zeros_like(x)",
            "for _ in tl.static_range(10):",  # y > 0 here: ten steps of +1 reach 10 from any start
            "    step = y < 10.0", "    res = tl.where(step, res - 1.0 / y, res)", "    y = tl.where(step, y + 1.0, y)",
            "z = 1.0 / (y * y)"] + _horner("p", "z", a) + [
            "tail = tl.where(y < 1.0e17, z * p, 0.0)",
            "out = tl.where(y == 10.0, res + 2.25175258906672110764, res + tl.log(y) - 0.5 / y - tail)",
            "out = tl.where(neg, out - refl, out)", f"out = tl.where(neg & (x == t), {NAN}, out)",
            # +-0 give -+inf (the sign of -x), as the C++ standard and SciPy
            f"zs = tl.where(1.0 / tl.where(x == 0, x, 1.0) < 0, {INF}, -{INF})",
            "return tl.where(x == 0, zs, out)"]
    return _fn("_sp_digamma", "x", body, "digamma (Math.h calc_digamma): reflection, shift to >= 10, asymptotic series")


def _erfinv() -> str:
    body = ["ya = tl.abs(y)", "z = y * y",
            "num = ((-0.140543331 * z + 0.914624893) * z + -1.645349621) * z + 0.886226899",
            "dem = (((0.012229801 * z + -0.329097515) * z + 1.442710462) * z + -2.118377725) * z + 1.0",
            "xc = y * num / dem",
            "w = tl.sqrt(-tl.log((1.0 - tl.minimum(ya, 1.0)) / 2.0))",
            "num2 = ((1.641345311 * w + 3.429567803) * w + -1.624906493) * w + -1.970840454",
            "dem2 = (1.637067800 * w + 3.543889200) * w + 1.0",
            "xt = tl.where(y < 0, -tl.abs(num2), tl.abs(num2)) / dem2",
            "x = tl.where(ya <= 0.7, xc, xt)",
            "x = x - (tl.erf(x) - y) / (1.1283791670955126 * tl.exp(-x * x))",
            "x = x - (tl.erf(x) - y) / (1.1283791670955126 * tl.exp(-x * x))",
            f"x = tl.where(ya == 1.0, tl.where(y < 0, -{INF}, {INF}), x)",
            f"return tl.where(ya > 1.0, {NAN}, x)"]
    return _fn("_sp_erfinv", "y", body, "erfinv (Math.h calc_erfinv): rational first guess, two Newton steps")


def _ndtri() -> str:
    p0 = [-5.99633501014107895267E1, 9.80010754185999661536E1, -5.66762857469070293439E1, 1.39312609387279679503E1,
          -1.23916583867381258016E0]
    q0 = [1.0, 1.95448858338141759834E0, 4.67627912898881538453E0, 8.63602421390890590575E1,
          -2.25462687854119370527E2, 2.00260212380060660359E2, -8.20372256168333339912E1, 1.59056225126211695515E1,
          -1.18331621121330003142E0]
    p1 = [4.05544892305962419923E0, 3.15251094599893866154E1, 5.71628192246421288162E1, 4.40805073893200834700E1,
          1.46849561928858024014E1, 2.18663306850790267539E0, -1.40256079171354495875E-1, -3.50424626827848203418E-2,
          -8.57456785154685413611E-4]
    q1 = [1.0, 1.57799883256466749731E1, 4.53907635128879210584E1, 4.13172038254672030440E1,
          1.50425385692907503408E1, 2.50464946208309415979E0, -1.42182922854787788574E-1, -3.80806407691578277194E-2,
          -9.33259480895457427372E-4]
    p2 = [3.23774891776946035970E0, 6.91522889068984211695E0, 3.93881025292474443415E0, 1.33303460815807542389E0,
          2.01485389549179081538E-1, 1.23716634817820021358E-2, 3.01581553508235416007E-4, 2.65806974686737550832E-6,
          6.23974539184983293730E-9]
    q2 = [1.0, 6.02427039364742014255E0, 3.67983563856160859403E0, 1.37702099489081330271E0,
          2.16236993594496635890E-1, 1.34204006088543189037E-2, 3.28014464682127739104E-4, 2.89247864745380683936E-6,
          6.79019408009981274425E-9]
    e2 = "0.13533528323661269189"
    body = [f"code = y0 <= 1.0 - {e2}", "y = tl.where(code, y0, 1.0 - y0)",
            "yc = y - 0.5", "y2 = yc * yc"] + _horner("a0", "y2", p0) + _horner("b0", "y2", q0) + [
            "central = (yc + yc * (y2 * a0 / b0)) * 2.50662827463100050242",
            "ys = tl.where(y > 0, y, 1.0)",
            "x = tl.sqrt(-2.0 * tl.log(ys))", "x0 = x - tl.log(x) / x", "z = 1.0 / x"] + _horner(
            "a1", "z", p1) + _horner("b1", "z", q1) + _horner("a2", "z", p2) + _horner("b2", "z", q2) + [
            "x1 = tl.where(x < 8.0, z * a1 / b1, z * a2 / b2)", "tail = x0 - x1",
            "tail = tl.where(code, -tail, tail)",
            f"out = tl.where(y > {e2}, central, tail)",
            f"out = tl.where(y0 == 0.0, -{INF}, tl.where(y0 == 1.0, {INF}, out))",
            f"return tl.where((y0 < 0.0) | (y0 > 1.0) | (y0 != y0), {NAN}, out)"]
    return _fn("_sp_ndtri", "y0", body, "ndtri (Math.h calc_ndtri, Cephes): the normal quantile")


def _erfcx() -> str:
    body = ["a = tl.abs(x)",
            # below 2: exp(a^2) erfc(a), erfc(2) = 4.7e-3 keeps ~5 digits of 1 - erf
            "small = tl.exp(a * a) * (1.0 - tl.erf(a))",
            # from 2: erfc's continued fraction, erfcx(a) = 1 / (sqrt(pi) (a + 1/2 / (a + 1 / (a + 3/2 / ...)))),
            # 60 levels evaluated from the bottom (relative error < 1e-8 at a = 2)
            "t = tl.maximum(a, 2.0)",
            "for k in tl.static_range(60, 0, -1):",
            "    t = tl.maximum(a, 2.0) + (k * 0.5) / t",
            "big = 0.5641895835477563 / t",
            "pos = tl.where(a < 2.0, small, big)",
            "pos = tl.where(a > 5.0e7, 0.5641895835477563 / a, pos)",
            # x < 0: 2 exp(x^2) - erfcx(-x), inf below -26.7
            "negv = 2.0 * tl.exp(x * x) - pos",
            f"out = tl.where(x >= 0, pos, tl.where(x < -26.7, {INF}, negv))",
            "return tl.where(x != x, x, out)"]
    return _fn("_sp_erfcx", "x", body, "erfcx(x) = exp(x^2) erfc(x)")


def _bessel_i() -> list[str]:
    i0a, i0b = tab.I0E["A"], tab.I0E["B"]
    i1a, i1b = tab.I1E["A"], tab.I1E["B"]
    out = []
    # exp(-|x|) I0(x) and exp(-|x|) I1(x) / x (x <= 8), the same times sqrt(x) above: the shared cores
    out.append(_fn("_sp_i0e_core", "a", ["ys = a / 2.0 - 2.0"] + _chbevl("lo", "ys", i0a) + [
        "yb = 32.0 / tl.maximum(a, 8.0) - 2.0"] + _chbevl("hi", "yb", i0b) + [
        "return tl.where(a <= 8.0, lo, hi / tl.sqrt(tl.maximum(a, 8.0)))"], "exp(-a) I0(a), a = |x| (Cephes i0e)"))
    out.append(_fn("_sp_i1e_core", "a", ["ys = a / 2.0 - 2.0"] + _chbevl("lo", "ys", i1a) + [
        "yb = 32.0 / tl.maximum(a, 8.0) - 2.0"] + _chbevl("hi", "yb", i1b) + [
        "return tl.where(a <= 8.0, lo * a, hi / tl.sqrt(tl.maximum(a, 8.0)))"], "exp(-a) I1(a), a = |x| (Cephes i1e)"))
    return out


def _unary_sources() -> dict[str, tuple[str, set[str]]]:
    """name -> (source, helpers it calls)."""
    s: dict[str, tuple[str, set[str]]] = {}
    s["_sp_digamma"] = (_digamma(), set())
    s["_sp_erfinv"] = (_erfinv(), set())
    s["_sp_ndtri"] = (_ndtri(), set())
    s["_sp_erfcx"] = (_erfcx(), set())
    core_i0, core_i1 = _bessel_i()
    s["_sp_i0e_core"] = (core_i0, set())
    s["_sp_i1e_core"] = (core_i1, set())
    s["_sp_i0e"] = (_fn("_sp_i0e", "x", ["return tl.where(x != x, x, _sp_i0e_core(tl.abs(x)))"], "i0e"),
                    {"_sp_i0e_core"})
    s["_sp_i1e"] = (_fn("_sp_i1e", "x", ["r = _sp_i1e_core(tl.abs(x))", "return tl.where(x < 0, -r, r)"], "i1e"),
                    {"_sp_i1e_core"})
    s["_sp_i1"] = (_fn("_sp_i1", "x", ["a = tl.abs(x)", "r = tl.exp(a) * _sp_i1e_core(a)",
                                       "return tl.where(x < 0, -r, r)"], "I1 (Cephes i1)"), {"_sp_i1e_core"})
    # modified Bessel I0/I1 of torch.special (Math.h modified_bessel_i*_forward: the same series, own tables)
    mi0, mi1 = tab.MODIFIED_BESSEL_I0, tab.MODIFIED_BESSEL_I1
    s["_sp_mi0"] = (_fn("_sp_mi0", "x", ["a = tl.abs(x)", "ys = a / 2.0 - 2.0"] + _chbevl("lo", "ys", mi0["A"]) + [
        "am = tl.maximum(a, 8.0)", "yb = 32.0 / am - 2.0"] + _chbevl("hi", "yb", mi0["B"]) + [
        "return tl.where(a <= 8.0, tl.exp(a) * lo, tl.exp(a) * hi / tl.sqrt(am))"], "modified Bessel I0"), set())
    s["_sp_mi1"] = (_fn("_sp_mi1", "x", ["a = tl.abs(x)", "ys = a / 2.0 - 2.0"] + _chbevl("lo", "ys", mi1["A"]) + [
        "am = tl.maximum(a, 8.0)", "yb = 32.0 / am - 2.0"] + _chbevl("hi", "yb", mi1["B"]) + [
        "r = tl.where(a <= 8.0, lo * a * tl.exp(a), tl.exp(a) * hi / tl.sqrt(am))",
        "return tl.where(x < 0, -r, r)"], "modified Bessel I1"), set())
    for k, t in (("0", tab.MODIFIED_BESSEL_K0), ("1", tab.MODIFIED_BESSEL_K1)):
        for scaled in (False, True):
            nm = f"_sp_{'s' if scaled else ''}k{k}"
            xs = "tl.maximum(x, 1e-30)"
            if k == "0":
                small = f"lo - tl.log(0.5 * {xs}) * _sp_mi0(x)"
            else:
                small = f"tl.log(0.5 * {xs}) * _sp_mi1(x) + lo / {xs}"
            body = ["xx = x * x - 2.0"] + _chbevl("lo", "xx", t["A"]) + [
                "xm = tl.maximum(x, 2.0)", "yb = 8.0 / xm - 2.0"] + _chbevl("hi", "yb", t["B"]) + [
                f"sm = {small}"]
            if scaled:
                body += ["out = tl.where(x <= 2.0, sm * tl.exp(x), hi / tl.sqrt(xm))"]
            else:
                body += ["out = tl.where(x <= 2.0, sm, tl.exp(-x) * hi / tl.sqrt(xm))"]
            body += [f"out = tl.where(x == 0, {INF}, out)", f"return tl.where(x < 0, {NAN}, out)"]
            s[nm] = (_fn(nm, "x", body, f"{'scaled ' if scaled else ''}modified Bessel K{k} (Math.h)"),
                     {"_sp_mi0" if k == "0" else "_sp_mi1"})
    s.update(_bessel_j_y())
    s["_sp_sj0"] = (_fn("_sp_sj0", "x", [
        "z = x * x",
        "ser = 1.0 + z * (-1.0 / 6.0 + z * (1.0 / 120.0 + z * (-1.0 / 5040.0 + z * (1.0 / 362880.0 + z * ("
        "-1.0 / 39916800.0 + z * (1.0 / 6227020800.0))))))",
        "out = tl.where(tl.abs(x) < 0.5, ser, tl.sin(x) / x)",
        f"return tl.where(tl.abs(x) == {INF}, 0.0, out)"], "spherical Bessel j0: sin(x) / x"), set())
    s["_sp_airy"] = (_airy(), set())
    return s


def _bessel_j_y() -> dict[str, tuple[str, set[str]]]:
    s: dict[str, tuple[str, set[str]]] = {}
    j0, j1, y0, y1 = tab.BESSEL_J0, tab.BESSEL_J1, tab.BESSEL_Y0, tab.BESSEL_Y1

    def asym(t: dict, w: str, phase: str, kind: str) -> list[str]:
        # Hankel's asymptotic form for x > 5: (P cos(x - phase) -+ 5/x Q sin(x - phase)) sqrt(2 / (pi x))
        lines = _horner("pp", w, t["PP"]) + _horner("pq", w, t["PQ"]) + _horner("qp", w, t["QP"]) + \
            _horner("qq", w, t["QQ"])
        if kind == "j":
            lines.append(f"big = (pp / pq * tl.cos(xb - {phase}) - 5.0 / xb * (qp / qq) * tl.sin(xb - {phase})) "
                         "* 0.7978845608028654 / tl.sqrt(xb)")
        else:
            lines.append(f"big = (pp / pq * tl.sin(xb - {phase}) + 5.0 / xb * (qp / qq) * tl.cos(xb - {phase})) "
                         "* 0.7978845608028654 / tl.sqrt(xb)")
        return lines

    p0, p1 = "0.7853981633974483", "2.356194490192345"
    s["_sp_j0"] = (_fn("_sp_j0", "x0", ["x = tl.abs(x0)", "z = x * x"] + _horner("rp", "z", j0["RP"]) + _horner(
        "rq", "z", j0["RQ"]) + ["small = (z - 5.78318596294678452118) * (z - 30.4712623436620863991) * rp / rq",
                                "small = tl.where(x < 0.00001, 1.0 - z / 4.0, small)",
                                "xb = tl.maximum(x, 5.0)", "w = 25.0 / (xb * xb)"] + asym(j0, "w", p0, "j") + [
        "return tl.where(x <= 5.0, small, big)"], "Bessel J0 (Math.h bessel_j0_forward, Cephes j0)"), set())
    s["_sp_j1"] = (_fn("_sp_j1", "x0", ["x = tl.abs(x0)", "z = x * x"] + _horner("rp", "z", j1["RP"]) + _horner(
        "rq", "z", j1["RQ"]) + ["small = rp / rq * x * (z - 14.6819706421238932572) * (z - 49.2184563216946036703)",
                                "xb = tl.maximum(x, 5.0)", "w = 5.0 / xb * (5.0 / xb)"] + asym(j1, "w", p1, "j") + [
        "r = tl.where(x <= 5.0, small, big)", "return tl.where(x0 < 0, -r, r)"],
        "Bessel J1 (Math.h bessel_j1_forward, Cephes j1)"), set())
    s["_sp_y0"] = (_fn("_sp_y0", "x", ["xs = tl.where(x > 0, x, 1.0)", "z = xs * xs"] + _horner(
        "yp", "z", y0["YP"]) + _horner("yq", "z", y0["YQ"]) + [
        "small = yp / yq + 0.6366197723675814 * tl.log(xs) * _sp_j0(xs)",
        f"small = tl.where(x == 0, -{INF}, tl.where(x < 0, {NAN}, small))",
        "xb = tl.maximum(x, 5.0)", "w = 25.0 / (xb * xb)"] + asym(y0, "w", p0, "y") + [
        "return tl.where(x <= 5.0, small, big)"], "Bessel Y0 (Math.h bessel_y0_forward, Cephes y0)"), {"_sp_j0"})
    s["_sp_y1"] = (_fn("_sp_y1", "x", ["xs = tl.where(x > 0, x, 1.0)", "z = xs * xs"] + _horner(
        "yp", "z", y1["YP"]) + _horner("yq", "z", y1["YQ"]) + [
        "small = xs * (yp / yq) + 0.6366197723675814 * (_sp_j1(xs) * tl.log(xs) - 1.0 / xs)",
        f"small = tl.where(x == 0, -{INF}, tl.where(x < 0, {NAN}, small))",
        "xb = tl.maximum(x, 5.0)", "w = 5.0 / xb * (5.0 / xb)"] + asym(y1, "w", p1, "y") + [
        "return tl.where(x <= 5.0, small, big)"], "Bessel Y1 (Math.h bessel_y1_forward, Cephes y1)"), {"_sp_j1"})
    return s


def _airy() -> str:
    t = tab.AIRY_AI
    body = ["xn = tl.minimum(x, -2.09)", "sq = tl.sqrt(-xn)", "zn = 1.0 / (-2.0 * xn * sq / 3.0)", "zz = zn * zn"]
    body += _horner("afn", "zz", t["AFN"]) + _horner("afd", "zz", t["AFD"]) + _horner("agn", "zz", t["AGN"])
    body += _horner("agd", "zz", t["AGD"])
    body += [f"tt = -2.0 * xn * sq / 3.0 + 0.25 * {PI}",
             "neg = 0.5641895835477563 / tl.sqrt(sq) * (tl.sin(tt) * (1.0 + zz * afn / afd) "
             "- tl.cos(tt) * (zn * agn / agd))",
             "xp = tl.maximum(x, 2.09)", "zeta = 2.0 * xp * tl.sqrt(xp) / 3.0", "iz = 1.0 / zeta"]
    body += _horner("an", "iz", t["AN"]) + _horner("ad", "iz", t["AD"])
    body += ["pos = 0.5641895835477563 * (an / ad) / (2.0 * tl.sqrt(tl.sqrt(xp)) * tl.exp(zeta))",
             # the Maclaurin series between: Math.h's `while (t > eps)`, each lane stopping where it would
             "xs = tl.minimum(tl.maximum(x, -2.09), 2.09)",
             "f = tl.zeros_like(xs) + 1.0", "g = xs", "k = tl.zeros_like(xs) + 1.0", "m = f", "n = xs", "t = f",
             "z = xs * xs * xs",
             "for _ in tl.static_range(40):",
             "    go = t > 1.1920928955078125e-07",
             "    m2 = m * z", "    k2 = k + 1.0", "    m2 = m2 / k2", "    n2 = n * z", "    k2 = k2 + 1.0",
             "    n2 = n2 / k2", "    m2 = m2 / k2", "    f2 = f + m2", "    k2 = k2 + 1.0", "    n2 = n2 / k2",
             "    g2 = g + n2",
             "    m = tl.where(go, m2, m)", "    n = tl.where(go, n2, n)", "    k = tl.where(go, k2, k)",
             "    f = tl.where(go, f2, f)", "    g = tl.where(go, g2, g)", "    t = tl.where(go, tl.abs(m2 / f2), t)",
             "mid = 0.355028053887817239260 * f - 0.258819403792806798405 * g",
             "out = tl.where(x < -2.09, neg, tl.where(x >= 2.09, pos, mid))",
             "out = tl.where(x > 103.892, 0.0, out)",
             f"return tl.where(tl.abs(x) == {INF}, {NAN}, out)"]
    return _fn("_sp_airy", "x", body, "Airy Ai (Math.h airy_ai_forward, Cephes airy)")


# -- two-argument ops -------------------------------------------------------------------------------------------

def _zeta() -> str:
    a = [12.0, -720.0, 30240.0, -1209600.0, 47900160.0, -1.8924375803183791606e9, 7.47242496e10,
         -2.950130727918164224e12, 1.1646782814350067249e14, -4.5979787224074726105e15, 1.8152105401943546773e17,
         -7.1661652561756670113e18]
    body = ["eps = 1.11022302462515654042e-16",
            "s = _sp_powm(q, x)", "a = q", "b = tl.zeros_like(x)", "done = x != x", "i = 0",
            # Math.h: `while (i < 9 || a <= 9)`, a returning lane leaves; nb bounds the block's longest
            "for _ in range(0, nb):",
            "    go = ((i < 9) | (a <= 9.0)) & (done == 0)",
            "    a2 = a + 1.0", "    b2 = _sp_powm(a2, x)", "    s2 = s + b2",
            "    a = tl.where(go, a2, a)", "    b = tl.where(go, b2, b)", "    s = tl.where(go, s2, s)",
            "    done = done | (go & (-eps * s2 < b2) & (b2 < eps * s2))", "    i += 1",
            "w = a", "s = tl.where(done, s, s + b * w / (x - 1.0) - 0.5 * b)",
            "aa = tl.zeros_like(x) + 1.0", "k = tl.zeros_like(x)"]
    for c in a:
        body += ["aa = aa * (x + k)", "b = b / w", f"tt = aa * b / {c!r}", "s2 = s + tt",
                 "s = tl.where(done, s, s2)", "done = done | (tl.abs(tt / s2) < eps)",
                 "k = k + 1.0", "aa = aa * (x + k)", "b = b / w", "k = k + 1.0"]
    body += [f"s = tl.where(x == 1.0, {INF}, s)", f"s = tl.where(x < 1.0, {NAN}, s)",
             f"s = tl.where((q <= 0) & (q == tl.floor(q)) & (x > 1.0), {INF}, s)",
             f"s = tl.where((q <= 0) & (q != tl.floor(q)) & (x != tl.floor(x)) & (x > 1.0), {NAN}, s)",
             f"return tl.where((x != x) | (q != q), {NAN}, s)"]
    return _fn("_sp_zeta", "x, q, nb", body, "Hurwitz zeta (Math.h zeta, Cephes): direct sum, Euler-Maclaurin tail")


_POWM = _fn("_sp_powm", "a, x", [
    "mag = tl.exp2(-x * tl.log2(tl.abs(a)))",
    "xi = tl.floor(x) == x", "odd = xi & (tl.floor(x * 0.5) * 2.0 != x)",
    "r = tl.where((a < 0) & odd, -mag, mag)",
    f"r = tl.where((a < 0) & (xi == 0), {NAN}, r)",
    f"return tl.where(a == 0, tl.where(x > 0, {INF}, tl.where(x == 0, 1.0, 0.0)), r)"], "a ** -x, as pow")


@dataclass(frozen=True)
class Recurrence:
    """A polynomial of degree n by its three-term recurrence: the n < 0 / n == 0 / n == 1 / special-x cases and
    the step are Triton expressions in x, n (float), p (degree k - 1), q (degree k), k (float)."""
    first: str                  # the degree-1 value
    step: str                   # degree k + 1 from p, q, k (torch's loop variable, see `k0`)
    k0: int                     # the first k of torch's loop; the loop runs while `k <= n` (kind "le") or `< n`
    kind: str
    special: list[tuple[str, str]]   # (condition, value) applied last-first, after the recurrence


def _poly_source(name: str, r: Recurrence) -> str:
    # the recurrence's count: `for k = k0; k <= n` runs n - k0 + 1 times, `k < n` n - k0 times
    last = "n" if r.kind == "le" else "n - 1.0"
    body = ["p = tl.zeros_like(x) + 1.0", f"q = {r.first}", "r = q",
            f"k = tl.zeros_like(x) + {float(r.k0)!r}",
            "for _ in range(0, nb):",
            f"    go = k <= {last}",
            f"    r2 = {r.step}",
            "    p = tl.where(go, q, p)", "    q = tl.where(go, r2, q)", "    r = tl.where(go, r2, r)",
            "    k = k + 1.0"]
    body.append("out = r")
    for cond, value in reversed(r.special):
        body.append(f"out = tl.where({cond}, {value}, out)")
    body.append("return out")
    return _fn(name, "x, n, nb", body, "orthogonal polynomial of integer degree n (Math.h's recurrence)")


def _even(n: str = "n") -> str:
    return f"(tl.floor({n} * 0.5) * 2.0 == {n})"


def _polynomials() -> dict[str, tuple[Recurrence, str]]:
    """op -> (recurrence, the expression of the loop count a lane needs: max over the block bounds the loop)."""
    ax = "tl.abs(x)"
    # Chebyshev: the trig forms where torch takes them, then the |x| == 1 and small-n cases
    cheb_t = Recurrence("x", "(x + x) * q - p", 2, "le", [
        ("n < 0", "0.0"), (f"{ax} == 1.0", f"tl.where((x > 0) | {_even()}, 1.0, -1.0)"),
        (f"(n > 6) & ({ax} < 1.0)", "tl.cos(n * _sp_acos(x))"), ("n == 0", "1.0"), ("n == 1", "x")])
    cheb_u = Recurrence("x + x", "(x + x) * q - p", 2, "le", [
        ("n < 0", "0.0"), (f"{ax} == 1.0", f"tl.where((x > 0) | {_even()}, n + 1.0, -(n + 1.0))"),
        (f"(n > 8) & ({ax} < 1.0)", "tl.where(tl.sin(_sp_acos(x)) != 0.0, tl.sin((n + 1.0) * _sp_acos(x)) / "
         "tl.sin(_sp_acos(x)), (n + 1.0) * tl.cos((n + 1.0) * _sp_acos(x)) / x)"),
        ("n == 0", "1.0"), ("n == 1", "x + x")])
    odd_v = f"tl.where({_even()}, n + n + 1.0, -(n + n + 1.0))"
    cheb_v = Recurrence("x + x - 1.0", "(x + x) * q - p", 2, "le", [
        ("n < 0", "0.0"), (f"{ax} == 1.0", f"tl.where(x > 0, 1.0, {odd_v})"),
        (f"(n > 8) & ({ax} < 1.0)", f"tl.where(tl.sin(_sp_acos(x) / 2.0) != 1.0, tl.cos((n + 0.5) * _sp_acos(x)) / "
         f"tl.cos(_sp_acos(x) / 2.0), {odd_v})"),
        ("n == 0", "1.0"), ("n == 1", "x + x - 1.0")])
    pm = f"tl.where({_even()}, 1.0, -1.0)"
    cheb_w = Recurrence("x + x + 1.0", "(x + x) * q - p", 2, "le", [
        ("n < 0", "0.0"), (f"{ax} == 1.0", f"tl.where(x > 0, n + n + 1.0, {pm})"),
        (f"(n > 8) & ({ax} < 1.0)", f"tl.where(tl.cos(_sp_acos(x) / 2.0) != 1.0, tl.sin((n + 0.5) * _sp_acos(x)) / "
         f"tl.sin(_sp_acos(x) / 2.0), tl.where(x > 0, n + n + 1.0, {pm}))"),
        ("n == 0", "1.0"), ("n == 1", "x + x + 1.0")])
    # the shifted ones are the same in y = 2x - 1, with their own special points x == 1 and x == 0
    y = "(x + x - 1.0)"
    s_t = Recurrence(y, f"({y} + {y}) * q - p", 2, "le", [
        ("n < 0", "0.0"), ("x == 1.0", "1.0"), ("x == 0.0", pm),
        (f"(n > 6) & (tl.abs({y}) < 1.0)", f"tl.cos(n * _sp_acos({y}))"), ("n == 0", "1.0"), ("n == 1", y)])
    s_u = Recurrence(f"{y} + {y}", f"({y} + {y}) * q - p", 2, "le", [
        ("n < 0", "0.0"), ("x == 1.0", "n + 1.0"), ("x == 0.0", "tl.where(" + _even() + ", n + 1.0, -(n + 1.0))"),
        (f"(n > 6) & (tl.abs({y}) < 1.0)", f"tl.where(tl.sin(_sp_acos({y})) != 0.0, tl.sin((n + 1.0) * "
         f"_sp_acos({y})) / tl.sin(_sp_acos({y})), (n + 1.0) * tl.cos((n + 1.0) * _sp_acos({y})) / {y})"),
        ("n == 0", "1.0"), ("n == 1", f"{y} + {y}")])
    s_v = Recurrence(f"{y} + {y} - 1.0", f"({y} + {y}) * q - p", 2, "le", [
        ("n < 0", "0.0"), ("x == 1.0", "1.0"), ("x == 0.0", odd_v),
        (f"(n > 6) & (tl.abs({y}) < 1.0)", f"tl.where(tl.sin(_sp_acos({y}) / 2.0) != 1.0, tl.cos((n + 0.5) * "
         f"_sp_acos({y})) / tl.cos(_sp_acos({y}) / 2.0), {odd_v})"),
        ("n == 0", "1.0"), ("n == 1", f"{y} + {y} - 1.0")])
    s_w = Recurrence(f"{y} + {y} + 1.0", f"({y} + {y}) * q - p", 2, "le", [
        ("n < 0", "0.0"), ("x == 1.0", "n + n + 1.0"), ("x == 0.0", pm),
        (f"(n > 4) & (tl.abs({y}) < 1.0)", f"tl.where(tl.cos(_sp_acos({y}) / 2.0) != 1.0, tl.sin((n + 0.5) * "
         f"_sp_acos({y})) / tl.sin(_sp_acos({y}) / 2.0), {pm})"),
        ("n == 0", "1.0"), ("n == 1", f"{y} + {y} + 1.0")])
    # Hermite: torch's loop variable steps by 2 (H) or 1 (He); k here counts degrees, the step uses torch's k
    herm_h = Recurrence("x + x", "(x + x) * q - (k + k - 2.0) * p", 2, "le", [
        ("n < 0", "0.0"), ("n == 0", "1.0"), ("n == 1", "x + x"), ("n > 128", NAN)])
    herm_he = Recurrence("x", "x * q - (k - 1.0) * p", 2, "le", [
        ("n < 0", "0.0"), ("n == 0", "1.0"), ("n == 1", "x"), ("n > 128", NAN)])
    lag = Recurrence("1.0 - x", "(((k + k) + (1.0 - x)) * q - k * p) / (k + 1.0)", 1, "lt", [
        ("n < 0", "0.0"), ("tl.abs(x) == 0.0", "1.0"), ("n == 0", "1.0"), ("n == 1", "1.0 - x")])
    leg = Recurrence("x", "((k + k + 1.0) * x * q - k * p) / (k + 1.0)", 1, "lt", [
        ("n < 0", "0.0"), (f"{ax} == 1.0", f"tl.where((x > 0) | {_even()}, 1.0, -1.0)"), ("n == 0", "1.0"),
        ("n == 1", "x")])
    return {"special_chebyshev_polynomial_t": cheb_t, "special_chebyshev_polynomial_u": cheb_u,
            "special_chebyshev_polynomial_v": cheb_v, "special_chebyshev_polynomial_w": cheb_w,
            "special_shifted_chebyshev_polynomial_t": s_t, "special_shifted_chebyshev_polynomial_u": s_u,
            "special_shifted_chebyshev_polynomial_v": s_v, "special_shifted_chebyshev_polynomial_w": s_w,
            "special_hermite_polynomial_h": herm_h, "special_hermite_polynomial_he": herm_he,
            "special_laguerre_polynomial_l": lag, "special_legendre_polynomial_p": leg}


_ACOS = _fn("_sp_acos", "x", [
    # acos through atan (no libdevice in the interpreter): 2 atan(sqrt((1 - x) / (1 + x))), as pointwise's acos
    "return 2.0 * _atan(tl.sqrt((1.0 - x) / (1.0 + x)))"], "acos")


@dataclass(frozen=True)
class Op:
    helper: str
    arity: int = 1
    bound: str = ""       # the per-lane loop count whose block maximum is passed as `nb` ("" for none)


UNARY = {"digamma": "_sp_digamma", "erfinv": "_sp_erfinv", "special_ndtri": "_sp_ndtri",
         "special_erfcx": "_sp_erfcx", "special_i0e": "_sp_i0e", "special_i1": "_sp_i1", "special_i1e": "_sp_i1e",
         "special_modified_bessel_i0": "_sp_mi0", "special_modified_bessel_i1": "_sp_mi1",
         "special_modified_bessel_k0": "_sp_k0", "special_modified_bessel_k1": "_sp_k1",
         "special_scaled_modified_bessel_k0": "_sp_sk0", "special_scaled_modified_bessel_k1": "_sp_sk1",
         "special_bessel_j0": "_sp_j0", "special_bessel_j1": "_sp_j1", "special_bessel_y0": "_sp_y0",
         "special_bessel_y1": "_sp_y1", "special_spherical_bessel_j0": "_sp_sj0", "special_airy_ai": "_sp_airy"}
OPS: dict[str, Op] = {k: Op(v) for k, v in UNARY.items()}
# zeta's direct sum runs at least 9 steps and until a = q + i passes 9
OPS["special_zeta"] = Op("_sp_zeta", 2,
                         "tl.where(b == b, tl.maximum(9.0, tl.minimum(tl.floor(9.0 - b) + 1.0, 1.0e6)), 9.0)")
POLYS = _polynomials()
# two real elementwise ops of the same shape: hypot (scaled, so a^2 never overflows) and angle of a real tensor
OPS["hypot"] = Op("_sp_hypot", 2)
OPS["angle"] = Op("_sp_angle")
_HYPOT = _fn("_sp_hypot", "a, b", [
    "x = tl.abs(a)", "y = tl.abs(b)", "m = tl.maximum(x, y)", "r = tl.minimum(x, y) / tl.where(m == 0, 1.0, m)",
    "h = m * tl.sqrt(1.0 + r * r)",
    f"h = tl.where((x != x) | (y != y), {NAN}, h)",
    f"return tl.where((x == {INF}) | (y == {INF}), {INF}, h)"], "hypot: sqrt(a^2 + b^2) as C's hypot (inf wins nan)")
_ANGLE = _fn("_sp_angle", "x", [f"return tl.where(x != x, x, tl.where(x < 0, {PI}, 0.0))"],
             "angle of a real number: pi below 0, else 0; nan stays")
for _op in POLYS:
    # the recurrence runs n - 1 steps at most (n > 128 Hermite lanes are nan, not run); a degree is an int64 by then
    OPS[_op] = Op(f"_sp_{_op.removeprefix('special_')}", 2, "tl.minimum(b, 129.0)" if "hermite" in _op else
                  "tl.minimum(b, 1.0e6)")


def _register_helpers() -> None:
    for name, (src, _) in _unary_sources().items():
        register_helper(name, src)
    register_helper("_sp_zeta", _zeta())
    register_helper("_sp_powm", _POWM)
    register_helper("_sp_acos", _ACOS)
    register_helper("_sp_hypot", _HYPOT)
    register_helper("_sp_angle", _ANGLE)
    for op, rec in POLYS.items():
        register_helper(OPS[op].helper, _poly_source(OPS[op].helper, rec))


_DEPS: dict[str, set[str]] = {name: deps for name, (_, deps) in _unary_sources().items()}
_DEPS["_sp_zeta"] = {"_sp_powm"}
for _op in POLYS:
    _DEPS[OPS[_op].helper] = {"_sp_acos", "_atan"}


def _closure(names: set[str]) -> set[str]:
    out, todo = set(), list(names)
    while todo:
        n = todo.pop()
        if n not in out:
            out.add(n)
            todo += list(_DEPS.get(n, ()))
    return out


def special_kernel(name: str, node: fx.Node, names: dict[fx.Node, str], expr) -> tuple[str, list[str], set[str]]:  # noqa: ANN001
    op = OPS[packet(node)]
    args = list(node.args[:op.arity])
    out_dt = dtype(node)
    if out_dt not in (torch.float32, torch.float16, torch.bfloat16):
        # fp64 too: the polynomials' acos and some series are fp32-accurate only
        raise Unsupported(f"unsupported: {op_name(node)} with a {out_dt} result")
    for a in args:
        if isinstance(a, fx.Node) and (dtype(a).is_complex or not isinstance(val(a), torch.Tensor)):
            raise Unsupported(f"unsupported: {op_name(node)} of {val(a)!r}")
    c = torch.float32
    ct = pw.TL_DTYPE[c]
    used: set[str] = {op.helper}
    letters = "ab"[:op.arity]
    params, loads, launch_args = [], [], []
    tensors = [(ch, a) for ch, a in zip(letters, args) if isinstance(a, fx.Node)]
    for ch, a in zip(letters, args):
        if isinstance(a, fx.Node):
            params.append(f"{ch}_ptr")
            loads.append(f"{ch} = tl.load({ch}_ptr + offs, mask=mask, other=0).to({ct})")
            launch_args.append(f"_{ch}")
        else:
            params.append(f"{ch}_s")
            loads.append(f"{ch} = tl.zeros([BLOCK], {ct}) + {ch}_s")
            launch_args.append(f"float({expr(a)})")
    L = ["offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)", "mask = offs < n", *loads]
    call = ", ".join(letters)
    if op.bound:
        # The degree as torch takes it, `static_cast<int64_t>(n)`, done by the device's own conversion: truncated;
        # nan and +-inf become INT64_MIN on the CPU (x86; numpy's cast in the interpreter, and the CPU hermite_h's
        # -1 gives the same 0), and 0 / +-INT64_MAX on the GPU (PTX cvt.rzi, as CUDA eager's jiterator code).
        if op.arity == 2 and op.helper != "_sp_zeta":
            L.append("b = b.to(tl.int64).to(tl.float32)")
        L.append(f"nb = tl.max(tl.where(mask, {op.bound}, 0.0), axis=0).to(tl.int32)")
        call += ", nb"
    L.append(f"r = {op.helper}({call})")
    narrow = c == torch.float32 and out_dt != torch.float32
    store = pw.narrow("r", out_dt, used) if narrow else f"r.to({pw.TL_DTYPE[out_dt]})"
    L.append(f"tl.store(out_ptr + offs, {store}, mask=mask)")
    sig = ", ".join([*params, "out_ptr", "n", "BLOCK: tl.constexpr"])
    doc = f'    """{packet(node)} of each element (broadcast inputs made contiguous by the launch)."""'
    src = "\n".join([f"@triton.jit\ndef {name}({sig}):", doc] + ["    " + ln for ln in L]) + "\n"
    v = names[node]
    shapes = ", ".join(f"{names[a]}.shape" for _, a in tensors)
    launch = [f"_shape = _bshape({shapes})"]
    launch += [f"_{ch} = {names[a]}.expand(_shape).contiguous()" for ch, a in tensors]
    launch += [f"{v} = torch.empty(_shape, dtype={torch_dtype(out_dt)}, device=dev)", f"_n = {v}.numel()",
               f"if _n: {name}[(triton.cdiv(_n, BLOCK),)]({', '.join(launch_args)}, {v}, _n, BLOCK=BLOCK, "
               "num_warps=NUM_WARPS)"]
    return src, launch, _closure(used)


_NEXT_BITS = {torch.float32: ("tl.int32", "tl.float32", -2147483648), torch.float16: ("tl.int16", "tl.float16", -32768),
              torch.bfloat16: ("tl.int16", "tl.bfloat16", -32768)}


def nextafter_kernel(name: str, node: fx.Node, names: dict[fx.Node, str], expr) -> tuple[str, list[str], set[str]]:  # noqa: ANN001
    """nextafter(a, b): the neighbour of a toward b in the output dtype itself, one step on its bits (sign and
    magnitude: +1 moves away from 0); a == b gives b, 0 the smallest subnormal signed as b, nan gives nan."""
    a, b = node.args[:2]
    out_dt = dtype(node)
    if out_dt not in _NEXT_BITS or not all(isinstance(t, fx.Node) for t in (a, b)):
        raise Unsupported(f"unsupported: {op_name(node)} on {out_dt}")
    it, ft, sign = _NEXT_BITS[out_dt]
    L = ["offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)", "mask = offs < n",
         f"a = tl.load(a_ptr + offs, mask=mask, other=0).to({ft})",
         f"b = tl.load(b_ptr + offs, mask=mask, other=0).to({ft})",
         # the tests in fp32 (exact for the narrow dtypes; the interpreter compares bf16 as raw bits), the step on
         # the native bits
         "af = a.to(tl.float32)", "bf = b.to(tl.float32)",
         f"ai = a.to({it}, bitcast=True)",
         "step = tl.where((af < bf) == (af > 0), 1, -1).to(" + it + ")",
         f"tiny = tl.where(bf > 0, 1, 1 | {sign}).to({it})",
         f"r = tl.where(af == 0, tiny, ai + step).to({ft}, bitcast=True)",
         "r = tl.where(af == bf, b, r)",
         f"r = tl.where((af != af) | (bf != bf), (af + bf).to({ft}), r)",
         "tl.store(out_ptr + offs, r, mask=mask)"]
    src = "\n".join([f"@triton.jit\ndef {name}(a_ptr, b_ptr, out_ptr, n, BLOCK: tl.constexpr):",
                     '    """nextafter of each element pair, on the bits."""'] + ["    " + ln for ln in L]) + "\n"
    v, av, bv = names[node], names[a], names[b]
    launch = [f"_shape = _bshape({av}.shape, {bv}.shape)",
              f"_a = {av}.to({torch_dtype(out_dt)}).expand(_shape).contiguous()",
              f"_b = {bv}.to({torch_dtype(out_dt)}).expand(_shape).contiguous()",
              f"{v} = torch.empty(_shape, dtype={torch_dtype(out_dt)}, device=dev)", f"_n = {v}.numel()",
              f"if _n: {name}[(triton.cdiv(_n, BLOCK),)](_a, _b, {v}, _n, BLOCK=BLOCK, num_warps=NUM_WARPS)"]
    return src, launch, set()


_register_helpers()
register("nextafter", Primitive("special", TUNABLES, nextafter_kernel))
for _op in OPS:
    register(_op, Primitive("special", TUNABLES, special_kernel))
