"""A spec whose `get_inputs()` ignores the seed, as the ATen suite's do (fixed OpInfo samples): two inputs,
one of them all at least 1 (acosh's domain), and an integer index that must stay valid."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x, y, idx):
        return torch.exp(x) + torch.acosh(y) + torch.gather(x, 1, idx)


def get_inputs():
    x = torch.linspace(-2.0, 2.0, 33 * 65).reshape(33, 65)
    y = 1.0 + torch.linspace(0.0, 3.0, 33 * 65).reshape(33, 65)
    idx = (torch.arange(33 * 65) * 7 % 65).reshape(33, 65)
    return [x, y, idx]


def get_init_inputs():
    return []
