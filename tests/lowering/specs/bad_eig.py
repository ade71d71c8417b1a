"""Unsupported: a general (non-symmetric) eigensolver, complex in between: one line naming the op."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return torch.linalg.eigvals(x).real


def get_inputs():
    return [torch.randn(3, 4, 4)]


def get_init_inputs():
    return []
