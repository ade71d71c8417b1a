"""KernelBench 33_VanillaRNN-style reference written for the lowering tests: a hidden state made in __init__
as a plain tensor attribute (not a buffer), read and reassigned by the forward, and a submodule holding one
more (a nested attribute path)."""
import torch
import torch.nn as nn

batch_size, in_f, hidden, out_f = 5, 7, 6, 3


class Cell(nn.Module):
    def __init__(self, in_f, hidden):
        super().__init__()
        self.fc = nn.Linear(in_f + hidden, hidden)
        self.shift = torch.randn(hidden)


class Model(nn.Module):
    def __init__(self, in_f, hidden, out_f):
        super().__init__()
        self.hidden = torch.randn((batch_size, hidden))
        self.cell = Cell(in_f, hidden)
        self.h2o = nn.Linear(hidden, out_f)

    def forward(self, x):
        self.hidden = self.hidden.to(x.device)
        combined = torch.cat((x, self.hidden), dim=1)
        self.hidden = torch.tanh(self.cell.fc(combined) + self.cell.shift)
        return self.h2o(self.hidden)


def get_inputs():
    return [torch.randn(batch_size, in_f)]


def get_init_inputs():
    return [in_f, hidden, out_f]
