"""KernelBench-like reference written for the lowering tests: a 32-channel Conv2d (the tap-major loop, channels
fastest in memory) and a strided grouped ConvTranspose2d (stride classes), each with a pointwise epilogue."""
import torch
import torch.nn as nn

cin, cout = 32, 48


class Model(nn.Module):
    def __init__(self, cin, cout):
        super(Model, self).__init__()
        self.conv = nn.Conv2d(cin, cout, 3, padding=1)
        self.up = nn.ConvTranspose2d(cout, cin, 3, stride=2, padding=1, output_padding=1, groups=2)

    def forward(self, x):
        y = torch.nn.functional.gelu(self.conv(x))
        return torch.tanh(self.up(y)) * 0.5


def get_inputs():
    return [torch.randn(2, cin, 9, 7)]


def get_init_inputs():
    return [cin, cout]
