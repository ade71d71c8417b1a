"""Batched small dense linear algebra, one program per matrix, the whole matrix in registers (n <= MAX_N):
LU with partial pivoting (det, slogdet, inv, solve), Cholesky, triangular solves.

Each program loads its matrix into a [NP, NP] tile (NP = next_power_of_2(n); padding is the identity, so a
pivot search never leaves the n x n block) and runs the unblocked algorithm with a runtime loop over k: a row
or column of the tile is a masked sum over one axis, a rank-1 update is a broadcast product. fp32 throughout
(LAPACK's sgetrf/spotrf/strsm work in fp32 too); OpInfo's linalg ops take fp32 and fp64 only, and 64-bit
floats are not lowered here. A transposed operand (solve's left=False, triangular_solve's transpose, Cholesky's
upper triangle) is the same kernel with the row and column strides swapped.
- `_gauss`: LU of A with partial pivoting (the first largest |a| in the column, as LAPACK's isamax), the row
  operations applied to B as well (the identity for inv), then back substitution through U. Writes LU,
  1-based int32 pivots, det (the running product of pivots, negated per swap), sign and log|det|, info (the
  first zero pivot, 1-based) and X.
- `_chol`: lower Cholesky of the lower triangle (the upper one is never read), info at the first pivot that is
  not positive, as LAPACK's spotrf; the upper factor is the transpose, stored through swapped strides.
- `_trsm`: forward or back substitution by columns of the triangle (the other triangle is never read), unit
  diagonal or not.
"""
from __future__ import annotations

import torch
import torch.fx as fx

from workbench.lowering.epilogue import Unsupported
from workbench.lowering.graph import dtype, op_name, packet
from workbench.lowering.primitives import Primitive, register

TUNABLES = ("NUM_WARPS",)
MAX_N = 64  # a [64, 64] fp32 tile plus the right-hand side: 64 registers a thread at 4 warps

_HEAD = '''    bi = tl.program_id(0).to(tl.int64)
    r = tl.arange(0, NP)
    rr = r[:, None]
    cc = r[None, :]
    A = tl.load(a_ptr + bi * a_sb + rr * a_sr + cc * a_sc, mask=(rr < n) & (cc < n), other=0).to(tl.float32)
    A = tl.where((rr == cc) & (rr >= n), 1.0, A)
'''

SRC = '''@triton.jit
def __KNAME___gauss(a_ptr, b_ptr, x_ptr, lu_ptr, piv_ptr, det_ptr, sgn_ptr, lad_ptr, info_ptr, n, m, mr, kmin,
                    a_sb, a_sr, a_sc, b_sb, b_sr, b_sc, x_sb, x_sr, x_sc,
                    NP: tl.constexpr, MP: tl.constexpr, RHS: tl.constexpr, IDENT: tl.constexpr):
    """LU with partial pivoting of A [mr, n] (one matrix per program; square unless only LU is wanted); the same
    row operations on B [n, m] (RHS) or the identity (IDENT), then X = U^-1 (L^-1 P B) by back substitution."""
    bi = tl.program_id(0).to(tl.int64)
    r = tl.arange(0, NP)
    rr = r[:, None]
    cc = r[None, :]
    A = tl.load(a_ptr + bi * a_sb + rr * a_sr + cc * a_sc, mask=(rr < mr) & (cc < n), other=0).to(tl.float32)
    A = tl.where((rr == cc) & ((rr >= mr) | (cc >= n)), 1.0, A)
    q = tl.arange(0, MP)[None, :]
    if RHS:
        B = tl.load(b_ptr + bi * b_sb + rr * b_sr + q * b_sc, mask=(rr < n) & (q < m), other=0).to(tl.float32)
    elif IDENT:
        B = tl.where(rr == q, 1.0, 0.0)
    else:
        B = tl.zeros([NP, MP], tl.float32)
    det = tl.sum(tl.where(r == 0, 1.0, 0.0), 0)
    lad = tl.sum(tl.where(r == 0, 0.0, 0.0), 0)
    info = tl.sum(tl.where(r == 0, 0, 0), 0)
    for k in range(0, kmin):
        col = tl.sum(tl.where(cc == k, A, 0.0), axis=1)
        cand = tl.where((r >= k) & (r < mr), tl.abs(col), -1.0)
        p = tl.min(tl.where(cand == tl.max(cand, 0), r, NP), 0)
        rowk = tl.sum(tl.where(rr == k, A, 0.0), axis=0)
        rowp = tl.sum(tl.where(rr == p, A, 0.0), axis=0)
        A = tl.where(rr == k, rowp[None, :], tl.where(rr == p, rowk[None, :], A))
        bk = tl.sum(tl.where(rr == k, B, 0.0), axis=0)
        bp = tl.sum(tl.where(rr == p, B, 0.0), axis=0)
        B = tl.where(rr == k, bp[None, :], tl.where(rr == p, bk[None, :], B))
        tl.store(piv_ptr + bi * kmin + k + r * 0, (p + 1).to(tl.int32) + r * 0, mask=r == 0)
        pv = tl.sum(tl.where(r == k, rowp, 0.0), 0)
        det = tl.where(p != k, -det, det) * pv
        lad = lad + tl.log(tl.abs(pv))
        info = tl.where((pv == 0.0) & (info == 0), k + 1, info)
        col = tl.sum(tl.where(cc == k, A, 0.0), axis=1)
        l = tl.where(r > k, tl.where(pv != 0.0, col / pv, col), 0.0)
        A = tl.where((rr > k) & (cc > k), A - l[:, None] * rowp[None, :], A)
        A = tl.where((rr > k) & (cc == k), l[:, None], A)
        B = tl.where(rr > k, B - l[:, None] * bp[None, :], B)
    if RHS or IDENT:
        for kk in range(0, n):
            k = n - 1 - kk
            rowk = tl.sum(tl.where(rr == k, A, 0.0), axis=0)
            bk = tl.sum(tl.where(rr == k, B, 0.0), axis=0) / tl.sum(tl.where(r == k, rowk, 0.0), 0)
            B = tl.where(rr == k, bk[None, :], B)
            B = tl.where(rr < k, B - tl.sum(tl.where(cc == k, A, 0.0), axis=1)[:, None] * bk[None, :], B)
        tl.store(x_ptr + bi * x_sb + rr * x_sr + q * x_sc, B, mask=(rr < n) & (q < m))
    tl.store(lu_ptr + bi * mr * n + rr * n + cc, A, mask=(rr < mr) & (cc < n))
    one = r == 0
    tl.store(det_ptr + bi + r * 0, det + r * 0.0, mask=one)
    tl.store(sgn_ptr + bi + r * 0, tl.where(det > 0, 1.0, tl.where(det < 0, -1.0, 0.0)) + r * 0.0, mask=one)
    tl.store(lad_ptr + bi + r * 0, lad + r * 0.0, mask=one)
    tl.store(info_ptr + bi + r * 0, (info + r * 0).to(tl.int32), mask=one)


@triton.jit
def __KNAME___chol(a_ptr, l_ptr, info_ptr, n, a_sb, a_sr, a_sc, l_sr, l_sc, NP: tl.constexpr):
    """Lower Cholesky factor of A [n, n] from its lower triangle; info: the first non-positive pivot."""
__HEAD__    L = tl.zeros([NP, NP], tl.float32)
    info = tl.sum(tl.where(r == 0, 0, 0), 0)
    for k in range(0, n):
        col = tl.sum(tl.where(cc == k, A, 0.0), axis=1)
        akk = tl.sum(tl.where(r == k, col, 0.0), 0)
        info = tl.where((~(akk > 0.0)) & (info == 0), k + 1, info)
        l = tl.where(r >= k, col / tl.sqrt(akk), 0.0)
        L = tl.where(cc == k, l[:, None], L)
        A = tl.where((rr > k) & (cc > k), A - l[:, None] * l[None, :], A)
    tl.store(l_ptr + bi * n * n + rr * l_sr + cc * l_sc, L, mask=(rr < n) & (cc < n))
    tl.store(info_ptr + bi + r * 0, (info + r * 0).to(tl.int32), mask=r == 0)


@triton.jit
def __KNAME___trsm(a_ptr, b_ptr, x_ptr, n, m, a_sb, a_sr, a_sc, b_sb, b_sr, b_sc, x_sb, x_sr, x_sc,
                   NP: tl.constexpr, MP: tl.constexpr, UPPER: tl.constexpr, UNIT: tl.constexpr,
                   IDENT: tl.constexpr):
    """X = T^-1 B for the triangle T of A (upper or lower, unit diagonal or not), by columns of T; B is the
    identity when IDENT."""
__HEAD__    q = tl.arange(0, MP)[None, :]
    if IDENT:
        B = tl.where(rr == q, 1.0, 0.0)
    else:
        B = tl.load(b_ptr + bi * b_sb + rr * b_sr + q * b_sc, mask=(rr < n) & (q < m), other=0).to(tl.float32)
    for kk in range(0, n):
        if UPPER:
            k = n - 1 - kk
        else:
            k = kk
        col = tl.sum(tl.where(cc == k, A, 0.0), axis=1)
        bk = tl.sum(tl.where(rr == k, B, 0.0), axis=0)
        if not UNIT:
            bk = bk / tl.sum(tl.where(r == k, col, 0.0), 0)
        B = tl.where(rr == k, bk[None, :], B)
        rest = (rr < k) if UPPER else (rr > k)
        B = tl.where(rest, B - col[:, None] * bk[None, :], B)
    tl.store(x_ptr + bi * x_sb + rr * x_sr + q * x_sc, B, mask=(rr < n) & (q < m))


@triton.jit
def __KNAME___unpack(lu_ptr, piv_ptr, p_ptr, l_ptr, u_ptr, mr, n, k, lu_sb, lu_sr, lu_sc, piv_sb,
                     NP: tl.constexpr, DATA: tl.constexpr, PIVOTS: tl.constexpr):
    """P [mr, mr], unit-lower L [mr, k] and U [k, n] of a packed LU [mr, n] and its 1-based pivots (A = P L U)."""
    bi = tl.program_id(0).to(tl.int64)
    r = tl.arange(0, NP)
    rr = r[:, None]
    cc = r[None, :]
    if DATA:
        A = tl.load(lu_ptr + bi * lu_sb + rr * lu_sr + cc * lu_sc, mask=(rr < mr) & (cc < n), other=0).to(tl.float32)
        tl.store(l_ptr + bi * mr * k + rr * k + cc, tl.where(rr > cc, A, tl.where(rr == cc, 1.0, 0.0)),
                 mask=(rr < mr) & (cc < k))
        tl.store(u_ptr + bi * k * n + rr * n + cc, tl.where(rr <= cc, A, 0.0), mask=(rr < k) & (cc < n))
    if PIVOTS:
        perm = r
        for i in range(0, k):
            pv = tl.load(piv_ptr + bi * piv_sb + i).to(tl.int32) - 1
            a = tl.sum(tl.where(r == i, perm, 0), 0)
            b = tl.sum(tl.where(r == pv, perm, 0), 0)
            perm = tl.where(r == i, b, tl.where(r == pv, a, perm))
        # P^T A = L U: row j of L U is row perm[j] of A, so P[perm[j], j] = 1
        tl.store(p_ptr + bi * mr * mr + rr * mr + cc, tl.where(perm[None, :] == rr, 1.0, 0.0),
                 mask=(rr < mr) & (cc < mr))


@triton.jit
def __KNAME___perm(b_ptr, piv_ptr, x_ptr, n, m, k, b_sb, b_sr, b_sc, piv_sb,
                   NP: tl.constexpr, MP: tl.constexpr, REV: tl.constexpr):
    """The row swaps of 1-based pivots applied to B [n, m] in order (P^T B), or in reverse (P B)."""
    bi = tl.program_id(0).to(tl.int64)
    r = tl.arange(0, NP)
    rr = r[:, None]
    q = tl.arange(0, MP)[None, :]
    B = tl.load(b_ptr + bi * b_sb + rr * b_sr + q * b_sc, mask=(rr < n) & (q < m), other=0).to(tl.float32)
    for ii in range(0, k):
        if REV:
            i = k - 1 - ii
        else:
            i = ii
        pv = tl.load(piv_ptr + bi * piv_sb + i).to(tl.int32) - 1
        bi_row = tl.sum(tl.where(rr == i, B, 0.0), axis=0)
        bp = tl.sum(tl.where(rr == pv, B, 0.0), axis=0)
        B = tl.where(rr == i, bp[None, :], tl.where(rr == pv, bi_row[None, :], B))
    tl.store(x_ptr + bi * n * m + rr * m + q, B, mask=(rr < n) & (q < m))
'''.replace("__HEAD__", _HEAD)

# runtime helpers of the launches: a batch of square matrices as [Bt, n, n] (a view where strides allow)
_BATCH = ["_np = triton.next_power_of_2(max(_n, 1))",
          f"if _n > {MAX_N}:",
          f"    raise ValueError(f'{{_n}} x {{_n}} matrices: more than the {MAX_N} a program holds in registers')"]


def _arg(node: fx.Node, i: int, name: str, default):  # noqa: ANN001, ANN202 - small local accessor
    return node.args[i] if len(node.args) > i else node.kwargs.get(name, default)


def _gauss(node: fx.Node, names: dict[fx.Node, str], p: str) -> list[str]:
    a = names[node.args[0]]
    v = names[node]
    L = [f"_A = {a}", "_n = _A.shape[-1]", "_mr = _A.shape[-2]", "_np = triton.next_power_of_2(max(_n, _mr, 1))",
         f"if max(_n, _mr) > {MAX_N}:",
         f"    raise ValueError(f'{{_mr}} x {{_n}} matrices: more than the {MAX_N} a program holds in registers')"]
    ident = p == "linalg_inv_ex"
    if p == "_linalg_solve_ex":
        b = names[node.args[1]]
        left = bool(_arg(node, 2, "left", True))
        L += [f"_B = {b}",
              # PyTorch's vector case: B is [n] or A's batch of vectors
              "_vec = _B.dim() == 1 or (_A.dim() - 1 == _B.dim() and list(_B.shape) == list(_A.shape[:-1]))",
              "_B = _B.unsqueeze(-1) if _vec else _B"]
        if not left:  # X A = B  <=>  A^T X^T = B^T
            L += ["_A = _A.mT", "_B = _B.mT"]
        L += ["_bt = _bshape(_A.shape[:-2], _B.shape[:-2])",
              "_A3 = _A.expand([*_bt, _n, _n]).reshape([_numel(_bt), _n, _n])",
              "_m = _B.shape[-1]", "_B3 = _B.expand([*_bt, _n, _m]).reshape([_numel(_bt), _n, _m])"]
        if left:
            L += ["_X = torch.empty([*_bt, _n, _m], dtype=torch.float32, device=dev)",
                  "_X3 = _X.view([_numel(_bt), _n, _m])"]
        else:  # the kernel writes X^T through swapped strides
            L += ["_X = torch.empty([*_bt, _m, _n], dtype=torch.float32, device=dev)",
                  "_X3 = _X.view([_numel(_bt), _m, _n]).mT"]
        L += ["_mp = triton.next_power_of_2(max(_m, 1))", "_rhs = True"]
    else:  # inv: the identity as B; the others: LU only
        L += ["_bt = list(_A.shape[:-2])", "_A3 = _A.reshape([_numel(_bt), _mr, _n])",
              "_m = _n" if ident else "_m = 0", "_mp = _np" if ident else "_mp = 1", "_B3 = _A3", "_rhs = False",
              "_X = torch.empty([*_bt, _n, _m], dtype=torch.float32, device=dev)",
              "_X3 = _X.view([_numel(_bt), _n, _m])"]
    L += ["_Bn = _A3.shape[0]", "_k = min(_mr, _n)",
          "_LU = torch.empty([*_bt, _mr, _n], dtype=torch.float32, device=dev)",
          "_piv = torch.empty([*_bt, _k], dtype=torch.int32, device=dev)",
          "_det = torch.empty(_bt, dtype=torch.float32, device=dev)",
          "_sgn = torch.empty(_bt, dtype=torch.float32, device=dev)",
          "_lad = torch.empty(_bt, dtype=torch.float32, device=dev)",
          "_info = torch.empty(_bt, dtype=torch.int32, device=dev)",
          "if _Bn: __KNAME___gauss[(_Bn,)](_A3, _B3, _X3, _LU, _piv, _det, _sgn, _lad, _info, _n, _m, _mr, _k, "
          f"*_A3.stride(), *_B3.stride(), *_X3.stride(), NP=_np, MP=_mp, RHS=_rhs, IDENT={ident}, "
          "num_warps=NUM_WARPS)"]
    if p == "linalg_lu":
        return L + _unpack_lines("_LU", "_piv", True, True, v)
    outs = {"linalg_inv_ex": ["_X", "_info"], "_linalg_det": ["_det", "_LU", "_piv"],
            "_linalg_slogdet": ["_sgn", "_lad", "_LU", "_piv"], "linalg_lu_factor_ex": ["_LU", "_piv", "_info"],
            "_linalg_solve_ex": ["(_X.squeeze(-1) if _vec else _X)", "_LU", "_piv", "_info"]}[p]
    return L + [f"{v}_{i} = {o}" for i, o in enumerate(outs)]


def _unpack_lines(lu: str, piv: str, data: bool, pivots: bool, v: str) -> list[str]:
    """(P, L, U) of a packed LU and its pivots; a part not asked for is an empty tensor, as lu_unpack's."""
    return [f"_LU = {lu}", "_n = _LU.shape[-1]", "_mr = _LU.shape[-2]", "_k = min(_mr, _n)",
            "_np = triton.next_power_of_2(max(_n, _mr, 1))", "_bt = list(_LU.shape[:-2])",
            "_L3 = _LU.reshape([_numel(_bt), _mr, _n])", f"_pv = {piv}.reshape([_numel(_bt), _k])",
            f"_P = torch.empty([*_bt, _mr, _mr] if {pivots} else [0], dtype=torch.float32, device=dev)",
            f"_Lo = torch.empty([*_bt, _mr, _k] if {data} else [0], dtype=torch.float32, device=dev)",
            f"_Up = torch.empty([*_bt, _k, _n] if {data} else [0], dtype=torch.float32, device=dev)",
            "if _L3.shape[0]: __KNAME___unpack[(_L3.shape[0],)](_L3, _pv, _P, _Lo, _Up, _mr, _n, _k, *_L3.stride(), "
            f"_pv.stride(0), NP=_np, DATA={data}, PIVOTS={pivots}, num_warps=NUM_WARPS)",
            f"{v}_0 = _P", f"{v}_1 = _Lo", f"{v}_2 = _Up"]


def _unpack(node: fx.Node, names: dict[fx.Node, str], p: str) -> list[str]:
    data, pivots = bool(_arg(node, 2, "unpack_data", True)), bool(_arg(node, 3, "unpack_pivots", True))
    return _unpack_lines(names[node.args[0]], names[node.args[1]], data, pivots, names[node])


def _lu_solve(node: fx.Node, names: dict[fx.Node, str], p: str) -> list[str]:
    """linalg_lu_solve(LU, pivots, B, left=True, adjoint=False), A = P L U: A X = B is X = U^-1 L^-1 P^T B, and
    A^T X = B is X = P L^-T U^-T B. X A = B is A^T X^T = B^T (and X A^T = B is A X^T = B^T): the left solve of B^T
    with `adjoint` flipped, transposed back."""
    lu, piv, b = (names[a] for a in node.args[:3])
    left, adj = bool(node.kwargs.get("left", True)), bool(node.kwargs.get("adjoint", False))
    adj = adj != (not left)
    bt = b if left else f"{b}.mT"
    perm = ["_n = {lu}.shape[-1]".format(lu=lu), "_np = triton.next_power_of_2(max(_n, 1))",
            "_bt = _bshape({lu}.shape[:-2], {{B}}.shape[:-2])".format(lu=lu), "_m = {B}.shape[-1]",
            "_B3 = {B}.expand([*_bt, _n, _m]).reshape([_numel(_bt), _n, _m])",
            f"_pv = {piv}.expand([*_bt, _n]).reshape([_numel(_bt), _n])",
            "{out} = torch.empty([*_bt, _n, _m], dtype=torch.float32, device=dev)",
            "if _B3.shape[0] and _m: __KNAME___perm[(_B3.shape[0],)](_B3, _pv, {out}, _n, _m, _n, *_B3.stride(), "
            "_pv.stride(0), NP=_np, MP=triton.next_power_of_2(max(_m, 1)), REV={rev}, num_warps=NUM_WARPS)"]
    if not adj:
        L = [ln.format(B=bt, out="_Y0", rev=False) for ln in perm]
        L += _trsm_lines(lu, "_Y0", False, True, True, "_Y1") + _trsm_lines(lu, "_Y1", True, False, True, "_Y2")
    else:
        L = _trsm_lines(f"{lu}.mT", bt, False, False, True, "_Y1") + \
            _trsm_lines(f"{lu}.mT", "_Y1", True, True, True, "_Y2")
        L += [ln.format(B="_Y2", out="_Y3", rev=True) for ln in perm]
        L.append("_Y2 = _Y3")
    return L + [f"{names[node]} = _Y2" if left else f"{names[node]} = _Y2.mT"]


def _chol(node: fx.Node, names: dict[fx.Node, str], p: str) -> list[str]:
    a, v = names[node.args[0]], names[node]
    upper = bool(_arg(node, 1, "upper", False))
    # the upper factor: the lower factor of A^T (A's upper triangle), stored transposed
    L = [f"_A = {a}.mT" if upper else f"_A = {a}", "_n = _A.shape[-1]"] + _BATCH + [
        "_bt = list(_A.shape[:-2])", "_A3 = _A.reshape([_numel(_bt), _n, _n])", "_Bn = _A3.shape[0]",
        "_L = torch.empty([*_bt, _n, _n], dtype=torch.float32, device=dev)",
        "_info = torch.empty(_bt, dtype=torch.int32, device=dev)",
        f"_ls = (1, _n) if {upper} else (_n, 1)",
        "if _Bn: __KNAME___chol[(_Bn,)](_A3, _L, _info, _n, *_A3.stride(), *_ls, NP=_np, num_warps=NUM_WARPS)"]
    if p == "cholesky":
        return L + [f"{v} = _L"]
    return L + [f"{v}_0 = _L", f"{v}_1 = _info"]


def _trsm_lines(a: str, b: str | None, upper: bool, unit: bool, left: bool, out: str) -> list[str]:
    """Launch lines of X = T^-1 B (left) or B T^-1 (right) for the triangle of `a`; B the identity when b is None.
    X A = B <=> A^T X^T = B^T: a right-hand solve is a left one of the transposes (the triangle flips)."""
    L = [f"_A = {a}" if left else f"_A = {a}.mT", "_n = _A.shape[-1]"]
    if b is None:
        L += ["_B = _A", "_bt = list(_A.shape[:-2])", "_m = _n"]
    else:
        L += [f"_B = {b}" if left else f"_B = {b}.mT", "_bt = _bshape(_A.shape[:-2], _B.shape[:-2])",
              "_m = _B.shape[-1]"]
    L += _BATCH + ["_A3 = _A.expand([*_bt, _n, _n]).reshape([_numel(_bt), _n, _n])",
                   "_B3 = _A3" if b is None else "_B3 = _B.expand([*_bt, _n, _m]).reshape([_numel(_bt), _n, _m])",
                   f"{out} = torch.empty([*_bt, _n, _m] if {left} else [*_bt, _m, _n], dtype=torch.float32, "
                   "device=dev)",
                   f"_X3 = {out}.view([_numel(_bt), _n, _m]) if {left} else {out}.view([_numel(_bt), _m, _n]).mT",
                   "_mp = triton.next_power_of_2(max(_m, 1))", "_Bn = _A3.shape[0]",
                   "if _Bn and _m: __KNAME___trsm[(_Bn,)](_A3, _B3, _X3, _n, _m, *_A3.stride(), *_B3.stride(), "
                   f"*_X3.stride(), NP=_np, MP=_mp, UPPER={upper != (not left)}, UNIT={unit}, IDENT={b is None}, "
                   "num_warps=NUM_WARPS)"]
    return L


def _trsm(node: fx.Node, names: dict[fx.Node, str], p: str) -> list[str]:
    v = names[node]
    if p == "triangular_solve":  # triangular_solve(B, A, upper=True, transpose=False, unitriangular=False)
        b, a = names[node.args[0]], names[node.args[1]]
        upper, trans = bool(_arg(node, 2, "upper", True)), bool(_arg(node, 3, "transpose", False))
        unit = bool(_arg(node, 4, "unitriangular", False))
        # op(A) X = B with op(A) = A^T: the triangle of A^T
        L = _trsm_lines(f"{a}.mT" if trans else a, b, upper != trans, unit, True, "_X")
        return L + [f"{v}_0 = _X", f"{v}_1 = {a}.clone()"]  # (X, a copy of A)
    if p == "linalg_solve_triangular":  # linalg_solve_triangular(A, B, *, upper, left=True, unitriangular=False)
        a, b = names[node.args[0]], names[node.args[1]]
        upper = bool(node.kwargs.get("upper", _arg(node, 2, "upper", False)))
        left, unit = bool(node.kwargs.get("left", True)), bool(node.kwargs.get("unitriangular", False))
        return _trsm_lines(a, b, upper, unit, left, v)
    # cholesky_solve(B, L, upper=False): (L L^T)^-1 B as two triangular solves with the lower factor Lo;
    # cholesky_inverse(L, upper=False): the same with B = I
    if p == "cholesky_solve":
        b, f, upper = names[node.args[0]], names[node.args[1]], bool(_arg(node, 2, "upper", False))
    else:
        b, f, upper = None, names[node.args[0]], bool(_arg(node, 1, "upper", False))
    lo = f"{f}.mT" if upper else f
    return (_trsm_lines(lo, b, False, False, True, "_Y") + _trsm_lines(f"{lo}.mT", "_Y", True, False, True, v))


_MAKERS = {"linalg_inv_ex": _gauss, "_linalg_det": _gauss, "_linalg_slogdet": _gauss, "_linalg_solve_ex": _gauss,
           "linalg_cholesky_ex": _chol, "cholesky": _chol, "linalg_solve_triangular": _trsm,
           "triangular_solve": _trsm, "cholesky_solve": _trsm, "cholesky_inverse": _trsm,
           "linalg_lu_factor_ex": _gauss, "linalg_lu": _gauss, "lu_unpack": _unpack, "linalg_lu_solve": _lu_solve}


def linalg_kernel(name: str, node: fx.Node, names: dict[fx.Node, str], expr) -> tuple[str, list[str], set[str]]:  # noqa: ANN001
    p = packet(node)
    dts = {dtype(a) for a in node.args if isinstance(a, fx.Node) and dtype(a) not in (torch.int32, torch.int64)}
    if dts != {torch.float32}:
        raise Unsupported(f"unsupported: {op_name(node)} on {sorted(map(str, dts))} (fp32 only; pivots int32 or int64)")
    return SRC, _MAKERS[p](node, names, p), set()


_OUTS = {"linalg_inv_ex": 2, "_linalg_det": 3, "_linalg_slogdet": 4, "_linalg_solve_ex": 4,
         "linalg_cholesky_ex": 2, "cholesky": False, "linalg_solve_triangular": False, "triangular_solve": True,
         "cholesky_solve": False, "cholesky_inverse": False, "linalg_lu_factor_ex": 3, "linalg_lu": 3,
         "lu_unpack": 3, "linalg_lu_solve": False}
for _op, _n_out in _OUTS.items():
    register(_op, Primitive("linalg", TUNABLES, linalg_kernel, tuple_out=_n_out))
