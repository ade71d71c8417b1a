"""Exact (erf) GELU for the PFFN kernels, two ways of evaluating erf.

`FAST=False`: `tl.erf` (libdevice's erff). In the one-pass kernel's K loop at B 4096 (BLOCK_B 128,
BLOCK_KC 64, 8 warps; SASS of the sm_90 build) erff is about 30 instructions an element: a branchless
select between two polynomial sets, one predicated MOV per coefficient. It makes up roughly two thirds
of the loop's 1406 instructions (463 of them MOVs), against 20 HGMMA: the tensor cores wait on it.

`FAST=True`: `Phi(x) = 0.5 erfc(-x / sqrt 2)` with the Chebyshev-fitted erfc of Numerical Recipes
(`erfcc`, fractional error below 1.2e-7 for every argument): one reciprocal, one exp2, nine FMAs, no
select between coefficient sets. Checked on every fp16 input value (CPU, fp32 arithmetic): the same
largest absolute error against the float64 GELU as PyTorch's fp32 `F.gelu` (3.8e-7 vs 3.8e-7); after
rounding to fp16, 2% of the inputs land one ulp from PyTorch's result, all at rounding midpoints.
"""
from __future__ import annotations

import triton
import triton.language as tl


@triton.jit
def _rcp(v, PTX: tl.constexpr):
    # PTX: the single-instruction approximate form, flush-to-zero (no range fix-ups around the SFU op,
    # which Triton's fp32 `/` adds)
    if PTX:
        return tl.inline_asm_elementwise("rcp.approx.ftz.f32 $0, $1;", "=r,r", [v], dtype=tl.float32,
                                         is_pure=True, pack=1)
    else:
        return 1.0 / v


@triton.jit
def _exp2(v, PTX: tl.constexpr):
    if PTX:
        return tl.inline_asm_elementwise("ex2.approx.ftz.f32 $0, $1;", "=r,r", [v], dtype=tl.float32,
                                         is_pure=True, pack=1)
    else:
        return tl.exp2(v)


@triton.jit
def gelu(x, FAST: tl.constexpr):
    """GELU of fp32 `x`. FAST 0: libdevice erff; 1: the erfc fit; 2: the erfc fit with PTX approximate
    reciprocal and exp2 (GPU only: the interpreter cannot run inline PTX)."""
    if FAST > 0:
        z = tl.abs(x) * 0.7071067811865476
        t = _rcp(1.0 + 0.5 * z, FAST == 2)
        p = -1.26551223 + t * (1.00002368 + t * (0.37409196 + t * (0.09678418 + t * (
            -0.18628806 + t * (0.27886807 + t * (-1.13520398 + t * (1.48851587 + t * (
                -0.82215223 + t * 0.17087277))))))))
        e = 0.5 * t * _exp2((p - z * z) * 1.4426950408889634, FAST == 2)   # Phi(-|x|) = erfc(|x|/sqrt2)/2
        return x * tl.where(x >= 0, 1.0 - e, e)
    else:
        return 0.5 * x * (1.0 + tl.erf(x * 0.7071067811865476))
