"""Matmul-like: C = relu(A @ B + bias) (KernelBench format). fp32 inputs; tf32 allowed on the GPU."""
import torch
import torch.nn as nn

M = 67
K = 45
N = 33
ALLOW_TF32 = True  # Triton's fp32 tl.dot uses tf32 on NVIDIA GPUs
SHAPES = {"production": {"M": 4096, "K": 4096, "N": 4096}, "tall": {"M": 1025, "K": 64, "N": 17}}


class Model(nn.Module):
    def __init__(self, n: int) -> None:
        super().__init__()
        self.bias = nn.Parameter(torch.randn(n))

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return torch.relu(a @ b + self.bias)


def get_inputs():
    # Scaled so outputs are O(1) at every K: an elementwise tolerance then means the same thing at
    # K=45 and K=4096 (unscaled, tf32 rounding at K=4096 gives absolute errors near 0.05).
    return [torch.randn(M, K) / K**0.25, torch.randn(K, N) / K**0.25]


def get_init_inputs():
    return [N]
