"""KernelBench-like reference written for the lowering tests: a three-layer MLP in nn.Sequential."""
import torch
import torch.nn as nn

d, h = 10, 16

class Model(nn.Module):
    def __init__(self, d, h):
        super(Model, self).__init__()
        self.layers = nn.Sequential(nn.Linear(d, h), nn.ReLU(), nn.Linear(h, h), nn.Tanh(), nn.Linear(h, 3))

    def forward(self, x):
        return self.layers(x)


def get_inputs():
    return [torch.randn(5, d)]


def get_init_inputs():
    return [d, h]
