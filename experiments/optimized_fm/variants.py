"""Lab book, frozen: ran at commit 0c56eac as `case_studies.optimized_fm.variants`; results:
results/case_studies/optimized_fm/explore_small_n/, proton_n24/ (the kernels explore_small_n.py and profile_n24.py
time).
Nothing imports this file and it is not maintained: its imports name the modules as they were at 0c56eac;
to re-run it, check that commit out. The maintained benchmark is `benchmarks/case_studies/run.py`.

Exploration kernels for Optimized FM at small N (not the shipped kernel; see kernel.py).

* `empty_kernel`, `read_kernel`: the timing harness's floor (an empty launch, and one read of X with a
  tiny output), timed exactly as the FM kernels are.
* `fm_stream_kernel`: the batch walked by a small grid (`grid` programs, each taking batch elements
  pid, pid + grid, ...), the whole `X[b]` loaded in one piece, and either Triton's software pipeline
  (`tl.range(num_stages=STAGES)`: STAGES - 1 loads of X in flight ahead of the products) or a manual
  one-ahead register prefetch (`PREFETCH`). `TRANSPOSED` computes `T^T = Y^T X` and `out^T = T^T X^T`
  (X is then the natural B operand of the first product).
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl


@triton.jit
def empty_kernel(out_ptr):
    pass


@triton.jit
def read_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    v = tl.load(x_ptr + offs, mask=offs < n, other=0.0).to(tl.float32)
    tl.store(out_ptr + pid, tl.sum(v, axis=0))


@triton.jit
def fm_stream_kernel(
    x_ptr, y_ptr, out_ptr,
    B, N, D, K,
    x_stride_b, x_stride_n, x_stride_d,
    y_stride_n, y_stride_k,
    o_stride_b, o_stride_n, o_stride_k,
    BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, D_POW2: tl.constexpr, UPCAST_DOT: tl.constexpr,
    DOT_PRECISION: tl.constexpr,
    STAGES: tl.constexpr, TRANSPOSED: tl.constexpr, PREFETCH: tl.constexpr,
):
    pid = tl.program_id(0)
    nprog = tl.num_programs(0)
    rn = tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    rd = tl.arange(0, D_POW2)
    n_mask = rn < N
    nk_mask = n_mask[:, None] & (rk < K)[None, :]
    y = tl.load(y_ptr + rn[:, None] * y_stride_n + rk[None, :] * y_stride_k, mask=nk_mask, other=0.0)
    if UPCAST_DOT:
        y = y.to(tl.float32)
    yt = tl.trans(y)
    x_offs = rn[:, None] * x_stride_n + rd[None, :] * x_stride_d
    xd_mask = n_mask[:, None] & (rd < D)[None, :]
    o_offs = rn[:, None] * o_stride_n + rk[None, :] * o_stride_k
    if PREFETCH:
        x_next = tl.load(x_ptr + pid.to(tl.int64) * x_stride_b + x_offs, mask=xd_mask & (pid < B), other=0.0)
    for b in tl.range(pid, B, nprog, num_stages=STAGES):
        if PREFETCH:
            x = x_next
            x_next = tl.load(x_ptr + tl.cast(b + nprog, tl.int64) * x_stride_b + x_offs,
                             mask=xd_mask & (b + nprog < B), other=0.0)
        else:
            x = tl.load(x_ptr + tl.cast(b, tl.int64) * x_stride_b + x_offs, mask=xd_mask, other=0.0)
        if UPCAST_DOT:
            x = x.to(tl.float32)
        if TRANSPOSED:
            tt = tl.dot(yt, x, input_precision=DOT_PRECISION)                   # [BLOCK_K, D_POW2]
            tt = tt.to(x_ptr.dtype.element_ty)
            if UPCAST_DOT:
                tt = tt.to(tl.float32)
            acc = tl.trans(tl.dot(tt, tl.trans(x), input_precision=DOT_PRECISION))  # [BLOCK_N, BLOCK_K]
        else:
            t = tl.dot(tl.trans(x), y, input_precision=DOT_PRECISION)          # [D_POW2, BLOCK_K]
            t = t.to(x_ptr.dtype.element_ty)
            if UPCAST_DOT:
                t = t.to(tl.float32)
            acc = tl.dot(x, t, input_precision=DOT_PRECISION)
        tl.store(out_ptr + tl.cast(b, tl.int64) * o_stride_b + o_offs, acc.to(out_ptr.dtype.element_ty), mask=nk_mask)


def fm_stream(x: torch.Tensor, y: torch.Tensor, *, grid: int, stages: int = 3, transposed: bool = False,
              prefetch: bool = False, num_warps: int = 4, out: torch.Tensor | None = None) -> torch.Tensor:
    """Launch `fm_stream_kernel` through Triton's own path (exploration only: no launch cache)."""
    import os

    bsz, n, d = x.shape
    k = y.shape[1]
    if out is None:
        out = torch.empty((bsz, n, k), dtype=x.dtype, device=x.device)
    fm_stream_kernel[(min(grid, bsz),)](
        x, y, out, bsz, n, d, k, *x.stride(), *y.stride(), *out.stride(),
        BLOCK_N=max(16, triton.next_power_of_2(n)), BLOCK_K=max(16, triton.next_power_of_2(k)),
        D_POW2=max(16, triton.next_power_of_2(d)),
        UPCAST_DOT=x.dtype == torch.bfloat16 and os.environ.get("TRITON_INTERPRET") == "1",
        DOT_PRECISION="ieee" if x.dtype == torch.float32 else "tf32",
        STAGES=stages, TRANSPOSED=transposed, PREFETCH=prefetch, num_warps=num_warps, num_stages=stages)
    return out
