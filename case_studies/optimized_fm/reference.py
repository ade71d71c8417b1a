"""WuKong's Optimized FM as PyTorch computes it (KernelEvolve section 5.3.1): two batched matmuls.

    out[b] = X[b] @ (X[b]^T @ Y)

Shapes: X `[B, N, D]` (N features of dimension D per example), Y `[N, K]` (a learned projection shared
by the batch), out `[B, N, K]`; the intermediate `X^T @ Y` is `[B, D, K]` and goes through memory here.
Production (section 5.3.1): B 1024, D 224, N from 8 to 128, K in {16, 32, 64}; FP16 and BF16.
"""
from __future__ import annotations

import torch
from torch import nn


def optimized_fm_reference(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """`X @ (X^T @ Y)` with two batched matmuls (fp32 accumulation, the intermediate rounded to X's dtype)."""
    t = torch.matmul(x.transpose(1, 2), y)        # [B, D, K]
    return torch.matmul(x, t)                     # [B, N, K]


class OptimizedFMReference(nn.Module):
    """Holds the projection Y `[N, K]`."""

    def __init__(self, n: int, k: int, dtype: str = "float16"):
        super().__init__()
        self.proj = nn.Parameter(torch.randn(n, k, dtype=getattr(torch, dtype)) / n ** 0.5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return optimized_fm_reference(x, self.proj)
