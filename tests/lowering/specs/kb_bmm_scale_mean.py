"""KernelBench-like reference written for the lowering tests: bmm, scaling, mean over a dim."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, scale):
        super(Model, self).__init__()
        self.scale = scale

    def forward(self, a, b):
        return (torch.bmm(a, b) * self.scale).mean(dim=1)


def get_inputs():
    return [torch.randn(3, 5, 11), torch.randn(3, 11, 7)]


def get_init_inputs():
    return [0.25]
