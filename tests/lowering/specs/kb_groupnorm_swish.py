"""KernelBench-like reference written for the lowering tests: Conv1d, GroupNorm, Swish."""
import torch
import torch.nn as nn

c, groups = 4, 2

class Model(nn.Module):
    def __init__(self, c, groups):
        super(Model, self).__init__()
        self.conv = nn.Conv1d(c, c * 2, 3)
        self.gn = nn.GroupNorm(groups, c * 2)

    def forward(self, x):
        y = self.gn(self.conv(x))
        return y * torch.sigmoid(y)


def get_inputs():
    return [torch.randn(3, c, 17)]


def get_init_inputs():
    return [c, groups]
