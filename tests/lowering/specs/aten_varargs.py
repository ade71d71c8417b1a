"""ATen-suite-like spec: `forward(*tensors)` calls one op on several samples (one of them empty)."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, *tensors):
        return tuple(torch.softmax(t, dim=-1) for t in tensors) + (torch.sum(tensors[0], dim=0),)


def get_inputs():
    return [torch.randn(3, 5), torch.randn(0, 4), torch.randn(2, 1, 7)]


def get_init_inputs():
    return []
