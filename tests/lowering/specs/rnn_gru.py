"""KernelBench 39/42-style GRU (sequence first, 3 layers, no bias option exercised), returning output and h_n."""
import torch
import torch.nn as nn

batch_size, seq, in_f, hidden, layers = 4, 6, 9, 17, 3


class Model(nn.Module):
    def __init__(self, in_f, hidden, layers):
        super().__init__()
        self.gru = nn.GRU(in_f, hidden, layers, bias=True, batch_first=False)
        self.fc = nn.Linear(hidden, 3)

    def forward(self, x, h0):
        out, h = self.gru(x, h0)
        return self.fc(out[-1]), h


def get_inputs():
    return [torch.randn(seq, batch_size, in_f), torch.randn(layers, batch_size, hidden)]


def get_init_inputs():
    return [in_f, hidden, layers]
