"""Demo kernels carrying named Proton probe regions behind `PROBES: tl.constexpr` (docs/CONTRACTS.md).

The same kernel runs uninstrumented (PROBES=False, the default), instrumented on a GPU (PROBES=True
inside `profiling.probe_session`) and in the CPU interpreter (PROBES=False: `pl.*` calls fail there).
Outside a probe session PROBES=True compiles the probes away, so it costs nothing.

Call `workbench.env.ensure_interpreter_if_no_gpu()` before importing this module on a CPU machine.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

try:
    import triton.profiler.language as pl

    pl.enable_semantic("triton")  # Proton accepts Triton-DSL probes only after this
except Exception:  # the interpreter or a Triton without Proton: kernels then run with PROBES=False only
    pl = None

SCALE_ADD_BLOCK = 1024
SOFTMAX_NUM_WARPS = 4
MATMUL_BLOCKS = {"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 64, "GROUP_M": 8}


@triton.jit
def scale_add_kernel(x_ptr, y_ptr, out_ptr, n, alpha, BLOCK: tl.constexpr, PROBES: tl.constexpr = False):
    """out[i] = alpha * silu(x[i]) * y[i] for i < n; x, y, out: [n] fp32, masked tail.

    Probe regions: load, compute, store.
    """
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    if PROBES:
        pl.enter_scope("load")
    x = tl.load(x_ptr + offs, mask=mask, other=0.0)
    y = tl.load(y_ptr + offs, mask=mask, other=0.0)
    if PROBES:
        pl.exit_scope("load")
        pl.enter_scope("compute")
    out = alpha * (x * tl.sigmoid(x)) * y
    if PROBES:
        pl.exit_scope("compute")
        pl.enter_scope("store")
    tl.store(out_ptr + offs, out, mask=mask)
    if PROBES:
        pl.exit_scope("store")


@triton.jit
def softmax_kernel(
    x_ptr, out_ptr, n_cols, x_stride_row, out_stride_row, BLOCK_N: tl.constexpr, PROBES: tl.constexpr = False
):
    """out[r, :] = softmax(x[r, :]) for one row per program; x, out: [n_rows, n_cols] fp32.

    Probe regions: load_row, reduce, store_row.
    """
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK_N)
    mask = cols < n_cols
    if PROBES:
        pl.enter_scope("load_row")
    x = tl.load(x_ptr + row * x_stride_row + cols, mask=mask, other=-float("inf"))
    if PROBES:
        pl.exit_scope("load_row")
        pl.enter_scope("reduce")
    x = x - tl.max(x, axis=0)
    num = tl.exp(x)
    out = num / tl.sum(num, axis=0)
    if PROBES:
        pl.exit_scope("reduce")
        pl.enter_scope("store_row")
    tl.store(out_ptr + row * out_stride_row + cols, out, mask=mask)
    if PROBES:
        pl.exit_scope("store_row")


@triton.jit
def matmul_kernel(
    a_ptr,
    b_ptr,
    c_ptr,
    M,
    N,
    K,
    a_stride_m,
    a_stride_k,
    b_stride_k,
    b_stride_n,
    c_stride_m,
    c_stride_n,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    GROUP_M: tl.constexpr,
    PROBES: tl.constexpr = False,
):
    """c = a @ b with a: [M, K], b: [K, N], c: [M, N]; fp32 accumulation, grouped tile order
    (Triton tutorial 03). Probes sit inside the K loop, so each launch records 2 * K / BLOCK_K
    region instances per warp: use a global or flush buffer for long K.

    Probe regions: load_tiles, mma, epilogue.
    """
    pid = tl.program_id(0)
    num_m = tl.cdiv(M, BLOCK_M)
    num_n = tl.cdiv(N, BLOCK_N)
    group = GROUP_M * num_n
    first_m = (pid // group) * GROUP_M
    size_m = min(num_m - first_m, GROUP_M)
    pid_m = first_m + ((pid % group) % size_m)
    pid_n = (pid % group) // size_m
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        if PROBES:
            pl.enter_scope("load_tiles")
        a = tl.load(
            a_ptr + rm[:, None] * a_stride_m + (k0 + rk)[None, :] * a_stride_k,
            mask=(rm[:, None] < M) & ((k0 + rk)[None, :] < K),
            other=0.0,
        )
        b = tl.load(
            b_ptr + (k0 + rk)[:, None] * b_stride_k + rn[None, :] * b_stride_n,
            mask=((k0 + rk)[:, None] < K) & (rn[None, :] < N),
            other=0.0,
        )
        if PROBES:
            pl.exit_scope("load_tiles")
            pl.enter_scope("mma")
        acc = tl.dot(a, b, acc)
        if PROBES:
            pl.exit_scope("mma")
    if PROBES:
        pl.enter_scope("epilogue")
    c = acc.to(c_ptr.dtype.element_ty)
    tl.store(
        c_ptr + rm[:, None] * c_stride_m + rn[None, :] * c_stride_n,
        c,
        mask=(rm[:, None] < M) & (rn[None, :] < N),
    )
    if PROBES:
        pl.exit_scope("epilogue")


def scale_add(
    x: torch.Tensor, y: torch.Tensor, alpha: float = 0.5, probes: bool = False, block: int = SCALE_ADD_BLOCK
) -> torch.Tensor:
    out = torch.empty_like(x)
    n = x.numel()
    scale_add_kernel[(triton.cdiv(n, block),)](x, y, out, n, alpha, BLOCK=block, PROBES=probes)
    return out


def scale_add_reference(x: torch.Tensor, y: torch.Tensor, alpha: float = 0.5) -> torch.Tensor:
    return alpha * torch.nn.functional.silu(x) * y


def softmax(x: torch.Tensor, probes: bool = False) -> torch.Tensor:
    n_rows, n_cols = x.shape
    out = torch.empty_like(x)
    softmax_kernel[(n_rows,)](
        x,
        out,
        n_cols,
        x.stride(0),
        out.stride(0),
        BLOCK_N=triton.next_power_of_2(n_cols),
        PROBES=probes,
        num_warps=SOFTMAX_NUM_WARPS,
    )
    return out


def softmax_reference(x: torch.Tensor) -> torch.Tensor:
    return torch.softmax(x, dim=-1)


def matmul(
    a: torch.Tensor,
    b: torch.Tensor,
    probes: bool = False,
    blocks: dict[str, int] | None = None,
    num_warps: int = 8,
    num_stages: int = 3,
) -> torch.Tensor:
    bl = dict(MATMUL_BLOCKS, **(blocks or {}))
    M, K = a.shape
    _, N = b.shape
    c = torch.empty((M, N), device=a.device, dtype=a.dtype)
    grid = (triton.cdiv(M, bl["BLOCK_M"]) * triton.cdiv(N, bl["BLOCK_N"]),)
    matmul_kernel[grid](
        a,
        b,
        c,
        M,
        N,
        K,
        a.stride(0),
        a.stride(1),
        b.stride(0),
        b.stride(1),
        c.stride(0),
        c.stride(1),
        PROBES=probes,
        num_warps=num_warps,
        num_stages=num_stages,
        **bl,
    )
    return c


def matmul_reference(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return (a.float() @ b.float()).to(a.dtype)


# Compile-time signatures (for checking on a CPU that the probes reach TTGIR; see profiling.probes).
SIGNATURES = {
    "scale_add_kernel": (
        {"x_ptr": "*fp32", "y_ptr": "*fp32", "out_ptr": "*fp32", "n": "i32", "alpha": "fp32"},
        {"BLOCK": SCALE_ADD_BLOCK},
    ),
    "softmax_kernel": (
        {
            "x_ptr": "*fp32",
            "out_ptr": "*fp32",
            "n_cols": "i32",
            "x_stride_row": "i32",
            "out_stride_row": "i32",
        },
        {"BLOCK_N": 1024},
    ),
    "matmul_kernel": (
        {
            "a_ptr": "*fp16",
            "b_ptr": "*fp16",
            "c_ptr": "*fp16",
            "M": "i32",
            "N": "i32",
            "K": "i32",
            "a_stride_m": "i32",
            "a_stride_k": "i32",
            "b_stride_k": "i32",
            "b_stride_n": "i32",
            "c_stride_m": "i32",
            "c_stride_n": "i32",
        },
        dict(MATMUL_BLOCKS),
    ),
}
KERNELS = {
    "scale_add_kernel": scale_add_kernel,
    "softmax_kernel": softmax_kernel,
    "matmul_kernel": matmul_kernel,
}
