"""Symmetric eigensolver and SVD by parallel Jacobi rotations, one program per matrix, the matrix in registers
(n <= MAX_N): `_linalg_eigh` (eigh, eigvalsh), `_linalg_svd` (svd, svdvals, and through PyTorch's decompositions
matrix_rank, matrix_norm / linalg.norm / norm with ord 2, -2, 'nuc', cond) and `linalg_pinv` (SVD or eigh).

Jacobi (Golub and Van Loan, 4th ed., 8.5): a rotation J(p, q) chosen from the 2 x 2 problem [[a_pp, a_pq], [a_pq,
a_qq]] zeroes a_pq of A <- J^T A J (two-sided, symmetric A) or makes columns p and q of A <- A J orthogonal
(one-sided, Hestenes: the same rotation for the Gram entries ||a_p||^2, ||a_q||^2, a_p . a_q). Brent and Luk's
parallel ordering: the round-robin ("circle") schedule pairs the NP indices into NP / 2 disjoint pairs per step,
NP - 1 steps a sweep cover every pair once, so one step is one rotation matrix J of NP / 2 disjoint rotations,
applied with tl.dot (input_precision="ieee": a TF32 product would cost the fp32 accuracy Jacobi is chosen for).
Padded indices (>= n) have zero off-diagonal entries, so they are never rotated. Sweeps run until the off-diagonal
mass is at fp32's rounding level (or MAX_SWEEPS); then eigenvalues are sorted ascending (LAPACK's ssyevd) and
singular values descending (sgesdd), the vectors permuted with them by a permutation-matrix product.

Eigenvectors and singular vectors are unique only up to sign (and within repeated values): these are Jacobi's,
not LAPACK's, so `eigh`'s vectors and `svd`'s U and V do not match torch's element by element, while everything
invariant to that choice (values, A = U S V^T, pinv, ranks, norms) does. fp32 only, as linalg_small.
"""
from __future__ import annotations

import torch
import torch.fx as fx

from workbench.lowering.epilogue import Unsupported
from workbench.lowering.graph import dtype, op_name, packet
from workbench.lowering.primitives import Primitive, register

TUNABLES = ("NUM_WARPS",)
MAX_N = 64
MAX_SWEEPS = 16  # quadratic convergence: 6 to 9 sweeps reach the fp32 floor at n = 64
EPS32 = 2.0 ** -23

# the rotation of each pair from its 2 x 2 problem: d (own diagonal entry / squared column norm), dk_ (the
# partner's), g (the coupling entry); J's column j holds c at (j, j) and -s / +s at (partner, j), as J(p, q) of
# Golub and Van Loan
_ROTATION = '''            isp = r < k
            app = tl.where(isp, d, dk_)
            aqq = tl.where(isp, dk_, d)
            rot = g != 0.0
            tau = (aqq - app) / (2.0 * tl.where(rot, g, 1.0))
            tt = tl.where(tau >= 0, 1.0, -1.0) / (tl.abs(tau) + tl.sqrt(1.0 + tau * tau))
            c = 1.0 / tl.sqrt(1.0 + tt * tt)
            s = tl.where(rot, tt * c, 0.0)
            c = tl.where(rot, c, 1.0)
            J = tl.where(diag, c[None, :], tl.where(rr == k[None, :], tl.where(isp, -s, s)[None, :], 0.0))
'''

# the partner k of each index at step t of the circle schedule (player 0 fixed, the others move by t)
_PARTNER = '''            pos = tl.where(r == 0, 0, (r - 1 + (NP - 1) - t) % (NP - 1) + 1)
            pp = NP - 1 - pos
            k = tl.where(pp == 0, 0, (pp - 1 + t) % (NP - 1) + 1)
            pk = cc == k[:, None]
'''

# rank of each index among the first n under `key` ascending (ties by index), and P[j, rank_j] = 1
_SORT = '''        before = (cc < n) & ((key[None, :] < key[:, None]) | ((key[None, :] == key[:, None]) & (cc < rr)))
        rank = tl.where(r < n, tl.sum(tl.where(before, 1, 0), 1), r)
        P = rank[:, None] == cc
'''

SRC = '''@triton.jit
def __KNAME___eigh(a_ptr, w_ptr, v_ptr, x_ptr, atol_ptr, rtol_ptr, tol_sb, tol_sb2, n, a_sb, a_sr, a_sc,
                   v_sb, v_sr, v_sc, rtol_default, NP: tl.constexpr, VECS: tl.constexpr, PINV: tl.constexpr,
                   HAS_ATOL: tl.constexpr, HAS_RTOL: tl.constexpr, MAX_SWEEPS: tl.constexpr):
    """A [n, n] symmetric, from its lower triangle (the upper one through swapped strides): eigenvalues W
    ascending, eigenvectors V (A = V diag(W) V^T) when VECS, pinv(A) = V diag(1/W, |W| > tol) V^T when PINV."""
    bi = tl.program_id(0).to(tl.int64)
    r = tl.arange(0, NP)
    rr = r[:, None]
    cc = r[None, :]
    base = a_ptr + bi * a_sb
    A = tl.load(base + rr * a_sr + cc * a_sc, mask=(rr < n) & (cc <= rr), other=0).to(tl.float32)
    A += tl.load(base + cc * a_sr + rr * a_sc, mask=(cc < n) & (rr < cc), other=0).to(tl.float32)
    diag = rr == cc
    V = tl.where(diag, 1.0, 0.0)
    fro = tl.sum(tl.sum(A * A, 1), 0)
    off = fro - tl.sum(tl.sum(tl.where(diag, A * A, 0.0), 1), 0)
    sweep = 0
    # stop at the rounding floor: off-diagonal mass below (n eps)^2 of the total
    floor = fro * (n * EPS) * (n * EPS)
    while (sweep < MAX_SWEEPS) & (off > floor):
        for t in range(0, NP - 1):
            d = tl.sum(tl.where(diag, A, 0.0), 1)
__PARTNER__            g = tl.sum(tl.where(pk, A, 0.0), 1)
            dk_ = tl.sum(tl.where(pk, d[None, :], 0.0), 1)
__ROTATION__            A = tl.dot(tl.trans(J), tl.dot(A, J, input_precision="ieee"), input_precision="ieee")
            A = tl.where(pk & rot[:, None], 0.0, A)
            if VECS or PINV:
                V = tl.dot(V, J, input_precision="ieee")
        off = tl.sum(tl.sum(tl.where(diag, 0.0, A * A), 1), 0)
        sweep += 1
    d = tl.sum(tl.where(diag, A, 0.0), 1)
    if PINV:
        mx = tl.max(tl.where(r < n, tl.abs(d), 0.0), 0)
__CUTOFF__        inv = tl.where((tl.abs(d) > cut) & (r < n), 1.0 / tl.where(d != 0.0, d, 1.0), 0.0)
        X = tl.dot(V * inv[None, :], tl.trans(V), input_precision="ieee")
        tl.store(x_ptr + bi * n * n + rr * n + cc, X, mask=(rr < n) & (cc < n))
    else:
        key = d
__SORT__        tl.store(w_ptr + bi * n + r, tl.sum(tl.where(P, d[:, None], 0.0), 0), mask=r < n)
        if VECS:
            V = tl.dot(V, tl.where(P, 1.0, 0.0), input_precision="ieee")
            tl.store(v_ptr + bi * v_sb + rr * v_sr + cc * v_sc, V, mask=(rr < n) & (cc < n))


@triton.jit
def __KNAME___svd(a_ptr, s_ptr, u_ptr, v_ptr, x_ptr, atol_ptr, rtol_ptr, tol_sb, tol_sb2, m, n, a_sb, a_sr, a_sc,
                  u_sb, u_sr, u_sc, v_sb, v_sr, v_sc, x_sr, x_sc, rtol_default,
                  MP: tl.constexpr, NP: tl.constexpr, VECS: tl.constexpr, PINV: tl.constexpr,
                  HAS_ATOL: tl.constexpr, HAS_RTOL: tl.constexpr, MAX_SWEEPS: tl.constexpr):
    """A [m, n], m >= n (a wide matrix comes transposed, through strides): one-sided Jacobi makes the columns of
    A V orthogonal, so A V = U S. S descending; U [m, n] and V [n, n] (stored through the caller's strides) when
    VECS; pinv(A) [n, m] = V diag(1/s^2, s > tol) (A V)^T when PINV."""
    bi = tl.program_id(0).to(tl.int64)
    r = tl.arange(0, NP)
    rr = r[:, None]
    cc = r[None, :]
    i = tl.arange(0, MP)[:, None]
    A = tl.load(a_ptr + bi * a_sb + i * a_sr + cc * a_sc, mask=(i < m) & (cc < n), other=0).to(tl.float32)
    diag = rr == cc
    V = tl.where(diag, 1.0, 0.0)
    off = tl.sum(tl.where(r == 0, 1.0, 0.0), 0)
    sweep = 0
    # stop when every pair's cosine |a_p . a_q| / (|a_p| |a_q|) is below n eps
    while (sweep < MAX_SWEEPS) & (off > n * EPS):
        off = off * 0.0
        for t in range(0, NP - 1):
            d = tl.sum(A * A, 0)
__PARTNER__            Ak = tl.dot(A, tl.where(rr == k[None, :], 1.0, 0.0), input_precision="ieee")
            g = tl.sum(A * Ak, 0)
            dk_ = tl.sum(tl.where(pk, d[None, :], 0.0), 1)
            off = tl.maximum(off, tl.max(tl.abs(g) / tl.sqrt(tl.where(g != 0.0, d * dk_, 1.0)), 0))
__ROTATION__            A = tl.dot(A, J, input_precision="ieee")
            if VECS or PINV:
                V = tl.dot(V, J, input_precision="ieee")
        sweep += 1
    d = tl.sum(A * A, 0)
    sig = tl.sqrt(d)
    if PINV:
        mx = tl.max(tl.where(r < n, sig, 0.0), 0)
__CUTOFF__        inv = tl.where((sig > cut) & (r < n), 1.0 / tl.where(d != 0.0, d, 1.0), 0.0)
        X = tl.dot(V * inv[None, :], tl.trans(A), input_precision="ieee")
        j = tl.arange(0, MP)[None, :]
        tl.store(x_ptr + bi * n * m + rr * x_sr + j * x_sc, X, mask=(rr < n) & (j < m))
    else:
        key = -sig
__SORT__        Pf = tl.where(P, 1.0, 0.0)
        tl.store(s_ptr + bi * n + r, tl.sum(tl.where(P, sig[:, None], 0.0), 0), mask=r < n)
        if VECS:
            U = tl.dot(A / tl.where(sig > 0.0, sig, 1.0)[None, :], Pf, input_precision="ieee")
            tl.store(u_ptr + bi * u_sb + i * u_sr + cc * u_sc, U, mask=(i < m) & (cc < n))
            V = tl.dot(V, Pf, input_precision="ieee")
            tl.store(v_ptr + bi * v_sb + rr * v_sr + cc * v_sc, V, mask=(rr < n) & (cc < n))
'''

# pinv's cutoff, as torch's linalg_pinv: max(atol, rtol * the largest |value|); rtol defaults to eps * max(m, n),
# or to 0 where a positive atol is given
_CUTOFF = '''        at = mx * 0.0
        if HAS_ATOL:
            at = tl.load(atol_ptr + bi * tol_sb).to(tl.float32)
        if HAS_RTOL:
            rt = tl.load(rtol_ptr + bi * tol_sb2).to(tl.float32)
        elif HAS_ATOL:
            rt = tl.where(at > 0.0, 0.0, rtol_default)
        else:
            rt = rtol_default
        cut = tl.maximum(at, rt * mx)
'''

SRC = (SRC.replace("__ROTATION__", _ROTATION)
       .replace("__PARTNER__", _PARTNER).replace("__SORT__", _SORT).replace("__CUTOFF__", _CUTOFF)
       .replace("n * EPS", f"n * {EPS32!r}"))

_SIZE = [f"if max(_m, _n) > {MAX_N}:",
         f"    raise ValueError(f'{{_m}} x {{_n}} matrices: more than the {MAX_N} a program holds in registers')"]


def _tol_lines(node: fx.Node, names: dict[fx.Node, str]) -> tuple[list[str], str]:
    """linalg_pinv's atol and rtol (tensors, floats or None) as one value per matrix of the batch `_bt`, and the
    launch arguments that pass them."""
    L, args = [], []
    for key in ("atol", "rtol"):
        v = node.kwargs.get(key)
        if isinstance(v, fx.Node):
            L.append(f"_{key} = {names[v]}.expand(_bt).reshape([-1])")
        elif v is not None:
            L.append(f"_{key} = torch.full([max(_numel(_bt), 1)], {float(v)!r}, dtype=torch.float32, device=dev)")
        else:
            L.append(f"_{key} = _X.view([-1])")  # not read
        args.append(f"HAS_{key.upper()}={v is not None}")
    return L, ", ".join(args)


def _eigh(node: fx.Node, names: dict[fx.Node, str], p: str) -> list[str]:
    a, v = names[node.args[0]], names[node]
    pinv = p == "linalg_pinv"
    if pinv:
        upper, vecs = False, False
    else:  # _linalg_eigh(A, UPLO='L', compute_v=True)
        upper = (node.args[1] if len(node.args) > 1 else node.kwargs.get("UPLO", "L")) == "U"
        vecs = bool(node.args[2] if len(node.args) > 2 else node.kwargs.get("compute_v", True))
    L = [f"_A = {a}", "_n = _A.shape[-1]", "_m = _n", *_SIZE, "_bt = list(_A.shape[:-2])",
         "_A3 = _A.reshape([_numel(_bt), _n, _n])", "_Bn = _A3.shape[0]",
         # the upper triangle is the lower one of A^T: swapped strides
         f"_as = (_A3.stride(0), _A3.stride(2), _A3.stride(1)) if {upper} else _A3.stride()",
         "_W = torch.empty([*_bt, _n], dtype=torch.float32, device=dev)",
         f"_V = torch.empty([*_bt, _n, _n] if {vecs} else [0], dtype=torch.float32, device=dev)",
         "_X = torch.empty([*_bt, _n, _n] if " + str(pinv) + " else [0], dtype=torch.float32, device=dev)"]
    tol, targs = (_tol_lines(node, names) if pinv else ([], "HAS_ATOL=False, HAS_RTOL=False"))
    L += (tol if pinv else ["_atol = _rtol = _X.view([-1])"]) + ["_ts = (_atol.stride(0), _rtol.stride(0))"]
    L += ["if _Bn and _n: __KNAME___eigh[(_Bn,)](_A3, _W, _V, _X, _atol, _rtol, *_ts, _n, *_as, "
          f"*((_n * _n, _n, 1) if {vecs} else (0, 0, 0)), {EPS32!r} * _n, NP=max(16, triton.next_power_of_2(_n)), "
          f"VECS={vecs}, PINV={pinv}, {targs}, MAX_SWEEPS={MAX_SWEEPS}, num_warps=NUM_WARPS)"]
    if pinv:
        return L + [f"{v} = _X"]
    return L + [f"{v}_0 = _W", f"{v}_1 = _V"]


def _svd(node: fx.Node, names: dict[fx.Node, str], p: str) -> list[str]:
    a, v = names[node.args[0]], names[node]
    pinv = p == "linalg_pinv"
    if pinv:
        full, vecs = False, False
    else:  # _linalg_svd(A, full_matrices=False, compute_uv=True, *, driver=None)
        full = bool(node.args[1] if len(node.args) > 1 else node.kwargs.get("full_matrices", False))
        vecs = bool(node.args[2] if len(node.args) > 2 else node.kwargs.get("compute_uv", True))
    L = [f"_A = {a}", "_m = _A.shape[-2]", "_n = _A.shape[-1]", *_SIZE, "_k = min(_m, _n)",
         "_bt = list(_A.shape[:-2])", "_A3 = _A.reshape([_numel(_bt), _m, _n])", "_Bn = _A3.shape[0]",
         "_wide = _m < _n"]
    if full and vecs:
        L += ["if _m != _n and _Bn and _k:",
              "    raise ValueError('full_matrices=True of a non-square matrix: completing U or V to a basis is not "
              "lowered')"]
    L += ["_S = torch.empty([*_bt, _k], dtype=torch.float32, device=dev)",
          f"_U = torch.empty([*_bt, _m, _m if {full} else _k] if {vecs} else [0], dtype=torch.float32, device=dev)",
          f"_Vh = torch.empty([*_bt, _n if {full} else _k, _n] if {vecs} else [0], dtype=torch.float32, device=dev)",
          f"_X = torch.empty([*_bt, _n, _m] if {pinv} else [0], dtype=torch.float32, device=dev)",
          # the kernel works on the tall one of A and A^T: A^T = U' S V'^T is A = V' S U'^T, so U = V' and Vh = U'^T
          "_tm, _tn = (_n, _m) if _wide else (_m, _n)",
          "_as = (_A3.stride(0), _A3.stride(2), _A3.stride(1)) if _wide else _A3.stride()",
          "_us = (_k * _n, 1, _n) if _wide else (_m * _k, _k, 1)",   # where U' goes: Vh^T (wide) or U
          "_vs = (_k * _k, _k, 1) if _wide else (_k * _k, 1, _k)",   # where V' goes: U (wide) or Vh^T
          "_xs = (1, _m) if _wide else (_m, 1)",                     # pinv(A^T) = pinv(A)^T
          "_Uo, _Vo = (_Vh, _U) if _wide else (_U, _Vh)"]
    tol, targs = (_tol_lines(node, names) if pinv else ([], "HAS_ATOL=False, HAS_RTOL=False"))
    L += (tol if pinv else ["_atol = _rtol = _X.view([-1])"]) + ["_ts = (_atol.stride(0), _rtol.stride(0))"]
    L += ["if _Bn and _k: __KNAME___svd[(_Bn,)](_A3, _S, _Uo, _Vo, _X, _atol, _rtol, *_ts, _tm, _tn, *_as, *_us, *_vs, "
          f"*_xs, {EPS32!r} * max(_m, _n), MP=max(16, triton.next_power_of_2(_tm)), "
          f"NP=max(16, triton.next_power_of_2(_tn)), VECS={vecs}, PINV={pinv}, {targs}, MAX_SWEEPS={MAX_SWEEPS}, "
          "num_warps=NUM_WARPS)"]
    if pinv:
        return L + [f"{v} = _X"]
    return L + [f"{v}_0 = _U", f"{v}_1 = _S", f"{v}_2 = _Vh"]


def _pinv(node: fx.Node, names: dict[fx.Node, str], p: str) -> list[str]:
    herm = bool(node.kwargs.get("hermitian", False))
    return _eigh(node, names, p) if herm else _svd(node, names, p)


_MAKERS = {"_linalg_eigh": _eigh, "_linalg_svd": _svd, "linalg_pinv": _pinv}


def jacobi_kernel(name: str, node: fx.Node, names: dict[fx.Node, str], expr) -> tuple[str, list[str], set[str]]:  # noqa: ANN001
    p = packet(node)
    dt = dtype(node.args[0])
    if dt != torch.float32:
        raise Unsupported(f"unsupported: {op_name(node)} on {dt} (fp32 only)")
    if p == "linalg_pinv" and op_name(node) != "aten.linalg_pinv.atol_rtol_tensor":
        raise Unsupported(f"unsupported: {op_name(node)} (the atol/rtol tensor overload only)")
    return SRC, _MAKERS[p](node, names, p), set()


for _op, _n_out in {"_linalg_eigh": 2, "_linalg_svd": 3, "linalg_pinv": False}.items():
    register(_op, Primitive("jacobi", TUNABLES, jacobi_kernel, tuple_out=_n_out))
