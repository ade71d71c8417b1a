"""Capture failure or unsupported: an output whose size depends on the data."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return x[x > 0]


def get_inputs():
    return [torch.randn(8, 3)]


def get_init_inputs():
    return []
