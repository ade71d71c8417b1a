"""logcumsumexp along one dim: a `tl.associative_scan` of log-add-exp, carried across chunks.

The scanned dim is moved last and the input viewed as [M, N] (as scan.py does for cumsum); a program owns
LSE_BLOCK_M rows and walks N in LSE_BLOCK_N chunks, combining each chunk's scan with the carry (the previous
chunk's last column). The combine is PyTorch's `_log_add_exp_helper`: max + log1p(exp(min - max)), and the
max itself where both are the same infinity (no inf - inf). fp32 accumulation, one rounding to the output.
"""
from __future__ import annotations

import torch
import torch.fx as fx

from workbench.lowering import pointwise as pw
from workbench.lowering.epilogue import Unsupported, torch_dtype
from workbench.lowering.graph import dtype, op_name, val
from workbench.lowering.primitives import Primitive, register, register_helper, register_tunables

TUNABLES = ("LSE_BLOCK_M", "LSE_BLOCK_N", "NUM_WARPS")
register_tunables({"LSE_BLOCK_M": ([1, 2, 4, 8], 4), "LSE_BLOCK_N": ([64, 128, 256, 512], 256)})

COMBINE = '''@triton.jit
def _logaddexp_combine(a, b):
    # PyTorch's _log_add_exp_helper: equal infinities (and -inf with -inf) give themselves, not nan
    mn = tl.minimum(a, b)
    mx = tl.maximum(a, b)
    r = mx + _log1p(tl.exp(mn - mx))
    r = tl.where((mn == mx) & (tl.abs(mn) == float("inf")), mx, r)
    return tl.where((a != a) | (b != b), a + b, r)
'''
register_helper("_logaddexp_combine", COMBINE)


def logcumsumexp_kernel(name: str, node: fx.Node, names: dict[fx.Node, str], expr) -> tuple[str, list[str], set[str]]:  # noqa: ANN001
    x = node.args[0]
    out_dt = dtype(node)
    if out_dt not in (torch.float32, torch.float16, torch.bfloat16):
        raise Unsupported(f"unsupported: {op_name(node)} on {out_dt}")
    r = max(val(x).dim(), 1)
    dim = node.args[1] % r
    used = {"_logaddexp_combine", "_log1p"}
    store = pw.narrow("c", out_dt, used) if out_dt != torch.float32 else "c"
    L = ["rows = tl.program_id(0).to(tl.int64) * LSE_BLOCK_M + tl.arange(0, LSE_BLOCK_M)", "rmask = rows < M",
         'carry = tl.full([LSE_BLOCK_M], -float("inf"), tl.float32)',
         "for n0 in range(0, N, LSE_BLOCK_N):",
         "    cols = n0 + tl.arange(0, LSE_BLOCK_N)",
         "    m = rmask[:, None] & (cols[None, :] < N)",
         "    v = tl.load(x_ptr + rows[:, None] * x_sm + cols[None, :] * x_sn, mask=m, "
         "other=-float(\"inf\")).to(tl.float32)",
         "    c = tl.associative_scan(v, 1, _logaddexp_combine)",
         "    c = _logaddexp_combine(carry[:, None] + tl.zeros_like(c), c)",
         f"    tl.store(out_ptr + rows[:, None] * N + cols[None, :], {store}, mask=m)",
         # the carry is the chunk's last column (a loop-carried tl.reduce stops sm_90's compile: scan.py)
         "    carry = tl.sum(tl.where(cols[None, :] == n0 + LSE_BLOCK_N - 1, c, 0.0), axis=1)"]
    sig = "x_ptr, out_ptr, M, N, x_sm, x_sn, LSE_BLOCK_M: tl.constexpr, LSE_BLOCK_N: tl.constexpr"
    doc = '    """logcumsumexp along the last axis of x viewed as [M, N], carried across chunks."""'
    src = "\n".join([f"@triton.jit\ndef {name}({sig}):", doc] + ["    " + ln for ln in L]) + "\n"
    xv, v = names[x], names[node]
    perm = [d for d in range(r) if d != dim] + [dim]
    inv = [perm.index(d) for d in range(r)]
    launch = [f"_xs = {xv}.reshape([1]) if {xv}.dim() == 0 else {xv}",
              f"_xp = _xs.permute({perm})", "_x = _xp.reshape(_numel(_xp.shape[:-1]), _xp.shape[-1])",
              "_M, _N = _x.shape",
              f"_o = torch.empty([_M, _N], dtype={torch_dtype(out_dt)}, device=dev)",
              f"if _M and _N: {name}[(triton.cdiv(_M, LSE_BLOCK_M),)](_x, _o, _M, _N, *_x.stride(), "
              "LSE_BLOCK_M=LSE_BLOCK_M, LSE_BLOCK_N=LSE_BLOCK_N, num_warps=NUM_WARPS)",
              f"{v} = _o.reshape(_xp.shape).permute({inv}).reshape({xv}.shape)"]
    return src, launch, used


register("logcumsumexp", Primitive("lse_scan", TUNABLES, logcumsumexp_kernel))
