"""Row softmax and log-softmax as one kernel: an online max-and-sum pass over the row, then a normalize pass.

Core ATen spells `softmax(x, d)` as amax, sub, exp, sum, div and `log_softmax` as amax, sub, exp, sum, log, sub.
Partitioned op by op that is four kernels reading the row four times (23_Softmax on the H200: 9006 us vs
eager's 6239). Here the whole chain is one group: pass 1 keeps a running max and a sum rescaled to it per lane
(Milakov and Gimelshein, "Online normalizer calculation for softmax", 2018) at one exp per element, pass 2
reads the row again and writes exp(x - max) * (1 / sum) (or x - max - log(sum)) through the fused epilogue.
Two reads, one write, as eager.
"""
from __future__ import annotations

import torch
import torch.fx as fx

from workbench.lowering import pointwise as pw
from workbench.lowering.families import Family, register_family
from workbench.lowering.graph import dtype, rank
from workbench.lowering.softmax_match import SoftmaxMatch

# Pass 1 costs one exp per element. With d = v - m_i, one of exp(m_i - max(m_i, v)) and exp(v - max(m_i, v))
# is exp(0) = 1 and the other exp(-|d|): a larger v rescales the sum (s * e + 1), a smaller one adds e. The
# exps of both loops are exp2 of x * log2(e), which is what tl.exp computes, less the subnormal rescaling
# that tl.exp's non-ftz ex2.approx.f32 costs ptxas (3 instructions an element; tl.exp2 is ex2.approx.ftz):
# an exp below 2**-126 is 0, against a sum of at least 1 (pass 1) or an atol of 1e-4 or more (pass 2). The
# running max starts at the lowest finite fp32, not -inf, so d is never -inf - -inf (nan): a lane that has
# seen only -inf keeps m_i = -FLT_MAX and sum 0 (d = -inf, e = 0), and its exp(m_i - mx) * 0 adds 0 below
# with no -inf test. A nan in the row makes d, e and the lane's sum nan and the row nan, as in eager, whether
# tl.maximum drops the nan (max.f32 on the GPU) or keeps it (the interpreter); a +inf makes its lane's
# exp(m_i - mx) = exp(inf - inf) nan, so the row is nan, as in eager.
_PASS1 = [
    "m_i = tl.full([RED_BLOCK_M, RED_BLOCK_N], -3.4028234663852886e38, tl.float32)",
    "s_i = tl.zeros([RED_BLOCK_M, RED_BLOCK_N], tl.float32)",
    "for n0 in range(0, N, RED_BLOCK_N):",
    "    cols = n0 + tl.arange(0, RED_BLOCK_N)",
    "    m = rmask[:, None] & (cols[None, :] < N)",
    "    v = tl.load(x_ptr + roff[:, None] + cols[None, :] * x_sn, mask=m, other=-float(\"inf\")).to(tl.float32)",
    "    d = v - m_i",
    "    e = tl.exp2(tl.abs(d) * -1.4426950408889634)  # exp(-|d|)",
    "    s_i = tl.where(d > 0, s_i * e + 1.0, s_i + e)",
    "    m_i = tl.maximum(m_i, v)",
    "mx = tl.max(m_i, axis=1)",
    "s = tl.sum(s_i * tl.exp(m_i - mx[:, None]), axis=1)",
]
_PASS2_HEAD = [
    "for n0 in range(0, N, RED_BLOCK_N):",
    "    cols = n0 + tl.arange(0, RED_BLOCK_N)",
    "    m = rmask[:, None] & (cols[None, :] < N)",
    "    off = roff[:, None] + cols[None, :] * x_sn",
    "    v = tl.load(x_ptr + off, mask=m, other=0.0).to(tl.float32)",
]



def softmax_kernel(name: str, group, mat: list[fx.Node], names: dict[fx.Node, str]):  # noqa: ANN001, ANN201
    """(source, launch lines, helpers) of the group whose `pattern` is a SoftmaxMatch."""
    from workbench.lowering.epilogue import build_body, store_lines, torch_dtype
    from workbench.lowering.partition import Group
    from workbench.lowering.templates import RED_ROWS, indent

    sm: SoftmaxMatch = group.pattern
    inner = set(sm.internal)
    epi = Group(gid=-1, shape=group.shape, anchor=sm.out, nodes=[n for n in group.nodes if n not in inner
                                                                   and n is not sm.out])
    y = pw.Val("y", torch.float32)
    body = build_body(epi, [n for n in mat if n is not sm.out], ["rows[:, None]", "cols[None, :]"], "m",
                      "(rows[:, None] * 0 + cols[None, :] * 0)", {sm.out: y})
    body.outputs = ([sm.out] if sm.out in mat else []) + [n for n in mat if n is not sm.out]
    body.values[sm.out] = y  # type: ignore[attr-defined]
    # per row, once: log(s), or 1/s so that an element costs a multiply, not a division (`/` is div.full.f32,
    # up to 2 ulp; 1/s rounded to nearest, then the multiply: within 1 ulp of the quotient); s = 0 (a row of
    # -inf) gives 0 * inf = nan, as 0 / 0 did
    if sm.log:
        per_row, formula = "sm_ls = tl.log(s)", "y = (v - mx[:, None]) - sm_ls[:, None]"
    else:
        per_row = "sm_rs = tl.math.div_rn(1.0, s)"
        formula = "y = tl.exp2((v - mx[:, None]) * 1.4426950408889634) * sm_rs[:, None]"
    lines = RED_ROWS + _PASS1 + [per_row] + _PASS2_HEAD + indent([formula] + body.lines +
                                                                  store_lines(body, "off", "m"))
    sig = ", ".join(["x_ptr"] + [f"out{j}_ptr" for j in range(len(body.outputs))] +
                    [f"in{k}_ptr" for k in range(len(body.inputs))] + [f"sc{k}" for k in range(len(body.scalars))] +
                    ["M", "N", "x_sm", "x_sn", "M2", "x_sm2"] +
                    [f"in{k}_s{d}" for k in range(len(body.inputs)) for d in range(2)] +
                    ["RED_BLOCK_M: tl.constexpr", "RED_BLOCK_N: tl.constexpr", "K2: tl.constexpr"])
    kind = "log_softmax" if sm.log else "softmax"
    doc = (f'    """{kind} over dim {sm.dim} of x viewed as rows [M, N]: online max and sum, then normalize; '
           f'epilogue: {", ".join(n.name for n in epi.nodes) or "none"}."""')
    src = "\n".join([f"@triton.jit\ndef {name}({sig}):", doc] + indent(lines)) + "\n"
    return src, _launch(name, sm, body, names, torch_dtype), body.helpers


def _launch(name: str, sm: SoftmaxMatch, body, names: dict[fx.Node, str], torch_dtype) -> list[str]:  # noqa: ANN001
    from workbench.lowering.templates import RED_BLOCKS

    """x made contiguous (the outputs are, so one offset serves the load and every store), the softmax dim
    permuted last and read in place as [M, N] (`_red_view`: rows in two groups when the dim is inside)."""
    xv = names[sm.source]
    r = rank(sm.source)
    perm = [i for i in range(r) if i != sm.dim] + [sm.dim]
    outs = [names[n] for n in body.outputs]
    lines = [f"_xc = {xv}.contiguous()",
             f"_x, _M, _N, _sm, _n2, _sn, _sn2, _x2, _m2, _sm2, _k2 = _red_view(_xc.permute({perm}), {r - 1})"]
    lines += [f"{o} = torch.empty({xv}.shape, dtype={torch_dtype(dtype(n))}, device=dev)"
              for o, n in zip(outs, body.outputs)]
    strides = []
    for k, node in enumerate(body.inputs):
        # an epilogue operand broadcast to x, laid out as the rows: a view where it can be, a copy otherwise
        lines.append(f"_e{k} = {names[node]}.expand({xv}.shape).permute({perm}).reshape(_M, _N)")
        strides.append(f"*_e{k}.stride()")
    args = ["_x"] + outs + [f"_e{k}" for k in range(len(body.inputs))] + [names[s] for s in body.scalars] + \
        ["_M", "_N", "_sm", "_sn", "_m2", "_sm2"] + strides
    lines += RED_BLOCKS + [f"if _M and _N: {name}[(_grid,)]({', '.join(args)}, RED_BLOCK_M=_rbm, "
                           "RED_BLOCK_N=_rbn, num_warps=NUM_WARPS, K2=_k2)"]
    return lines


# a matched chain (softmax_match: amax, sub, exp, sum, div) is one group; it claims its group before any anchor
register_family(Family("softmax", "softmax", lambda nm, g, mat, names, prec: softmax_kernel(nm, g, mat, names),
                       ("RED_BLOCK_M", "RED_BLOCK_N", "NUM_WARPS"), pattern=True, rank=10))
