"""Householder QR in LAPACK's conventions, one program per matrix, the matrix in registers (m, n <= MAX_N): `geqrf`,
`linalg_qr` (qr, linalg.qr: reduced, complete, r), `linalg_householder_product` (orgqr) and `ormqr`.

`_qr` is sgeqr2: for each column k, slarfg's reflector H_k = I - tau v v^T with v[k] = 1, beta = -sign(alpha)
||x|| (sign(0) = +1) and tau = (beta - alpha) / beta, or tau = 0 (H_k = I, alpha kept) when the part below the
diagonal is already zero; beta goes on R's diagonal and v below it, so the packed output, tau, R's signs and Q match
LAPACK's up to rounding (torch's linalg_qr is geqrf then orgqr). Q = H_1 ... H_k is accumulated alongside (Q <- Q -
tau (Q v) v^T). `_orm` rebuilds Q from packed reflectors and either stores its leading columns (orgqr) or applies
op(Q) to C (ormqr; a right-hand product C op(Q) is the left-hand one of C^T, through swapped strides). fp32 only.
"""
from __future__ import annotations

import torch
import torch.fx as fx

from workbench.lowering.epilogue import Unsupported
from workbench.lowering.graph import dtype, op_name, packet
from workbench.lowering.primitives import Primitive, register

TUNABLES = ("NUM_WARPS",)
MAX_N = 64

SRC = '''@triton.jit
def __KNAME___qr(a_ptr, f_ptr, tau_ptr, q_ptr, r_ptr, m, n, kmin, qcols, rrows, a_sb, a_sr, a_sc,
                 MP: tl.constexpr, NP: tl.constexpr, PACKED: tl.constexpr, Q: tl.constexpr):
    """Householder QR of A [m, n]: packed reflectors and R (geqrf) in F [m, n], tau [kmin]; R [rrows, n] and
    Q [m, qcols] when asked."""
    bi = tl.program_id(0).to(tl.int64)
    ri = tl.arange(0, MP)
    i = ri[:, None]
    j = tl.arange(0, NP)[None, :]
    qc = ri[None, :]
    A = tl.load(a_ptr + bi * a_sb + i * a_sr + j * a_sc, mask=(i < m) & (j < n), other=0).to(tl.float32)
    Qm = tl.where(i == qc, 1.0, 0.0)
    for k in range(0, kmin):
        x = tl.where(ri >= k, tl.sum(tl.where(j == k, A, 0.0), 1), 0.0)
        alpha = tl.sum(tl.where(ri == k, x, 0.0), 0)
        xn2 = tl.sum(tl.where(ri > k, x * x, 0.0), 0)
        h = xn2 > 0.0
        beta = tl.where(alpha >= 0.0, -1.0, 1.0) * tl.sqrt(alpha * alpha + xn2)
        tau = tl.where(h, (beta - alpha) / tl.where(h, beta, 1.0), 0.0)
        v = tl.where(ri == k, 1.0, tl.where(ri > k, x / tl.where(h, alpha - beta, 1.0), 0.0))
        w = tl.sum(v[:, None] * A, 0)
        A = tl.where(j > k, A - tau * v[:, None] * w[None, :], A)
        A = tl.where(j == k, tl.where(i == k, tl.where(h, beta, alpha), tl.where(i > k, v[:, None], A)), A)
        tl.store(tau_ptr + bi * kmin + k + ri * 0, tau + ri * 0.0, mask=ri == 0)
        if Q:
            qv = tl.sum(Qm * v[None, :], 1)
            Qm = Qm - tau * qv[:, None] * v[None, :]
    if PACKED:
        tl.store(f_ptr + bi * m * n + i * n + j, A, mask=(i < m) & (j < n))
    tl.store(r_ptr + bi * rrows * n + i * n + j, tl.where(i <= j, A, 0.0), mask=(i < rrows) & (j < n))
    if Q:
        tl.store(q_ptr + bi * m * qcols + i * qcols + qc, Qm, mask=(i < m) & (qc < qcols))


@triton.jit
def __KNAME___orm(v_ptr, tau_ptr, c_ptr, o_ptr, nq, kk, ncols, v_sb, v_sr, v_sc, tau_sb, c_sb, c_sr, c_sc,
                  o_sb, o_sr, o_sc, QP: tl.constexpr, CP: tl.constexpr, APPLY: tl.constexpr, TRANS: tl.constexpr):
    """Q = H_1 ... H_kk [nq, nq] from the reflectors below the diagonal of V and tau; stores Q's first ncols
    columns, or op(Q) C for C [nq, ncols] when APPLY."""
    bi = tl.program_id(0).to(tl.int64)
    ri = tl.arange(0, QP)
    i = ri[:, None]
    qc = ri[None, :]
    Qm = tl.where(i == qc, 1.0, 0.0)
    for k in range(0, kk):
        x = tl.load(v_ptr + bi * v_sb + ri * v_sr + k * v_sc, mask=(ri > k) & (ri < nq), other=0).to(tl.float32)
        v = tl.where(ri == k, 1.0, x)
        tau = tl.load(tau_ptr + bi * tau_sb + k).to(tl.float32)
        qv = tl.sum(Qm * v[None, :], 1)
        Qm = Qm - tau * qv[:, None] * v[None, :]
    if APPLY:
        cj = tl.arange(0, CP)[None, :]
        C = tl.load(c_ptr + bi * c_sb + i * c_sr + cj * c_sc, mask=(i < nq) & (cj < ncols), other=0).to(tl.float32)
        if TRANS:
            Qm = tl.trans(Qm)
        O = tl.dot(Qm, C, input_precision="ieee")
        tl.store(o_ptr + bi * o_sb + i * o_sr + cj * o_sc, O, mask=(i < nq) & (cj < ncols))
    else:
        tl.store(o_ptr + bi * o_sb + i * o_sr + qc * o_sc, Qm, mask=(i < nq) & (qc < ncols))
'''

_P2 = "max(16, triton.next_power_of_2({}))"


def _size(*dims: str) -> list[str]:
    return [f"if max({', '.join(dims)}) > {MAX_N}:",
            f"    raise ValueError(f'{{({', '.join(dims)})}}: more than the {MAX_N} a program holds in registers')"]


def _qr(node: fx.Node, names: dict[fx.Node, str], p: str) -> list[str]:
    a, v = names[node.args[0]], names[node]
    mode = "r" if p == "geqrf" else (node.args[1] if len(node.args) > 1 else node.kwargs.get("mode", "reduced"))
    if mode not in ("reduced", "complete", "r"):
        raise Unsupported(f"unsupported: linalg_qr mode {mode!r}")
    q = p == "linalg_qr" and mode != "r"
    qcols, rrows = ("_m", "_m") if mode == "complete" else ("_k", "_k")
    L = [f"_A = {a}", "_m = _A.shape[-2]", "_n = _A.shape[-1]", *_size("_m", "_n"), "_k = min(_m, _n)",
         "_bt = list(_A.shape[:-2])", "_A3 = _A.reshape([_numel(_bt), _m, _n])", "_Bn = _A3.shape[0]",
         f"_F = torch.empty([*_bt, _m, _n] if {p == 'geqrf'} else [0], dtype=torch.float32, device=dev)",
         "_tau = torch.empty([*_bt, _k], dtype=torch.float32, device=dev)",
         f"_Q = torch.empty([*_bt, _m, {qcols}] if {q} else [0], dtype=torch.float32, device=dev)",
         f"_R = torch.empty([*_bt, {rrows}, _n], dtype=torch.float32, device=dev)",
         f"if _Bn and _m: __KNAME___qr[(_Bn,)](_A3, _F, _tau, _Q, _R, _m, _n, _k, {qcols}, {rrows}, *_A3.stride(), "
         f"MP={_P2.format('_m')}, NP={_P2.format('_n')}, PACKED={p == 'geqrf'}, Q={q}, num_warps=NUM_WARPS)"]
    if p == "geqrf":
        return L + [f"{v}_0 = _F", f"{v}_1 = _tau"]
    return L + [f"{v}_0 = _Q", f"{v}_1 = _R"]


def _orm(node: fx.Node, names: dict[fx.Node, str], p: str) -> list[str]:
    a, tau, v = names[node.args[0]], names[node.args[1]], names[node]
    L = [f"_V = {a}", f"_tau = {tau}"]
    if p == "linalg_householder_product":  # Q's first n columns, Q [m, m] from the k reflectors of A [m, n]
        L += ["_nq = _V.shape[-2]", "_nc = _V.shape[-1]", "_bt = list(_V.shape[:-2])", "_C = _V", "_left = True",
              "_O = torch.empty([*_bt, _nq, _nc], dtype=torch.float32, device=dev)",
              "_O3 = _O.view([_numel(_bt), _nq, _nc])"]
        apply, trans = False, False
    else:  # ormqr(A, tau, C, left=True, transpose=False): op(Q) C, or C op(Q) as (op(Q)^T C^T)^T
        left = bool(node.args[3] if len(node.args) > 3 else node.kwargs.get("left", True))
        trans = bool(node.args[4] if len(node.args) > 4 else node.kwargs.get("transpose", False))
        L += [f"_C = {names[node.args[2]]}", "_bt = _bshape(_V.shape[:-2], _C.shape[:-2])",
              "_O = torch.empty([*_bt, *_C.shape[-2:]], dtype=torch.float32, device=dev)"]
        if not left:
            L += ["_C = _C.mT", "_O3 = _O.view([_numel(_bt), *_O.shape[-2:]]).mT"]
            trans = not trans
        else:
            L += ["_O3 = _O.view([_numel(_bt), *_O.shape[-2:]])"]
        L += ["_nq = _C.shape[-2]", "_nc = _C.shape[-1]"]
        apply = True
    L += [*_size("_nq", "_nc"), "_kk = _tau.shape[-1]",
          "_V3 = _V.expand([*_bt, *_V.shape[-2:]]).reshape([_numel(_bt), *_V.shape[-2:]])",
          "_t3 = _tau.expand([*_bt, _kk]).reshape([_numel(_bt), _kk])",
          "_C3 = _C.expand([*_bt, *_C.shape[-2:]]).reshape([_numel(_bt), *_C.shape[-2:]])",
          "_Bn = _numel(_bt)",
          "if _Bn and _nq and _nc: __KNAME___orm[(_Bn,)](_V3, _t3, _C3, _O3, _nq, _kk, _nc, *_V3.stride(), "
          f"_t3.stride(0), *_C3.stride(), *_O3.stride(), QP={_P2.format('_nq')}, CP={_P2.format('_nc')}, "
          f"APPLY={apply}, TRANS={trans}, num_warps=NUM_WARPS)", f"{v} = _O"]
    return L


_MAKERS = {"geqrf": _qr, "linalg_qr": _qr, "linalg_householder_product": _orm, "ormqr": _orm}


def qr_kernel(name: str, node: fx.Node, names: dict[fx.Node, str], expr) -> tuple[str, list[str], set[str]]:  # noqa: ANN001
    p = packet(node)
    dts = {dtype(a) for a in node.args if isinstance(a, fx.Node)}
    if dts != {torch.float32}:
        raise Unsupported(f"unsupported: {op_name(node)} on {sorted(map(str, dts))} (fp32 only)")
    return SRC, _MAKERS[p](node, names, p), set()


for _op, _n_out in {"geqrf": True, "linalg_qr": True, "linalg_householder_product": False, "ormqr": False}.items():
    register(_op, Primitive("qr", TUNABLES, qr_kernel, tuple_out=_n_out))
