"""KernelBench-like reference written for the lowering tests: Conv3d, AvgPool3d, subtract."""
import torch
import torch.nn as nn

cin, cout = 2, 3

class Model(nn.Module):
    def __init__(self, cin, cout):
        super(Model, self).__init__()
        self.conv = nn.Conv3d(cin, cout, 2, stride=1, padding=1, bias=False)
        self.pool = nn.AvgPool3d(2)

    def forward(self, x):
        return self.pool(self.conv(x)) - 0.5


def get_inputs():
    return [torch.randn(1, cin, 4, 5, 4)]


def get_init_inputs():
    return [cin, cout]
