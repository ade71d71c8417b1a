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
    return [torch.randn(M, K), torch.randn(K, N)]


def get_init_inputs():
    return [N]
