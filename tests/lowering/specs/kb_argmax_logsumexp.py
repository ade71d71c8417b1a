"""KernelBench-like reference written for the lowering tests: argmax, logsumexp, amin over two dims."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super(Model, self).__init__()
        pass

    def forward(self, x):
        return torch.argmax(x, dim=1), torch.logsumexp(x, dim=-1), x.amin(dim=(1, 2))


def get_inputs():
    return [torch.randn(4, 9, 13)]


def get_init_inputs():
    return []
