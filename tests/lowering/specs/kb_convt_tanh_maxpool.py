"""KernelBench-like reference written for the lowering tests: ConvTranspose2d, Tanh, MaxPool2d."""
import torch
import torch.nn as nn

cin, cout = 4, 6

class Model(nn.Module):
    def __init__(self, cin, cout):
        super(Model, self).__init__()
        self.ct = nn.ConvTranspose2d(cin, cout, 3, stride=2, padding=1)
        self.pool = nn.MaxPool2d(2)

    def forward(self, x):
        return self.pool(torch.tanh(self.ct(x)))


def get_inputs():
    return [torch.randn(2, cin, 5, 4)]


def get_init_inputs():
    return [cin, cout]
