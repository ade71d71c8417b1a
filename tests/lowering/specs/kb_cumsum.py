"""KernelBench level-1 style cumsum (89/91/92/93: plain, reversed, exclusive, masked) along dim 1 at an odd
row length that takes two chunks (the H200 run: PassManager::run failed for all four)."""
import torch
import torch.nn as nn

batch_size = 8
input_shape = (300,)
dim = 1


class Model(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.dim = dim

    def forward(self, x, mask):
        rev = torch.cumsum(x.flip(self.dim), dim=self.dim).flip(self.dim)
        excl = torch.cumsum(x.narrow(self.dim, 0, x.size(self.dim) - 1), dim=self.dim)
        return torch.cumsum(x * mask, dim=self.dim), rev, excl


def get_inputs():
    x = torch.rand(batch_size, *input_shape)
    return [x, torch.randint(0, 2, x.shape).bool()]


def get_init_inputs():
    return [dim]
