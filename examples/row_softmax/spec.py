"""Reduction: softmax over the last dimension of a [M, N] matrix (KernelBench format)."""
import torch
import torch.nn as nn

M = 37
N = 123
SHAPES = {"production": {"M": 8192, "N": 1000}, "wide": {"M": 5, "N": 3001}}


class Model(nn.Module):
    def __init__(self) -> None:
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.softmax(x, dim=-1)


def get_inputs():
    return [torch.randn(M, N) * 3.0]


def get_init_inputs():
    return []
