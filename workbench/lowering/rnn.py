"""LSTM and GRU (aten.lstm.input, aten.gru.input) as a GEMM and a recurrence per layer and direction.

Decomposed, an LSTM of 6 layers over 512 steps is 3072 unrolled cells: about 46k graph nodes whose capture
and lowering ran past 150 s on the 2-core CPU (and past 15 min bidirectional), and a draft of thousands of
launches. Kept whole (capture leaves these two ops out of the decompositions), each layer and direction is:
1. `proj`: the input projection of every step at once, pre[b*T + t, :] = x[b, t] @ W_ih^T + b_ih: one GEMM.
2. the recurrence: gates = pre[b, t] + h @ W_hh^T + b_hh, then the cell (torch's gate order: LSTM i f g o,
   GRU r z n with n = tanh(pre_n + r * (h W_hn + b_hn))). h lives in a [2, B, H] scratch (read one half,
   write the other); c in c_n. By default (`RNN_PERSISTENT = 0`) `step` is one launch per step over
   (batch blocks x hidden blocks) programs; with 1, `recur` is one program per block of RNN_BLOCK_B batch
   rows that walks the T steps itself, a barrier between steps (the block's own global writes are visible
   to it after __syncthreads): fewer launches, but KernelBench's batch of 10 is then one program on one SM.
Capture routes nn.LSTM/nn.GRU to the custom ops `wb_lowering::lstm` / `wb_lowering::gru` (`whole_rnn()`,
around the export): their fake implementation gives the output shapes at once, where fake-tensor
propagation of aten.lstm itself runs the decomposition, cell by cell (36_LSTMHn at published sizes: minutes).
fp32 only (KernelBench's RNNs); dots in IEEE fp32. Dropout between layers in training mode (random) and
proj_size are refused.
"""
from __future__ import annotations

import contextlib
from typing import Iterator

import torch
import torch.fx as fx

from workbench.lowering.epilogue import Unsupported
from workbench.lowering.graph import op_name, packet, val
from workbench.lowering.primitives import Primitive, register, register_helper, register_tunables

TUNABLES = ("RNN_BLOCK_B", "RNN_BLOCK_H", "RNN_BLOCK_K", "PROJ_BLOCK_M", "PROJ_BLOCK_N", "PROJ_BLOCK_K",
            "RNN_NUM_WARPS", "RNN_PERSISTENT")
# RNN_PERSISTENT 0: one launch per step over (batch blocks x hidden blocks) programs; 1: one program per
# batch block walks every step. KernelBench's batch of 10 is one program on one SM: the persistent form ran
# the H200's 36_LSTMHn at 0.04x of cuDNN (874 ms against 35 ms), so per-step launches are the default.
DEFAULTS = {"RNN_BLOCK_B": ([16, 32], 16), "RNN_BLOCK_H": ([16, 32, 64], 32), "RNN_BLOCK_K": ([16, 32, 64], 32),
            "PROJ_BLOCK_M": ([32, 64, 128], 64), "PROJ_BLOCK_N": ([32, 64, 128], 64),
            "PROJ_BLOCK_K": ([16, 32, 64], 32), "RNN_NUM_WARPS": ([2, 4, 8], 4), "RNN_PERSISTENT": ([0, 1], 0)}

_TANH = '''@triton.jit
def _rnn_tanh(x):
    e = tl.exp(-2.0 * tl.abs(x))
    t = (1.0 - e) / (1.0 + e)
    return tl.where(x >= 0, t, -t)
'''


def _kernels(name: str, gru: bool) -> str:
    g = 3 if gru else 4
    proj = f'''@triton.jit
def {name}_proj(x_ptr, w_ptr, b_ptr, pre_ptr, M, T, N, K, x_sb, x_st, x_sk, w_sn, w_sk,
                HAS_BIAS: tl.constexpr, PROJ_BLOCK_M: tl.constexpr, PROJ_BLOCK_N: tl.constexpr,
                PROJ_BLOCK_K: tl.constexpr):
    """pre[m, n] = sum_k x[m // T, m % T, k] * w[n, k] + b[n]: the input projection of every step."""
    m = tl.program_id(0).to(tl.int64) * PROJ_BLOCK_M + tl.arange(0, PROJ_BLOCK_M)
    n = tl.program_id(1) * PROJ_BLOCK_N + tl.arange(0, PROJ_BLOCK_N)
    mm = m < M
    nm = n < N
    xrow = (m // T) * x_sb + (m % T) * x_st
    acc = tl.zeros([PROJ_BLOCK_M, PROJ_BLOCK_N], tl.float32)
    for k0 in range(0, K, PROJ_BLOCK_K):
        k = k0 + tl.arange(0, PROJ_BLOCK_K)
        km = k < K
        a = tl.load(x_ptr + xrow[:, None] + k[None, :] * x_sk, mask=mm[:, None] & km[None, :], other=0.0)
        w = tl.load(w_ptr + n[None, :] * w_sn + k[:, None] * w_sk, mask=km[:, None] & nm[None, :], other=0.0)
        acc += tl.dot(a.to(tl.float32), w.to(tl.float32), input_precision="ieee")
    if HAS_BIAS:
        acc += tl.load(b_ptr + n, mask=nm, other=0.0).to(tl.float32)[None, :]
    tl.store(pre_ptr + m[:, None] * N + n[None, :], acc, mask=mm[:, None] & nm[None, :])
'''
    gates = "r z n" if gru else "i f g o"
    acc_init = "\n".join(f"            acc{q} = tl.zeros([RNN_BLOCK_B, RNN_BLOCK_H], tl.float32)" for q in range(g))
    dots = "\n".join(
        f"                w{q} = tl.load(w_ptr + ({q} * H + j)[None, :] * w_sn + k[:, None] * w_sk, mask=wm, "
        "other=0.0)\n"
        f"                acc{q} += tl.dot(hk, w{q}, input_precision=\"ieee\")" for q in range(g))
    bias = "\n".join(f"                acc{q} += tl.load(bh_ptr + {q} * H + j, mask=jm, other=0.0)[None, :]"
                     for q in range(g))
    pre = "\n".join(f"            p{q} = tl.load(pre_ptr + prow[:, None] + {q} * H + j[None, :], mask=m2, other=0.0)"
                    for q in range(g))
    if gru:
        cell = '''            hp = tl.load(hs_ptr + cur * B * H + b[:, None] * H + j[None, :], mask=m2, other=0.0)
            r = tl.sigmoid(p0 + acc0)
            z = tl.sigmoid(p1 + acc1)
            nn_ = _rnn_tanh(p2 + r * acc2)
            h = (1.0 - z) * nn_ + z * hp'''
    else:
        cell = '''            c = tl.load(cn_ptr + b[:, None] * c_sb + j[None, :] * c_sh, mask=m2, other=0.0)
            c = tl.sigmoid(p1 + acc1) * c + tl.sigmoid(p0 + acc0) * _rnn_tanh(p2 + acc2)
            tl.store(cn_ptr + b[:, None] * c_sb + j[None, :] * c_sh, c, mask=m2)
            h = tl.sigmoid(p3 + acc3) * _rnn_tanh(c)'''
    recur = f'''@triton.jit
def {name}(pre_ptr, h0_ptr, c0_ptr, w_ptr, bh_ptr, hs_ptr, out_ptr, hn_ptr, cn_ptr, B, T, H,
           h0_sb, h0_sh, c0_sb, c0_sh, w_sn, w_sk, out_sb, out_st, hn_sb, hn_sh, c_sb, c_sh,
           REVERSE: tl.constexpr, HAS_BIAS: tl.constexpr, RNN_BLOCK_B: tl.constexpr, RNN_BLOCK_H: tl.constexpr,
           RNN_BLOCK_K: tl.constexpr):
    """{'GRU' if gru else 'LSTM'} recurrence ({gates}) over T steps for RNN_BLOCK_B batch rows."""
    b = tl.program_id(0) * RNN_BLOCK_B + tl.arange(0, RNN_BLOCK_B)
    bm = b < B
    for j0 in range(0, H, RNN_BLOCK_H):  # h0 into the scratch's half 0 (and c0 into c_n)
        j = j0 + tl.arange(0, RNN_BLOCK_H)
        m2 = bm[:, None] & (j < H)[None, :]
        h0 = tl.load(h0_ptr + b[:, None] * h0_sb + j[None, :] * h0_sh, mask=m2, other=0.0)
        tl.store(hs_ptr + b[:, None] * H + j[None, :], h0, mask=m2)
        if not {gru}:
            c0 = tl.load(c0_ptr + b[:, None] * c0_sb + j[None, :] * c0_sh, mask=m2, other=0.0)
            tl.store(cn_ptr + b[:, None] * c_sb + j[None, :] * c_sh, c0, mask=m2)
    tl.debug_barrier()
    for s in range(0, T):
        if REVERSE:
            t = T - 1 - s
        else:
            t = s
        cur = s % 2
        prow = (b.to(tl.int64) * T + t) * {g} * H
        for j0 in range(0, H, RNN_BLOCK_H):
            j = j0 + tl.arange(0, RNN_BLOCK_H)
            jm = j < H
            m2 = bm[:, None] & jm[None, :]
{acc_init}
            for k0 in range(0, H, RNN_BLOCK_K):
                k = k0 + tl.arange(0, RNN_BLOCK_K)
                km = k < H
                wm = km[:, None] & jm[None, :]
                hk = tl.load(hs_ptr + cur * B * H + b[:, None] * H + k[None, :], mask=bm[:, None] & km[None, :],
                             other=0.0)
{dots}
            if HAS_BIAS:
{bias}
{pre}
{cell}
            tl.store(hs_ptr + (1 - cur) * B * H + b[:, None] * H + j[None, :], h, mask=m2)
            tl.store(out_ptr + b[:, None] * out_sb + t * out_st + j[None, :], h, mask=m2)
            if s == T - 1:
                tl.store(hn_ptr + b[:, None] * hn_sb + j[None, :] * hn_sh, h, mask=m2)
        tl.debug_barrier()
'''
    # the cell's first line loads the state of step s - 1; the first step reads h0 (GRU) or c0 (LSTM) instead
    load, *rest = (ln[8:] for ln in cell.splitlines())
    first = ("hp = tl.load(h0_ptr + b[:, None] * h0_sb + j[None, :] * h0_sh, mask=m2, other=0.0)" if gru else
             "c = tl.load(c0_ptr + b[:, None] * c0_sb + j[None, :] * c0_sh, mask=m2, other=0.0)")
    step_cell = "\n".join(["    if FIRST:", f"        {first}", "    else:", f"    {load}", *rest])
    # the persistent kernel's step body, 8 columns left: no loop over steps or hidden blocks around it
    step_acc, step_dots, step_bias, step_pre = (
        "\n".join(ln[8:] for ln in part.splitlines()) for part in (acc_init, dots, bias, pre))
    step = f'''@triton.jit
def {name}_step(pre_ptr, h0_ptr, c0_ptr, w_ptr, bh_ptr, hs_ptr, out_ptr, hn_ptr, cn_ptr, B, T, H, s,
                h0_sb, h0_sh, c0_sb, c0_sh, w_sn, w_sk, out_sb, out_st, hn_sb, hn_sh, c_sb, c_sh,
                REVERSE: tl.constexpr, HAS_BIAS: tl.constexpr, FIRST: tl.constexpr, RNN_BLOCK_B: tl.constexpr,
                RNN_BLOCK_H: tl.constexpr, RNN_BLOCK_K: tl.constexpr):
    """{'GRU' if gru else 'LSTM'} step s ({gates}) for RNN_BLOCK_B batch rows x RNN_BLOCK_H hidden units: h of
    step s - 1 from the scratch half s % 2 (h0 and c0 themselves at the first step), h into the other half."""
    b = tl.program_id(0) * RNN_BLOCK_B + tl.arange(0, RNN_BLOCK_B)
    bm = b < B
    j = tl.program_id(1) * RNN_BLOCK_H + tl.arange(0, RNN_BLOCK_H)
    jm = j < H
    m2 = bm[:, None] & jm[None, :]
    if REVERSE:
        t = T - 1 - s
    else:
        t = s
    cur = s % 2
    prow = (b.to(tl.int64) * T + t) * {g} * H
{step_acc}
    for k0 in range(0, H, RNN_BLOCK_K):
        k = k0 + tl.arange(0, RNN_BLOCK_K)
        km = k < H
        wm = km[:, None] & jm[None, :]
        if FIRST:
            hk = tl.load(h0_ptr + b[:, None] * h0_sb + k[None, :] * h0_sh, mask=bm[:, None] & km[None, :],
                         other=0.0)
        else:
            hk = tl.load(hs_ptr + cur * B * H + b[:, None] * H + k[None, :], mask=bm[:, None] & km[None, :],
                         other=0.0)
{step_dots}
    if HAS_BIAS:
{step_bias}
{step_pre}
{step_cell}
    tl.store(hs_ptr + (1 - cur) * B * H + b[:, None] * H + j[None, :], h, mask=m2)
    tl.store(out_ptr + b[:, None] * out_sb + t * out_st + j[None, :], h, mask=m2)
    if s == T - 1:
        tl.store(hn_ptr + b[:, None] * hn_sb + j[None, :] * hn_sh, h, mask=m2)
'''
    return proj + "\n\n" + recur + "\n\n" + step


def rnn_kernel(name: str, node: fx.Node, names: dict[fx.Node, str], expr) -> tuple[str, list[str], set[str]]:  # noqa: ANN001
    gru = packet(node) == "gru"
    x, hx, params, has_biases, num_layers, dropout, train, bidirectional, batch_first = node.args[:9]
    if val(x).dtype != torch.float32:
        raise Unsupported(f"unsupported: {op_name(node)} on {val(x).dtype} (fp32 only)")
    if dropout and train and num_layers > 1:
        raise Unsupported(f"unsupported: {op_name(node)} with dropout in training mode (random)")
    per = 4 if has_biases else 2
    dirs = 2 if bidirectional else 1
    if len(params) != per * num_layers * dirs:
        raise Unsupported(f"unsupported: {op_name(node)} with proj_size")
    g = 3 if gru else 4
    h0 = expr(hx) if gru else expr(hx[0])
    c0 = h0 if gru else expr(hx[1])
    v = names[node]
    outs = [f"{v}_{i}" for i in range(2 if gru else 3)]
    L = [f"_x = {expr(x)}" if batch_first else f"_x = {expr(x)}.transpose(0, 1)",
         f"_h0 = {h0}", f"_c0 = {c0}", f"_ps = {expr(list(params))}",
         "_B, _T, _H = _x.shape[0], _x.shape[1], _h0.shape[2]",
         f"_hn = torch.empty([{num_layers * dirs}, _B, _H], dtype=torch.float32, device=dev)",
         f"_cn = torch.empty([{num_layers * dirs}, _B, _H], dtype=torch.float32, device=dev)",
         "_hs = torch.empty([2, _B, _H], dtype=torch.float32, device=dev)",
         "_inp = _x",
         f"for _l in range({num_layers}):",
         f"    _out = torch.empty([_B, _T, {dirs} * _H], dtype=torch.float32, device=dev)",
         f"    for _d in range({dirs}):",
         f"        _k = _l * {dirs} + _d",
         f"        _w = _ps[_k * {per}:(_k + 1) * {per}]",
         f"        _bi, _bh = (_w[2], _w[3]) if {per} == 4 else (_w[0], _w[1])",
         f"        _pre = torch.empty([_B * _T, {g} * _H], dtype=torch.float32, device=dev)",
         "        _I = _inp.shape[2]",
         f"        if _B * _T: {name}_proj[(triton.cdiv(_B * _T, PROJ_BLOCK_M), triton.cdiv({g} * _H, PROJ_BLOCK_N))]("
         f"_inp, _w[0], _bi, _pre, _B * _T, _T, {g} * _H, _I, *_inp.stride(), *_w[0].stride(), "
         f"HAS_BIAS={per == 4}, PROJ_BLOCK_M=PROJ_BLOCK_M, PROJ_BLOCK_N=PROJ_BLOCK_N, PROJ_BLOCK_K=PROJ_BLOCK_K, "
         "num_warps=RNN_NUM_WARPS)",
         "        _od = _out[:, :, _d * _H:]",
         "        _hk, _ck, _hnk, _cnk = _h0[_k], _c0[_k], _hn[_k], _cn[_k]",
         f"        if _B and _T and RNN_PERSISTENT: {name}[(triton.cdiv(_B, RNN_BLOCK_B),)](_pre, _hk, _ck, _w[1], "
         "_bh, _hs, _od, _hnk, _cnk, _B, _T, _H, *_hk.stride(), *_ck.stride(), *_w[1].stride(), _od.stride(0), "
         f"_od.stride(1), *_hnk.stride(), *_cnk.stride(), REVERSE=_d == 1, HAS_BIAS={per == 4}, "
         "RNN_BLOCK_B=RNN_BLOCK_B, RNN_BLOCK_H=RNN_BLOCK_H, RNN_BLOCK_K=RNN_BLOCK_K, num_warps=RNN_NUM_WARPS)",
         "        elif _B:",
         "            for _s in range(_T):",
         f"                {name}_step[(triton.cdiv(_B, RNN_BLOCK_B), triton.cdiv(_H, RNN_BLOCK_H))](_pre, _hk, _ck, "
         "_w[1], _bh, _hs, _od, _hnk, _cnk, _B, _T, _H, _s, *_hk.stride(), *_ck.stride(), *_w[1].stride(), "
         f"_od.stride(0), _od.stride(1), *_hnk.stride(), *_cnk.stride(), REVERSE=_d == 1, HAS_BIAS={per == 4}, "
         "FIRST=_s == 0, RNN_BLOCK_B=RNN_BLOCK_B, RNN_BLOCK_H=RNN_BLOCK_H, RNN_BLOCK_K=RNN_BLOCK_K, "
         "num_warps=RNN_NUM_WARPS)",
         "    _inp = _out",
         f"{outs[0]} = _inp if {batch_first} else _inp.transpose(0, 1)",
         f"{outs[1]} = _hn"]
    if not gru:
        L.append(f"{outs[2]} = _cn")
    return _kernels(name, gru), L, {"_rnn_tanh"}


@torch.library.custom_op("wb_lowering::lstm", mutates_args=())
def _lstm_op(x: torch.Tensor, hx: list[torch.Tensor], params: list[torch.Tensor], has_biases: bool,
             num_layers: int, dropout: float, train: bool, bidirectional: bool,
             batch_first: bool) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    out = torch.ops.aten.lstm.input(x, hx, params, has_biases, num_layers, dropout, train, bidirectional,
                                    batch_first)
    return tuple(o.clone() for o in out)  # type: ignore[return-value]


@_lstm_op.register_fake
def _lstm_fake(x, hx, params, has_biases, num_layers, dropout, train, bidirectional, batch_first):  # noqa: ANN001, ANN202
    return _out_like(x, hx[0], bidirectional, batch_first), hx[0].new_empty(hx[0].shape), hx[1].new_empty(hx[1].shape)


@torch.library.custom_op("wb_lowering::gru", mutates_args=())
def _gru_op(x: torch.Tensor, hx: torch.Tensor, params: list[torch.Tensor], has_biases: bool, num_layers: int,
            dropout: float, train: bool, bidirectional: bool, batch_first: bool) -> tuple[torch.Tensor, torch.Tensor]:
    out = torch.ops.aten.gru.input(x, hx, params, has_biases, num_layers, dropout, train, bidirectional, batch_first)
    return tuple(o.clone() for o in out)  # type: ignore[return-value]


@_gru_op.register_fake
def _gru_fake(x, hx, params, has_biases, num_layers, dropout, train, bidirectional, batch_first):  # noqa: ANN001, ANN202
    return _out_like(x, hx, bidirectional, batch_first), hx.new_empty(hx.shape)


def _out_like(x: torch.Tensor, h: torch.Tensor, bidirectional: bool, batch_first: bool) -> torch.Tensor:
    dirs = 2 if bidirectional else 1
    if x.dim() == 2:  # unbatched
        return x.new_empty([x.shape[0], dirs * h.shape[-1]])
    return x.new_empty([x.shape[0], x.shape[1], dirs * h.shape[-1]])


class _VFShim:
    """torch.nn.modules.rnn's `_VF` during capture: lstm and gru (the input overloads) become the custom ops."""

    def __init__(self, real: object) -> None:
        self._real = real

    def __getattr__(self, name: str) -> object:
        return getattr(self._real, name)

    def lstm(self, *args: object) -> object:
        if isinstance(args[1], (list, tuple)) and len(args) == 9:
            return torch.ops.wb_lowering.lstm(*args)
        return self._real.lstm(*args)  # the packed-sequence overload: decomposed as before

    def gru(self, *args: object) -> object:
        if isinstance(args[1], torch.Tensor) and len(args) == 9 and not isinstance(args[2], torch.Tensor):
            return torch.ops.wb_lowering.gru(*args)
        return self._real.gru(*args)


@contextlib.contextmanager
def whole_rnn() -> Iterator[None]:
    from torch.nn.modules import rnn as nn_rnn

    real = nn_rnn._VF
    nn_rnn._VF = _VFShim(real)
    try:
        yield
    finally:
        nn_rnn._VF = real


register_tunables(DEFAULTS)
register_helper("_rnn_tanh", _TANH)
register("lstm", Primitive("rnn", TUNABLES, rnn_kernel, tuple_out=3))
register("gru", Primitive("rnn", TUNABLES, rnn_kernel, tuple_out=2))
