"""Row softmax and log-softmax as one kernel: an online max-and-sum pass over the row, then a normalize pass.

Core ATen spells `softmax(x, d)` as amax, sub, exp, sum, div and `log_softmax` as amax, sub, exp, sum, log, sub.
Partitioned op by op that is four kernels reading the row four times (23_Softmax on the H200: 9006 us vs
eager's 6239). Here the whole chain is one group: pass 1 keeps a running max and a sum rescaled to it per lane
(Milakov and Gimelshein, "Online normalizer calculation for softmax", 2018), pass 2 reads the row again and
writes exp(x - max) / sum (or x - max - log(sum)) through the fused epilogue. Two reads, one write, as eager.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import torch
import torch.fx as fx

from workbench.lowering import pointwise as pw
from workbench.lowering.graph import dtype, packet, rank, shape_key, val

_UPCASTS = ("_to_copy", "convert_element_type")


@dataclass(eq=False)
class SoftmaxMatch:
    source: fx.Node            # the tensor read (before an fp16/bf16 -> fp32 upcast, which the load does)
    dim: int
    log: bool
    out: fx.Node               # div (softmax) or the last sub (log-softmax)
    internal: list[fx.Node] = field(default_factory=list)   # every node of the chain but `out`, graph order


def _users(node: fx.Node) -> set[fx.Node]:
    return set(node.users)


def _one_dim(node: fx.Node, name: str) -> int | None:
    """d when node is `name(x, [d], keepdim=True)` (the form the softmax decomposition writes)."""
    if packet(node) != name or len(node.args) < 3 or node.args[2] is not True or node.kwargs.get("dtype"):
        return None
    dims = node.args[1]
    if not isinstance(dims, (list, tuple)) or len(dims) != 1:
        return None
    return dims[0] % max(rank(node.args[0]), 1)


def _source(x: fx.Node, inside: set[fx.Node]) -> tuple[fx.Node, list[fx.Node]]:
    """(the tensor to load, the upcast absorbed): an exact fp16/bf16 -> fp32 cast used only by the chain."""
    if packet(x) in _UPCASTS and len(x.args) == 1 and dtype(x) == torch.float32 and \
            isinstance(x.args[0], fx.Node) and isinstance(val(x.args[0]), torch.Tensor) and \
            dtype(x.args[0]) in (torch.float16, torch.bfloat16) and _users(x) <= inside and \
            set(x.kwargs) <= {"dtype"}:
        return x.args[0], [x]
    return x, []


def match(amax: fx.Node) -> SoftmaxMatch | None:
    """The softmax / log-softmax chain that starts at `amax`, when no intermediate is used outside it."""
    d = _one_dim(amax, "amax")
    if d is None or not isinstance(val(amax), torch.Tensor) or dtype(amax) not in (torch.float32,):
        return None
    x = amax.args[0]
    if rank(x) == 0:
        return None
    subs = [u for u in amax.users if packet(u) == "sub" and u.args[:2] == (x, amax) and not u.kwargs]
    if len(amax.users) != 1 or len(subs) != 1:
        return None
    sub = subs[0]
    exps = [u for u in sub.users if packet(u) == "exp"]
    if len(exps) != 1:
        return None
    exp = exps[0]
    sums = [u for u in exp.users if _one_dim(u, "sum") == d]
    if len(sums) != 1 or dtype(sums[0]) != torch.float32:
        return None
    ssum = sums[0]
    if len(ssum.users) != 1:
        return None
    (nxt,) = ssum.users
    if packet(nxt) == "div" and nxt.args[:2] == (exp, ssum) and not nxt.kwargs and _users(exp) == {ssum, nxt} \
            and _users(sub) == {exp}:
        internal, out, log = [amax, sub, exp, ssum], nxt, False
    elif packet(nxt) == "log" and len(nxt.users) == 1 and _users(exp) == {ssum}:
        (last,) = nxt.users
        if packet(last) != "sub" or last.args[:2] != (sub, nxt) or last.kwargs or _users(sub) != {exp, last}:
            return None
        internal, out, log = [amax, sub, exp, ssum, nxt], last, True
    else:
        return None
    src, cast = _source(x, {amax, sub})
    if shape_key(out) != shape_key(x):
        return None
    return SoftmaxMatch(src, d, log, out, cast + internal)


def find_all(graph: fx.Graph) -> list[SoftmaxMatch]:
    out = []
    for node in graph.nodes:
        if node.op == "call_function" and packet(node) == "amax":
            m = match(node)
            if m is not None:
                out.append(m)
    return out


_PASS1 = [
    "m_i = tl.full([RED_BLOCK_M, RED_BLOCK_N], -float(\"inf\"), tl.float32)",
    "s_i = tl.zeros([RED_BLOCK_M, RED_BLOCK_N], tl.float32)",
    "for n0 in range(0, N, RED_BLOCK_N):",
    "    cols = n0 + tl.arange(0, RED_BLOCK_N)",
    "    m = rmask[:, None] & (cols[None, :] < N)",
    "    v = tl.load(x_ptr + roff[:, None] + cols[None, :] * x_sn, mask=m, other=-float(\"inf\")).to(tl.float32)",
    "    m_new = tl.maximum(m_i, v)",
    "    # a lane that has seen only -inf keeps a zero sum (exp(-inf - -inf) would be nan)",
    "    live = m_new != -float(\"inf\")",
    "    s_i = tl.where(live, s_i * tl.exp(m_i - m_new) + tl.exp(v - m_new), s_i)",
    "    s_i = tl.where(v != v, v, s_i)  # a nan in the row makes the row nan, as in eager",
    "    m_i = m_new",
    "mx = tl.max(m_i, axis=1)",
    "s = tl.sum(tl.where(m_i == -float(\"inf\"), 0.0, s_i * tl.exp(m_i - mx[:, None])), axis=1)",
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
    formula = "y = (v - mx[:, None]) - tl.log(s)[:, None]" if sm.log else "y = tl.exp(v - mx[:, None]) / s[:, None]"
    lines = RED_ROWS + _PASS1 + _PASS2_HEAD + indent([formula] + body.lines + store_lines(body, "off", "m"))
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
