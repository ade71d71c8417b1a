"""Capture failure: the forward branches on a tensor's value."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        if x.sum() > 0:
            return x * 2
        return x - 1


def get_inputs():
    return [torch.randn(8, 3)]


def get_init_inputs():
    return []
