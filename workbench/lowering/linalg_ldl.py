"""Symmetric indefinite LDL^T with Bunch-Kaufman pivoting, as LAPACK's ssytf2 with UPLO = 'L' (what torch's
`linalg_ldl_factor_ex` calls, through ssytrf, for n below its block size), and the solve with it (ssytrs): one
program per matrix, the matrix in registers (n <= MAX_N), fp32.

`_ldl` keeps the trailing block symmetric in full (the lower triangle mirrored), so LAPACK's interchange of rows
and columns KK and KP inside it is one row swap and one column swap restricted to rows / columns >= k; finished
columns of L are not permuted (ssytf2 stores L as a product of P(k) L(k), and so does this). The pivot choice is
Bunch and Kaufman's (alpha = (1 + sqrt(17)) / 8, the first largest |a| as isamax): a 1 x 1 pivot, with or without
an interchange, or a 2 x 2 one; the pivots are LAPACK's (1-based, negative for both rows of a 2 x 2 block), the
upper triangle of LD is zeroed, as torch returns it, and info is the first zero column. Both updates of a step are
computed and one is kept by the step's size: no data-dependent branch on a tile.
`_ldl_solve` is ssytrs's two sweeps over the pivots (L D Y = P B, then L^T X = Y) on a [n, m] right-hand side.
"""
from __future__ import annotations

import torch
import torch.fx as fx

from workbench.lowering.epilogue import Unsupported
from workbench.lowering.graph import dtype, op_name, packet
from workbench.lowering.primitives import Primitive, register

TUNABLES = ("NUM_WARPS",)
MAX_N = 64
ALPHA = (1.0 + 17.0 ** 0.5) / 8.0

SRC = '''@triton.jit
def __KNAME___ldl(a_ptr, ld_ptr, piv_ptr, info_ptr, n, a_sb, a_sr, a_sc, NP: tl.constexpr, ALPHA: tl.constexpr):
    """Bunch-Kaufman LDL^T of the symmetric A [n, n] (its lower triangle): LD [n, n], pivots [n], info."""
    bi = tl.program_id(0).to(tl.int64)
    r = tl.arange(0, NP)
    rr = r[:, None]
    cc = r[None, :]
    base = a_ptr + bi * a_sb
    S = tl.load(base + rr * a_sr + cc * a_sc, mask=(rr < n) & (cc <= rr), other=0).to(tl.float32)
    S += tl.load(base + cc * a_sr + rr * a_sc, mask=(cc < n) & (rr < cc), other=0).to(tl.float32)
    info = tl.sum(tl.where(r == 0, 0, 0), 0)
    k = tl.sum(tl.where(r == 0, 0, 0), 0)
    while k < n:
        colk = tl.sum(tl.where(cc == k, S, 0.0), 1)
        akk = tl.abs(tl.sum(tl.where(r == k, colk, 0.0), 0))
        below = tl.where((r > k) & (r < n), tl.abs(colk), -1.0)
        colmax = tl.maximum(tl.max(below, 0), 0.0)
        imax = tl.min(tl.where((below == colmax) & (r > k), r, NP), 0)
        rowi = tl.sum(tl.where(rr == imax, S, 0.0), 0)
        rowmax = tl.max(tl.where((r >= k) & (r < n) & (r != imax), tl.abs(rowi), 0.0), 0)
        aii = tl.abs(tl.sum(tl.where(r == imax, rowi, 0.0), 0))
        zero = (tl.maximum(akk, colmax) == 0.0) | (akk != akk)
        one_k = zero | (akk >= ALPHA * colmax) | (akk * rowmax >= ALPHA * colmax * colmax)
        kstep = tl.where(one_k | (aii >= ALPHA * rowmax), 1, 2)
        kp = tl.where(one_k, k, imax)
        kk = k + kstep - 1
        info = tl.where(zero & (info == 0), k + 1, info)
        # the symmetric interchange of kk and kp inside the trailing block
        ra = tl.sum(tl.where(rr == kk, S, 0.0), 0)
        rb = tl.sum(tl.where(rr == kp, S, 0.0), 0)
        S = tl.where((rr == kk) & (cc >= k), rb[None, :], tl.where((rr == kp) & (cc >= k), ra[None, :], S))
        ca = tl.sum(tl.where(cc == kk, S, 0.0), 1)
        cb = tl.sum(tl.where(cc == kp, S, 0.0), 1)
        S = tl.where((cc == kk) & (rr >= k), cb[:, None], tl.where((cc == kp) & (rr >= k), ca[:, None], S))
        # 1 x 1: A -= x x^T / d (ssyr, as LAPACK rounds it), then the column scaled by 1 / d
        x = tl.where(r > k, tl.sum(tl.where(cc == k, S, 0.0), 1), 0.0)
        dkk = tl.sum(tl.where(r == k, tl.sum(tl.where(cc == k, S, 0.0), 1), 0.0), 0)
        d11 = 1.0 / tl.where(zero, 1.0, dkk)
        t1 = -d11 * x
        S1 = tl.where((rr > k) & (cc > k), S + x[:, None] * t1[None, :], S)
        S1 = tl.where((cc == k) & (rr > k), (x * d11)[:, None], S1)
        S1 = tl.where(zero, S, S1)
        # 2 x 2 with D = [[a_kk, a_k1k], [a_k1k, a_k1k1]]: (W_k, W_k+1) = (a_k, a_k+1) D^-1 as ssytf2 writes it
        x0 = tl.where(r > k + 1, tl.sum(tl.where(cc == k, S, 0.0), 1), 0.0)
        x1 = tl.where(r > k + 1, tl.sum(tl.where(cc == k + 1, S, 0.0), 1), 0.0)
        d21 = tl.sum(tl.sum(tl.where((rr == k + 1) & (cc == k), S, 0.0), 1), 0)
        d21 = tl.where(d21 == 0.0, 1.0, d21)
        e11 = tl.sum(tl.sum(tl.where((rr == k + 1) & (cc == k + 1), S, 0.0), 1), 0) / d21
        e22 = dkk / d21
        tt = 1.0 / (e11 * e22 - 1.0)
        f21 = tt / d21
        wk = f21 * (e11 * x0 - x1)
        wk1 = f21 * (e22 * x1 - x0)
        S2 = tl.where((rr > k + 1) & (cc > k + 1), S - x0[:, None] * wk[None, :] - x1[:, None] * wk1[None, :], S)
        S2 = tl.where((cc == k) & (rr > k + 1), wk[:, None], S2)
        S2 = tl.where((cc == k + 1) & (rr > k + 1), wk1[:, None], S2)
        S = tl.where(kstep == 1, S1, S2)
        pv = tl.where(kstep == 1, kp + 1, -(kp + 1))
        tl.store(piv_ptr + bi * n + k + r, pv + r * 0, mask=r < kstep)
        k += kstep
    tl.store(ld_ptr + bi * n * n + rr * n + cc, tl.where(rr >= cc, S, 0.0), mask=(rr < n) & (cc < n))
    tl.store(info_ptr + bi + r * 0, (info + r * 0).to(tl.int32), mask=r == 0)


@triton.jit
def __KNAME___ldl_solve(ld_ptr, piv_ptr, b_ptr, x_ptr, n, m, ld_sb, ld_sr, ld_sc, piv_sb, piv_s, b_sb, b_sr, b_sc,
                        NP: tl.constexpr, MP: tl.constexpr):
    """X = A^-1 B for A = P L D L^T P^T from ldl_factor (LD [n, n], pivots [n]); B, X [n, m]."""
    bi = tl.program_id(0).to(tl.int64)
    r = tl.arange(0, NP)
    rr = r[:, None]
    cc = r[None, :]
    q = tl.arange(0, MP)[None, :]
    F = tl.load(ld_ptr + bi * ld_sb + rr * ld_sr + cc * ld_sc, mask=(rr < n) & (cc <= rr), other=0).to(tl.float32)
    B = tl.load(b_ptr + bi * b_sb + rr * b_sr + q * b_sc, mask=(rr < n) & (q < m), other=0).to(tl.float32)
    k = tl.sum(tl.where(r == 0, 0, 0), 0)
    while k < n:  # L D Y = P B
        p = tl.load(piv_ptr + bi * piv_sb + k * piv_s).to(tl.int32)
        two = p < 0
        kk = tl.where(two, k + 1, k)
        kp = tl.where(two, -p, p) - 1
        ra = tl.sum(tl.where(rr == kk, B, 0.0), 0)
        rb = tl.sum(tl.where(rr == kp, B, 0.0), 0)
        B = tl.where(rr == kk, rb[None, :], tl.where(rr == kp, ra[None, :], B))
        c0 = tl.sum(tl.where(cc == k, F, 0.0), 1)
        c1 = tl.sum(tl.where(cc == k + 1, F, 0.0), 1)
        b0 = tl.sum(tl.where(rr == k, B, 0.0), 0)
        b1 = tl.sum(tl.where(rr == k + 1, B, 0.0), 0)
        dk = tl.sum(tl.where(r == k, c0, 0.0), 0)
        # 1 x 1: eliminate below, then divide by d
        B1 = tl.where(rr > k, B - c0[:, None] * b0[None, :], B)
        B1 = tl.where(rr == k, (b0 * (1.0 / tl.where(two, 1.0, dk)))[None, :], B1)
        # 2 x 2: eliminate below the block, then solve the block as ssytrs does
        B2 = tl.where(rr > k + 1, B - c0[:, None] * b0[None, :] - c1[:, None] * b1[None, :], B)
        akm1k = tl.sum(tl.where(r == k + 1, c0, 0.0), 0)
        akm1k = tl.where(two, akm1k, 1.0)
        akm1 = dk / akm1k
        ak = tl.sum(tl.where(r == k + 1, c1, 0.0), 0) / akm1k
        den = akm1 * ak - 1.0
        bkm1 = b0 / akm1k
        bk = b1 / akm1k
        B2 = tl.where(rr == k, ((ak * bkm1 - bk) / den)[None, :], B2)
        B2 = tl.where(rr == k + 1, ((akm1 * bk - bkm1) / den)[None, :], B2)
        B = tl.where(two, B2, B1)
        k += tl.where(two, 2, 1)
    k = n - 1
    while k >= 0:  # L^T X = Y, pivots undone in reverse
        p = tl.load(piv_ptr + bi * piv_sb + k * piv_s).to(tl.int32)
        two = p < 0
        c0 = tl.sum(tl.where(cc == k, F, 0.0), 1)
        c1 = tl.sum(tl.where(cc == k - 1, F, 0.0), 1)
        s0 = tl.sum(tl.where(rr > k, c0[:, None] * B, 0.0), 0)
        s1 = tl.sum(tl.where(rr > k, c1[:, None] * B, 0.0), 0)
        B = tl.where(rr == k, B - s0[None, :], B)
        B = tl.where((rr == k - 1) & two, B - s1[None, :], B)
        kk = k
        kp = tl.where(two, -p, p) - 1
        ra = tl.sum(tl.where(rr == kk, B, 0.0), 0)
        rb = tl.sum(tl.where(rr == kp, B, 0.0), 0)
        B = tl.where(rr == kk, rb[None, :], tl.where(rr == kp, ra[None, :], B))
        k -= tl.where(two, 2, 1)
    tl.store(x_ptr + bi * n * m + rr * m + q, B, mask=(rr < n) & (q < m))
'''

_SIZE = [f"if _n > {MAX_N}:",
         f"    raise ValueError(f'{{_n}} x {{_n}} matrices: more than the {MAX_N} a program holds in registers')"]


def _ldl(node: fx.Node, names: dict[fx.Node, str], p: str) -> list[str]:
    a, v = names[node.args[0]], names[node]
    return [f"_A = {a}", "_n = _A.shape[-1]", *_SIZE, "_bt = list(_A.shape[:-2])",
            "_A3 = _A.reshape([_numel(_bt), _n, _n])", "_Bn = _A3.shape[0]",
            "_LD = torch.empty([*_bt, _n, _n], dtype=torch.float32, device=dev)",
            "_piv = torch.empty([*_bt, _n], dtype=torch.int32, device=dev)",
            "_info = torch.zeros(_bt, dtype=torch.int32, device=dev)",
            "if _Bn and _n: __KNAME___ldl[(_Bn,)](_A3, _LD, _piv, _info, _n, *_A3.stride(), "
            f"NP=triton.next_power_of_2(_n), ALPHA={ALPHA!r}, num_warps=NUM_WARPS)",
            f"{v}_0 = _LD", f"{v}_1 = _piv", f"{v}_2 = _info"]


def _ldl_solve(node: fx.Node, names: dict[fx.Node, str], p: str) -> list[str]:
    ld, piv, b = (names[x] for x in node.args[:3])
    return [f"_F = {ld}", f"_B = {b}", "_n = _F.shape[-1]", *_SIZE, "_m = _B.shape[-1]",
            "_bt = _bshape(_F.shape[:-2], _B.shape[:-2])",
            "_F3 = _F.expand([*_bt, _n, _n]).reshape([_numel(_bt), _n, _n])",
            f"_P3 = {piv}.expand([*_bt, _n]).reshape([_numel(_bt), _n])",
            "_B3 = _B.expand([*_bt, _n, _m]).reshape([_numel(_bt), _n, _m])",
            f"{names[node]} = torch.empty([*_bt, _n, _m], dtype=torch.float32, device=dev)",
            "if _B3.shape[0] and _n and _m: __KNAME___ldl_solve[(_B3.shape[0],)](_F3, _P3, _B3, " + names[node]
            + ", _n, _m, *_F3.stride(), *_P3.stride(), *_B3.stride(), NP=triton.next_power_of_2(_n), "
            "MP=triton.next_power_of_2(_m), num_warps=NUM_WARPS)"]


_MAKERS = {"linalg_ldl_factor_ex": _ldl, "linalg_ldl_solve": _ldl_solve}


def ldl_kernel(name: str, node: fx.Node, names: dict[fx.Node, str], expr) -> tuple[str, list[str], set[str]]:  # noqa: ANN001
    dts = {dtype(a) for a in node.args if isinstance(a, fx.Node) and dtype(a) not in (torch.int32, torch.int64)}
    if dts != {torch.float32}:
        raise Unsupported(f"unsupported: {op_name(node)} on {sorted(map(str, dts))} (fp32 only)")
    return SRC, _MAKERS[packet(node)](node, names, packet(node)), set()


register("linalg_ldl_factor_ex", Primitive("ldl", TUNABLES, ldl_kernel, tuple_out=3))
register("linalg_ldl_solve", Primitive("ldl", TUNABLES, ldl_kernel))
