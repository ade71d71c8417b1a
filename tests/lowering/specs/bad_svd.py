"""Unsupported: an SVD has no primitive (lowering must name the aten op)."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return torch.linalg.svd(x)[1]


def get_inputs():
    return [torch.randn(6, 5)]


def get_init_inputs():
    return []
