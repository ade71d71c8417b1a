"""WuKong Optimized FM (KernelEvolve section 5.3.1), KernelBench format. `Model` is PyTorch's two
batched matmuls, `X @ (X^T @ Y)`.

Production: B 1024, D 224, N from 8 to 128, K in {16, 32, 64}, FP16 and BF16; the named shapes are the
three the issue measured PyTorch at. X is scaled by D^-1/4 so outputs are of order 1 (the tolerances
are then absolute errors on unit-sized numbers, as for an embedding interaction).
"""
from __future__ import annotations

import torch

from case_studies.optimized_fm.reference import OptimizedFMReference
from workbench.tolerances import case_study_tolerances

# The case-study kernel imports its own package's helpers (the harness's static policy allows these).
ALLOWED_IMPORTS = ["case_studies"]

B = 3
N = 23
D = 37
K = 16
DTYPE = "float16"

SHAPES = {
    "production": dict(B=1024, N=24, D=224, K=16, DTYPE="float16"),
    "n64_k16": dict(B=1024, N=64, D=224, K=16, DTYPE="float16"),
    "n128_k64": dict(B=1024, N=128, D=224, K=64, DTYPE="float16"),
    "production_bf16": dict(B=1024, N=24, D=224, K=16, DTYPE="bfloat16"),
    "odd": dict(B=5, N=5, D=123, K=7, DTYPE="bfloat16"),
}
CPU_SHAPES = ["odd"]
# (atol, rtol) on outputs of order 1: fp16 one rounding of the D x K intermediate and of the output;
# bf16 has 8 mantissa bits, so 16x the fp16 error.
TOLERANCES = case_study_tolerances()


class Model(OptimizedFMReference):
    def __init__(self, n: int, k: int, dtype: str = "float16"):
        super().__init__(n, k, dtype)


def get_inputs() -> list[torch.Tensor]:
    return [(torch.randn(B, N, D) * D ** -0.25).to(getattr(torch, DTYPE))]


def get_init_inputs() -> list:
    return [N, K, DTYPE]
