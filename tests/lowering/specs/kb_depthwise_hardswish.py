"""KernelBench-like reference written for the lowering tests: depthwise + pointwise convolution, HardSwish."""
import torch
import torch.nn as nn

c = 4

class Model(nn.Module):
    def __init__(self, c):
        super(Model, self).__init__()
        self.dw = nn.Conv2d(c, c, 3, padding=1, groups=c)
        self.pw = nn.Conv2d(c, 2 * c, 1)

    def forward(self, x):
        return nn.functional.hardswish(self.pw(self.dw(x)))


def get_inputs():
    return [torch.randn(2, c, 6, 5)]


def get_init_inputs():
    return [c]
