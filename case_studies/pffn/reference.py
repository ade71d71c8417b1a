"""InterFormer's PFFN as PyTorch computes it (KernelEvolve section 5.3.2): a per-token feed-forward
layer, GELU, RMSNorm, a second per-token feed-forward layer, RMSNorm.

    h   = rmsnorm_K(gelu(X[n] @ W1[n])) * g1         [B, K]  for each token n
    out = rmsnorm_D(h @ W2[n]) * g2                  [B, D]

Shapes: X `[N, B, D]`, W1 `[N, D, K]`, W2 `[N, K, D]` (weights per token: N tokens, each with its own
FFN), g1 `[K]`, g2 `[D]` (the norm weights; the paper does not say whether they are per token: shared
here), out `[N, B, D]`. GELU is the exact (erf) form, eps 1e-6. Production (section 5.3.2): N 16,
K 256, B from 64 to 4096, D in {64, 100, 128, 200, 256, 512}; FP16 and BF16. PyTorch runs batched
matmuls (bmm) and separate elementwise/normalization kernels: three passes over memory or more.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

EPS = 1e-6


def pffn_reference(x: torch.Tensor, w1: torch.Tensor, w2: torch.Tensor, g1: torch.Tensor,
                   g2: torch.Tensor, eps: float = EPS) -> torch.Tensor:
    h = F.gelu(torch.bmm(x, w1))
    h = F.rms_norm(h, (h.shape[-1],), g1, eps)
    o = torch.bmm(h, w2)
    return F.rms_norm(o, (o.shape[-1],), g2, eps)


class PFFNReference(nn.Module):
    """Holds the per-token weights W1 `[N, D, K]`, W2 `[N, K, D]` and the norm weights."""

    def __init__(self, n: int, d: int, k: int, dtype: str = "float16"):
        super().__init__()
        dt = getattr(torch, dtype)
        self.w1 = nn.Parameter(torch.randn(n, d, k, dtype=dt) / d ** 0.5)
        self.w2 = nn.Parameter(torch.randn(n, k, d, dtype=dt) / k ** 0.5)
        self.g1 = nn.Parameter(1.0 + 0.1 * torch.randn(k, dtype=dt))
        self.g2 = nn.Parameter(1.0 + 0.1 * torch.randn(d, dtype=dt))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return pffn_reference(x, self.w1, self.w2, self.g1, self.g2)
