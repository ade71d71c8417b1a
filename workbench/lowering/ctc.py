"""ctc_loss's negative log likelihood per batch element: the CTC forward (alpha) recursion in log space, one program
per batch element.

ATen's `_ctc_loss` also returns log_alpha [N, T, 2 * max(target_lengths) + 1], whose size depends on the
target lengths' values, so the trace stops there. capture.py writes F.ctc_loss / torch.ctc_loss as this op,
`workbench::ctc_nll(log_probs, targets, offsets, input_lengths, target_lengths, blank)` -> nll [N], each
element's first target at `offsets[n]` of the contiguous targets (padded [N, S] targets: n * S; concatenated
ones: the exclusive cumsum of target_lengths), then zero_infinity and the reduction in ordinary ops.

The kernel follows ATen's LossCTC.cpp: the extended label l'(s) is the blank at even s and target (s - 1) / 2 at
odd s, for s < 2L + 1; alpha_0 is log_probs[0, n, l'(s)] for s < 2, -inf elsewhere; each step takes
log(e^a(s) + e^a(s-1) + e^a(s-2)) (the s - 2 term where l'(s) is no blank and differs from l'(s - 2)) with the
max subtracted (0 when all are -inf), plus log_probs[t, n, l'(s)]; nll = -logaddexp(a(2L), a(2L - 1)) at
t = input_length - 1; an empty input gives 0 for an empty target, else inf. The states s live in registers
(S_BLOCK = next_power_of_2(2 W + 1), W the targets' last dim: a padded row or all concatenated targets); the
neighbours s - 1 and s - 2 are read back from a two-row scratch in global memory (written, a barrier, read),
computed in fp32 and stored in log_probs' dtype.
"""
from __future__ import annotations

import torch
import torch.fx as fx

from workbench.lowering.epilogue import Unsupported, torch_dtype
from workbench.lowering.graph import dtype, op_name, val
from workbench.lowering.primitives import Primitive, register

TUNABLES = ("NUM_WARPS",)
MAX_STATES = 16384  # 2 * targets + 1 held in one program's registers


@torch.library.custom_op("workbench::ctc_nll", mutates_args=())
def ctc_nll(log_probs: torch.Tensor, targets: torch.Tensor, offsets: torch.Tensor, input_lengths: torch.Tensor,
            target_lengths: torch.Tensor, blank: int) -> torch.Tensor:
    """Eager form (the trace uses only the fake one): torch.ctc_loss per element, reduction none."""
    out = []
    for b in range(log_probs.shape[1]):
        o, n = int(offsets[b]), int(target_lengths[b])
        tgt = targets.reshape(-1)[o:o + n].reshape(1, n)
        out.append(torch.ctc_loss(log_probs[:, b:b + 1], tgt, [int(input_lengths[b])], [n], blank, 0))
    return torch.cat(out) if out else log_probs.new_empty((0,))


@ctc_nll.register_fake
def _(log_probs: torch.Tensor, targets: torch.Tensor, offsets: torch.Tensor, input_lengths: torch.Tensor,
      target_lengths: torch.Tensor, blank: int) -> torch.Tensor:
    return log_probs.new_empty((log_probs.shape[1],))


SRC = '''@triton.jit
def __KNAME__(lp_ptr, tg_ptr, off_ptr, il_ptr, tl_ptr, a_ptr, out_ptr, lp_st, lp_sn, lp_sc, BLANK,
              S_BLOCK: tl.constexpr):
    """nll[n] = -log p(targets[n] | log_probs[:, n]): the CTC alpha recursion over the 2L + 1 extended labels."""
    n = tl.program_id(0).to(tl.int64)
    T = tl.load(il_ptr + n).to(tl.int64)
    L = tl.load(tl_ptr + n).to(tl.int64)
    off = tl.load(off_ptr + n).to(tl.int64)
    s = tl.arange(0, S_BLOCK)
    sm = s < 2 * L + 1
    odd = (s % 2) == 1
    k = (s - 1) // 2
    lab = tl.where(odd & sm, tl.load(tg_ptr + off + k, mask=odd & sm, other=0).to(tl.int64), BLANK)
    prev = tl.load(tg_ptr + off + k - 1, mask=odd & sm & (s >= 3), other=0).to(tl.int64)
    skip = odd & sm & (s >= 3) & (lab != prev)
    NEG = float("-inf")
    base = lp_ptr + n * lp_sn + lab * lp_sc
    alpha = tl.load(base, mask=sm & (s < 2) & (T > 0), other=NEG).to(tl.float32)
    scratch = a_ptr + n * (2 * S_BLOCK) + s
    tl.store(scratch, alpha)
    for t in range(1, T):
        tl.debug_barrier()
        rd = scratch + ((t - 1) % 2) * S_BLOCK
        a1 = tl.load(rd - 1, mask=s >= 1, other=NEG)
        a2 = tl.load(rd - 2, mask=skip, other=NEG)
        m = tl.maximum(alpha, tl.maximum(a1, a2))
        m = tl.where(m == NEG, 0.0, m)
        lse = tl.log(tl.exp(alpha - m) + tl.exp(a1 - m) + tl.exp(a2 - m)) + m
        lpv = tl.load(base + t * lp_st, mask=sm, other=NEG).to(tl.float32)
        alpha = tl.where(sm, lse + lpv, NEG)
        tl.store(scratch + (t % 2) * S_BLOCK, alpha)
    l1 = tl.sum(tl.where(s == 2 * L, alpha, 0.0), axis=0)
    l2 = tl.sum(tl.where(s == 2 * L - 1, alpha, 0.0), axis=0)
    l2 = tl.where(L > 0, l2, NEG)
    m = tl.maximum(l1, l2)
    m = tl.where(m == NEG, 0.0, m)
    nll = -(tl.log(tl.exp(l1 - m) + tl.exp(l2 - m)) + m)
    nll = tl.where(T == 0, tl.where(L == 0, 0.0, float("inf")), nll)
    tl.store(out_ptr + n, nll.to(out_ptr.dtype.element_ty))
'''


def ctc_kernel(name: str, node: fx.Node, names: dict[fx.Node, str], expr) -> tuple[str, list[str], set[str]]:  # noqa: ANN001
    lp, tg, off, il, tlen = node.args[:5]
    blank = node.args[5] if len(node.args) > 5 else node.kwargs.get("blank", 0)
    dt = dtype(lp)
    if dt not in (torch.float32, torch.float16, torch.bfloat16):
        raise Unsupported(f"unsupported: {op_name(node)} on {dt}")
    width = val(tg).shape[-1] if val(tg).dim() else 1
    if isinstance(width, int) and 2 * width + 1 > MAX_STATES:
        raise Unsupported(f"unsupported: {op_name(node)} with {width} targets per element (> {MAX_STATES // 2})")
    lv, tv, ov, iv, nv, v = (names[a] for a in (lp, tg, off, il, tlen, node))
    launch = [f"_N = {lv}.shape[1]",
              f"{v} = torch.empty([_N], dtype={torch_dtype(dt)}, device=dev)",
              f"_SB = triton.next_power_of_2(2 * {tv}.shape[-1] + 1)",
              "_scratch = torch.empty([max(_N, 1) * 2 * _SB], dtype=torch.float32, device=dev)",
              f"if _N: {name}[(_N,)]({lv}, {tv}, {ov}, {iv}, {nv}, _scratch, {v}, *{lv}.stride(), {expr(blank)}, "
              "S_BLOCK=_SB, num_warps=NUM_WARPS)"]
    return SRC.replace("__KNAME__", name), launch, set()


register("ctc_nll", Primitive("ctc", TUNABLES, ctc_kernel))
