"""KernelBench level-1 style cumprod along dim 1 (the H200 run: PassManager::run failed)."""
import torch
import torch.nn as nn

batch_size = 8
input_shape = (300,)
dim = 1


class Model(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.dim = dim

    def forward(self, x):
        return torch.cumprod(x, dim=self.dim)


def get_inputs():
    return [1.0 + 0.01 * torch.randn(batch_size, *input_shape)]


def get_init_inputs():
    return [dim]
