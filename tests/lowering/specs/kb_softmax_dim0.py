"""KernelBench-like reference written for the lowering tests: softmax over dim 0 plus log_softmax over dim 1."""
import torch
import torch.nn as nn

rows, cols = 7, 45

class Model(nn.Module):
    def __init__(self):
        super(Model, self).__init__()
        pass

    def forward(self, x):
        return torch.softmax(x, dim=0) + torch.log_softmax(x, dim=1)


def get_inputs():
    return [torch.randn(rows, cols)]


def get_init_inputs():
    return []
