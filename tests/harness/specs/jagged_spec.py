"""A spec whose input size depends on the random data (jagged lengths)."""
import torch
import torch.nn as nn

N = 50


class Model(nn.Module):
    def forward(self, x):
        return x * 2.0


def get_inputs():
    n = int(torch.randint(5, N, (1,)))
    return [torch.randn(n)]


def get_init_inputs():
    return []
