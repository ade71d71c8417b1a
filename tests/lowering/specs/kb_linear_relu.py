"""KernelBench-like reference written for the lowering tests: Linear, ReLU, scaling."""
import torch
import torch.nn as nn

batch, in_f, out_f = 9, 21, 13

class Model(nn.Module):
    def __init__(self, in_f, out_f, scale):
        super(Model, self).__init__()
        self.fc = nn.Linear(in_f, out_f)
        self.scale = scale

    def forward(self, x):
        return torch.relu(self.fc(x)) * self.scale


def get_inputs():
    return [torch.randn(batch, in_f)]


def get_init_inputs():
    return [in_f, out_f, 0.5]
