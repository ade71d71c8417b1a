"""KernelBench-like reference written for the lowering tests: Conv2d, BatchNorm2d (training statistics), ReLU."""
import torch
import torch.nn as nn

cin, cout = 3, 5

class Model(nn.Module):
    def __init__(self, cin, cout):
        super(Model, self).__init__()
        self.conv = nn.Conv2d(cin, cout, 3, padding=1)
        self.bn = nn.BatchNorm2d(cout)

    def forward(self, x):
        return torch.relu(self.bn(self.conv(x)))


def get_inputs():
    return [torch.randn(2, cin, 7, 6)]


def get_init_inputs():
    return [cin, cout]
