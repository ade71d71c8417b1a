"""WuKong Optimized FM in one Triton kernel (KernelEvolve section 5.3.1).

    out[b] = X[b] @ (X[b]^T @ Y),   X `[B, N, D]`, Y `[N, K]`, out `[B, N, K]`

PyTorch runs two batched matmuls and writes the `[B, D, K]` intermediate to memory and reads it back.
Here one program owns `BLOCK_B` batch elements; Y stays in registers for all of them, and the D x K
intermediate never leaves the chip. The D loop is exact, not an approximation: row d of
`T = X^T @ Y` depends only on column d of X, so

    out[b] = sum over D-chunks c of  X[b][:, c] @ (X[b][:, c]^T @ Y)

and each X element is loaded once, used by both products, and dropped. Accumulation is fp32; the
intermediate chunk is rounded to X's dtype before the second product, as PyTorch's bmm output is.

Probe regions (PROBES=True): `load_x`, `xty`, `x_t`, `store`.

Loop structures (`BLOCK_D >= D`, the whole `X[b]` in one tile):
* `PIPELINE=True`: the `cdiv(B, BLOCK_B)` programs walk the batch with a stride (b = pid, pid + grid, ...)
  in a loop that Triton software-pipelines (`num_stages - 1` loads of X in flight, through cp.async into
  shared memory, ahead of the products). On the H200 at N 24 this beat the chunked kernel (kernel time 7.4
  against 8.3 us under Proton,
  `results/case_studies/optimized_fm/explore_small_n/explore_small_n.json`).
* `PIPELINE=False`: `BLOCK_B` consecutive elements a program, the next one's load issued by hand before
  this one's products (registers, not shared memory).
`TRANSPOSED=True` computes `T^T = Y^T X` and `out^T = T^T X^T`: X, as loaded, is then the B operand of
both products (one shared-memory layout for both uses instead of two; fewer registers).
"""
from __future__ import annotations

import os

import torch
import triton
import triton.language as tl
from torch import nn

from case_studies.common.contenders import torch_dtype
from case_studies.common.launch import LaunchCache, aligned16
from case_studies.common.timing import graph_autotune_bench

try:  # probes are compiled away unless PROBES=True; the interpreter lacks the semantic
    import triton.profiler.language as pl

    pl.enable_semantic("triton")
except Exception:  # pragma: no cover - depends on the triton build
    pl = None

# -- tunables, declared as data (docs/CONTRACTS.md) ---------------------------------------------------
TUNABLES = {"BLOCK_D": [16, 32, 64, 128, 256], "BLOCK_B": [1, 2, 4, 8], "PIPELINE": [False, True],
            "TRANSPOSED": [False, True], "NUM_WARPS": [1, 2, 4, 8], "NUM_STAGES": [1, 2, 3, 4]}
BLOCK_D = 256         # the best streaming config at N 24 K 16 on the H200 (explore_small_n/)
BLOCK_B = 4
PIPELINE = True
TRANSPOSED = True
NUM_WARPS = 4
NUM_STAGES = 3
AUTOTUNE_WARMUP_MS = 5
AUTOTUNE_REP_MS = 20
AUTOTUNE = True       # on a GPU, tune over autotune_configs(); the constants are the interpreter's config

AUTOTUNE_SPACE = [
    # BLOCK_D, BLOCK_B, PIPELINE, TRANSPOSED, num_warps, num_stages. BLOCK_D >= D (256 at D 224) loads a
    # whole X[b] at once: one memory round trip per batch element instead of D / BLOCK_D dependent ones.
    # Streaming, pipelined (explore_small_n.json: best at N 8 with 2 elements a program, N 24 and 40 with 4)
    (256, 2, True, True, 4, 3), (256, 4, True, True, 4, 3), (256, 4, True, False, 4, 3),
    (256, 8, True, True, 4, 3),
    # consecutive elements, manual prefetch (the pick at N 64 K 16 before the streaming loop existed)
    (256, 1, False, False, 4, 1), (256, 2, False, False, 4, 2), (256, 4, False, False, 4, 2),
    # D in chunks (large N: the whole X[b] no longer fits the pipeline's shared memory)
    (128, 1, False, False, 4, 2), (64, 1, False, False, 4, 3), (64, 1, False, False, 8, 3),
    (32, 1, False, False, 4, 2),
]
REG_BUDGET = 160      # estimated 32-bit registers a thread for the live tiles (see tunables_valid)
SMEM_BUDGET = 160 * 1024   # bytes of pipelined X tiles a program (the H200 has 227 KB a block)
PIPELINE_REG_BUDGET = 200  # the same estimate without the X tile, for the streaming configs


def tunables_valid(cfg: dict) -> bool:
    return cfg["BLOCK_D"] * cfg["NUM_WARPS"] <= 2048


def tile_registers(block_n: int, block_k: int, block_d: int, num_warps: int, elem_bytes: int = 2) -> float:
    """Registers a thread for the live tiles: X chunk (two 16-bit values a register), the fp32 D x K
    intermediate, the fp32 accumulator and Y. (ptxas took minutes on fp32 one-shot tiles that spill.)"""
    return (block_n * block_d * elem_bytes / 4 + block_d * block_k + block_n * block_k * 1.5) / (32 * num_warps)


def pipeline_smem(block_n: int, block_d: int, num_stages: int, elem_bytes: int = 2) -> int:
    """Shared memory of the pipelined X tiles: num_stages buffers of BLOCK_N x BLOCK_D."""
    return num_stages * block_n * block_d * elem_bytes


def pipeline_fits(block_n: int, block_k: int, d_pow2: int, cfg: triton.Config, elem_bytes: int) -> bool:
    """A streaming config: whole rows only, 16-bit inputs (fp32's IEEE products are not tensor-core dots),
    the X buffers within SMEM_BUDGET, and the registers without the X tile (it stays in shared memory)
    within PIPELINE_REG_BUDGET (estimate 176 -> 240 registers seen, no spills, at N 64 K 64)."""
    regs = tile_registers(block_n, block_k, d_pow2, cfg.num_warps, elem_bytes) \
        - block_n * d_pow2 * elem_bytes / 4 / (32 * cfg.num_warps)
    return (elem_bytes == 2 and cfg.kwargs["BLOCK_D"] >= d_pow2 and regs <= PIPELINE_REG_BUDGET
            and pipeline_smem(block_n, d_pow2, cfg.num_stages, elem_bytes) <= SMEM_BUDGET)


def autotune_configs() -> list[triton.Config]:
    return [triton.Config({"BLOCK_D": bd, "BLOCK_B": bb, "PIPELINE": pipe, "TRANSPOSED": tr}, num_warps=nw,
                          num_stages=ns)
            for bd, bb, pipe, tr, nw, ns in AUTOTUNE_SPACE
            if tunables_valid({"BLOCK_D": bd, "BLOCK_B": bb, "NUM_WARPS": nw})]


def prune_configs(configs: list[triton.Config], named_args: dict, **kwargs) -> list[triton.Config]:
    """Drop chunks wider than the padded D (they equal the one-shot config), tiles that would spill, and
    pipelines whose X tiles overflow shared memory."""
    a = {**named_args, **kwargs}          # the wrapper passes everything by keyword
    d_pow2, bn, bk = a["D_POW2"], a["BLOCK_N"], a["BLOCK_K"]
    e = a["x_ptr"].element_size() if "x_ptr" in a else a.get("ELEM_BYTES", 2)
    cs = [c for c in configs if c.kwargs["BLOCK_D"] <= d_pow2
          and (c.kwargs.get("PIPELINE") or tile_registers(bn, bk, c.kwargs["BLOCK_D"], c.num_warps, e) <= REG_BUDGET)
          and (not c.kwargs.get("PIPELINE") or pipeline_fits(bn, bk, d_pow2, c, e))]
    return cs or [min(configs, key=lambda c: tile_registers(bn, bk, c.kwargs["BLOCK_D"], c.num_warps, e))]


def configs_for(params: dict, dtype: str = "float16") -> list[dict]:
    """The autotune configs the pruner keeps for a shape (`B`, `N`, `D`, `K`), as config dicts."""
    meta = dict(BLOCK_N=max(16, triton.next_power_of_2(params["N"])),
                BLOCK_K=max(16, triton.next_power_of_2(params["K"])),
                D_POW2=max(16, triton.next_power_of_2(params["D"])))
    return [{**c.kwargs, "num_warps": c.num_warps, "num_stages": c.num_stages}
            for c in prune_configs(autotune_configs(), {}, **params, **meta,
                                   ELEM_BYTES=4 if dtype == "float32" else 2)]


@triton.jit
def _optimized_fm_kernel(
    x_ptr, y_ptr, out_ptr,
    B, N, D, K,
    x_stride_b, x_stride_n, x_stride_d,
    y_stride_n, y_stride_k,
    o_stride_b, o_stride_n, o_stride_k,
    BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, D_POW2: tl.constexpr, UPCAST_DOT: tl.constexpr,
    DOT_PRECISION: tl.constexpr,
    BLOCK_D: tl.constexpr, BLOCK_B: tl.constexpr, PIPELINE: tl.constexpr, TRANSPOSED: tl.constexpr,
    PROBES: tl.constexpr = False,
):
    pid = tl.program_id(0)
    rn = tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    rd = tl.arange(0, BLOCK_D)
    n_mask = rn < N
    k_mask = rk < K
    nk_mask = n_mask[:, None] & k_mask[None, :]
    # Y is shared by the whole batch: load it once per program.
    y = tl.load(y_ptr + rn[:, None] * y_stride_n + rk[None, :] * y_stride_k, mask=nk_mask, other=0.0)
    if UPCAST_DOT:  # Triton 3.6's interpreter computes bf16 dots wrongly; bf16 -> fp32 is exact
        y = y.to(tl.float32)
    x_offs = rn[:, None] * x_stride_n + rd[None, :] * x_stride_d
    b0 = pid * BLOCK_B
    # Batch elements past B are masked, not branched around.
    if BLOCK_D >= D_POW2 and PIPELINE:
        # Stream the batch with a stride of the grid; Triton pipelines the loop (num_stages - 1 whole-X[b]
        # loads in flight through shared memory while this element's products run).
        xd_mask = n_mask[:, None] & (rd < D)[None, :]
        o_offs = rn[:, None] * o_stride_n + rk[None, :] * o_stride_k
        yt = tl.trans(y)
        for b in tl.range(pid, B, tl.num_programs(0)):
            if PROBES:
                pl.enter_scope("load_x")
            x = tl.load(x_ptr + tl.cast(b, tl.int64) * x_stride_b + x_offs, mask=xd_mask, other=0.0)
            if PROBES:
                pl.exit_scope("load_x")
                pl.enter_scope("xty")
            if UPCAST_DOT:
                x = x.to(tl.float32)
            if TRANSPOSED:
                t = tl.dot(yt, x, input_precision=DOT_PRECISION)                      # [BLOCK_K, BLOCK_D]
            else:
                t = tl.dot(tl.trans(x), y, input_precision=DOT_PRECISION)             # [BLOCK_D, BLOCK_K]
            t = t.to(x_ptr.dtype.element_ty)        # PyTorch rounds the intermediate to X's dtype
            if UPCAST_DOT:
                t = t.to(tl.float32)
            if PROBES:
                pl.exit_scope("xty")
                pl.enter_scope("x_t")
            if TRANSPOSED:
                acc = tl.trans(tl.dot(t, tl.trans(x), input_precision=DOT_PRECISION))  # [BLOCK_N, BLOCK_K]
            else:
                acc = tl.dot(x, t, input_precision=DOT_PRECISION)
            if PROBES:
                pl.exit_scope("x_t")
                pl.enter_scope("store")
            tl.store(out_ptr + tl.cast(b, tl.int64) * o_stride_b + o_offs, acc.to(out_ptr.dtype.element_ty),
                     mask=nk_mask)
            if PROBES:
                pl.exit_scope("store")
    elif BLOCK_D >= D_POW2:
        # The whole X[b] in one load (D 224: 10.5 KB at N 24): one memory round trip per batch element,
        # and with BLOCK_B > 1 the next element's load is issued before this one's products.
        xd_mask = n_mask[:, None] & (rd < D)[None, :]
        if PROBES:
            pl.enter_scope("load_x")
        x_next = tl.load(x_ptr + b0.to(tl.int64) * x_stride_b + x_offs, mask=xd_mask & (b0 < B), other=0.0)
        if PROBES:
            pl.exit_scope("load_x")
        for i in range(0, BLOCK_B):
            b = b0 + i
            x = x_next
            if BLOCK_B > 1:
                if PROBES:
                    pl.enter_scope("load_x")
                x_next = tl.load(x_ptr + (b + 1).to(tl.int64) * x_stride_b + x_offs,
                                 mask=xd_mask & (b + 1 < B) & (i + 1 < BLOCK_B), other=0.0)
                if PROBES:
                    pl.exit_scope("load_x")
            if PROBES:
                pl.enter_scope("xty")
            if UPCAST_DOT:  # Triton 3.6's interpreter computes bf16 dots wrongly; bf16 -> fp32 is exact
                x = x.to(tl.float32)
            t = tl.dot(tl.trans(x), y, input_precision=DOT_PRECISION)                 # [BLOCK_D, BLOCK_K]
            t = t.to(x_ptr.dtype.element_ty)        # PyTorch rounds the intermediate to X's dtype
            if UPCAST_DOT:
                t = t.to(tl.float32)
            if PROBES:
                pl.exit_scope("xty")
                pl.enter_scope("x_t")
            acc = tl.dot(x, t, input_precision=DOT_PRECISION)                         # [BLOCK_N, BLOCK_K]
            if PROBES:
                pl.exit_scope("x_t")
                pl.enter_scope("store")
            o_ptrs = out_ptr + b.to(tl.int64) * o_stride_b + rn[:, None] * o_stride_n + rk[None, :] * o_stride_k
            tl.store(o_ptrs, acc.to(out_ptr.dtype.element_ty), mask=nk_mask & (b < B))
            if PROBES:
                pl.exit_scope("store")
    else:
        for i in range(0, BLOCK_B):
            b = b0 + i
            b_ok = b < B
            x_row = x_ptr + b.to(tl.int64) * x_stride_b
            acc = tl.zeros((BLOCK_N, BLOCK_K), dtype=tl.float32)
            for d0 in range(0, D, BLOCK_D):
                d = d0 + rd
                if PROBES:
                    pl.enter_scope("load_x")
                x = tl.load(x_row + x_offs + d0 * x_stride_d, mask=(n_mask[:, None] & (d < D)[None, :]) & b_ok,
                            other=0.0)                                                  # [BLOCK_N, BLOCK_D]
                if PROBES:
                    pl.exit_scope("load_x")
                    pl.enter_scope("xty")
                if UPCAST_DOT:
                    x = x.to(tl.float32)
                t = tl.dot(tl.trans(x), y, input_precision=DOT_PRECISION)
                t = t.to(x_ptr.dtype.element_ty)
                if UPCAST_DOT:
                    t = t.to(tl.float32)
                if PROBES:
                    pl.exit_scope("xty")
                    pl.enter_scope("x_t")
                acc = tl.dot(x, t, acc, input_precision=DOT_PRECISION)
                if PROBES:
                    pl.exit_scope("x_t")
            if PROBES:
                pl.enter_scope("store")
            o_ptrs = out_ptr + b.to(tl.int64) * o_stride_b + rn[:, None] * o_stride_n + rk[None, :] * o_stride_k
            tl.store(o_ptrs, acc.to(out_ptr.dtype.element_ty), mask=nk_mask & b_ok)
            if PROBES:
                pl.exit_scope("store")


# Configs are timed as the recorded benchmark times kernels: CUDA-graph replays with the L2 flushed before
# each (`graph_autotune_bench(cold_l2=True)`). With Triton's `do_bench` (plain launches through the
# autotuned launch path) the pick at N 24 K 16 changed between two calls of the same commit: the
# transposed streaming loop (10.82 us) in one (gpu_ab/fm_ab1.json), the untransposed one (11.52 us there,
# 11.58 in that run: gpu_ab/run_75b3dde_*) in the next (results/case_studies/optimized_fm/). With this
# timer every fp16 shape's pick was the A/B's fastest config (gpu_ab/fm_ab2.json, commit e6f9b02).
# Warm-L2 graph timing is no substitute here: X (11 MB at N 24) fits in the 50 MB L2, and a kernel timed
# on a warm L2 is not the one the benchmark measures.
_autotune_bench = graph_autotune_bench(AUTOTUNE_REP_MS, AUTOTUNE_WARMUP_MS, cold_l2=True)


_optimized_fm_autotuned = triton.autotune(configs=autotune_configs(), key=["N", "D", "K"],
                                          prune_configs_by={"early_config_prune": prune_configs},
                                          do_bench=_autotune_bench)(_optimized_fm_kernel)
_plans = LaunchCache(_optimized_fm_kernel, n_tensors=3)


# Pinned configs by exact shape (B, N, D, K, dtype), where the autotuner's pick measured slower than another
# config of its own list in a same-call A/B (results/case_studies/optimized_fm/gpu_ab/fm_ab1.json, commit
# a50329f: every config the pruner keeps, CUDA-graph replays, L2 flushed, 3 interleaved rounds; the
# autotuner times plain launches). N 40 K 16: 12.99 us against the pick's 13.76 (no-pipeline, 4
# elements); N 24 K 32: 13.31 against 14.02 (transposed streaming loop, 2 elements). At the other seven
# fp16 shapes of the benchmark the pick was the fastest config. Only the measured shapes are pinned.
# The production shape N 24 K 16 too: its pick flipped between calls (above, `_autotune_bench`); the
# transposed loop measured 10.82 us against 11.52 in the A/B and 10.85 in the recorded run at 587d1f6.
_STREAM4 = {"BLOCK_D": 256, "BLOCK_B": 4, "PIPELINE": True, "TRANSPOSED": False, "num_warps": 4, "num_stages": 3}
SHAPE_RULES: dict[tuple[int, int, int, int, torch.dtype], dict] = {
    (1024, 24, 224, 16, torch.float16): {**_STREAM4, "TRANSPOSED": True},
    (1024, 40, 224, 16, torch.float16): _STREAM4,
    (1024, 24, 224, 32, torch.float16): _STREAM4,
}


def rule_config(bsz: int, n: int, d: int, k: int, dtype: torch.dtype) -> dict | None:
    """The pinned config for a measured shape, or None (the autotuner decides)."""
    cfg = SHAPE_RULES.get((bsz, n, d, k, dtype))
    return dict(cfg) if cfg is not None else None


def fixed_config() -> dict:
    return {"BLOCK_D": BLOCK_D, "BLOCK_B": BLOCK_B, "PIPELINE": PIPELINE, "TRANSPOSED": TRANSPOSED,
            "num_warps": NUM_WARPS, "num_stages": NUM_STAGES}


def _constexprs(cfg: dict) -> dict:
    """The config's kernel arguments (everything but the launch options); streaming and orientation
    default to off for configs written before they existed."""
    return {"BLOCK_D": cfg["BLOCK_D"], "BLOCK_B": cfg["BLOCK_B"], "PIPELINE": cfg.get("PIPELINE", False),
            "TRANSPOSED": cfg.get("TRANSPOSED", False)}


def triton_optimized_fm(x: torch.Tensor, y: torch.Tensor, *, config: dict | None = None,
                        autotune: bool | None = None, probes: bool = False) -> torch.Tensor:
    """`x @ (x^T @ y)` for x `[B, N, D]`, y `[N, K]` -> `[B, N, K]`, in one kernel.

    On a GPU the first call for a call signature validates, tunes (or takes `config`) and launches
    through Triton; it records the launch, and later calls with the same signature allocate the output
    and go straight to the compiled launcher (launch.py: that cut is what plain launches pay for)."""
    if x.is_cuda:
        key = (x.shape, y.shape, x.stride(), y.stride(), x.dtype, y.dtype, torch.cuda.current_device(),
               aligned16(x, y), autotune, probes, None if config is None else tuple(sorted(config.items())))
        plan = _plans.plans.get(key)
        if plan is not None:
            out = x.new_empty((x.shape[0], x.shape[1], y.shape[1]))
            plan.launch((x, y, out))
            return out
    else:
        key = None
    if x.dim() != 3 or y.dim() != 2 or y.shape[0] != x.shape[1]:
        raise ValueError(f"expected x [B, N, D] and y [N, K]; got {tuple(x.shape)}, {tuple(y.shape)}")
    if x.dtype != y.dtype:
        raise TypeError(f"x and y must share a dtype; got {x.dtype}, {y.dtype}")
    bsz, n, d = x.shape
    k = y.shape[1]
    out = torch.empty((bsz, n, k), dtype=x.dtype, device=x.device)
    if out.numel() == 0:
        return out
    named = dict(zip(("x_ptr", "y_ptr", "out_ptr", "B", "N", "D", "K", "x_stride_b", "x_stride_n",
                      "x_stride_d", "y_stride_n", "y_stride_k", "o_stride_b", "o_stride_n", "o_stride_k"),
                     (x, y, out, bsz, n, d, k, *x.stride(), *y.stride(), *out.stride()), strict=True))
    # tl.dot needs every dimension >= 16
    meta = dict(BLOCK_N=max(16, triton.next_power_of_2(n)), BLOCK_K=max(16, triton.next_power_of_2(k)),
                D_POW2=max(16, triton.next_power_of_2(d)), PROBES=probes,
                UPCAST_DOT=x.dtype == torch.bfloat16 and os.environ.get("TRITON_INTERPRET") == "1",
                # fp32 inputs: full-precision products (tl.dot would use TF32 and miss fp32's tolerance)
                DOT_PRECISION="ieee" if x.dtype == torch.float32 else "tf32")
    tuned = (AUTOTUNE if autotune is None else autotune) and config is None and x.is_cuda and not probes
    if tuned:
        config = rule_config(bsz, n, d, k, x.dtype)
        tuned = config is None
    if tuned:
        compiled = _optimized_fm_autotuned[lambda m: (triton.cdiv(bsz, m["BLOCK_B"]),)](**named, **meta)
        best = _optimized_fm_autotuned.best_config
        cfg = {**best.kwargs, "num_warps": best.num_warps, "num_stages": best.num_stages}
    else:
        cfg = dict(fixed_config(), **(config or {}))
        compiled = _optimized_fm_kernel[(triton.cdiv(bsz, cfg["BLOCK_B"]),)](
            **named, **meta, **_constexprs(cfg), num_warps=cfg["num_warps"], num_stages=cfg["num_stages"])
    if key is not None:
        _plans.record(key, compiled, (triton.cdiv(bsz, cfg["BLOCK_B"]),), {**named, **meta, **_constexprs(cfg)},
                      cfg)
    return out


def best_config() -> dict[tuple, dict]:
    return {k: {**c.kwargs, "num_warps": c.num_warps, "num_stages": c.num_stages}
            for k, c in _optimized_fm_autotuned.cache.items()}


class ModelNew(nn.Module):
    """The spec's Model with the two matmuls fused in Triton (same constructor, same parameter)."""

    def __init__(self, n: int, k: int, dtype: str = "float16"):
        super().__init__()
        self.proj = nn.Parameter(torch.randn(n, k, dtype=torch_dtype(dtype)) / n ** 0.5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return triton_optimized_fm(x, self.proj)


# The earlier name of `triton_optimized_fm`, kept while notebooks/case_studies/optimized_fm.ipynb still imports
# it (its owner moves it to `triton_optimized_fm`; then this line goes): the dispatching `optimized_fm` is
# `dispatch.optimized_fm`.
optimized_fm = triton_optimized_fm
