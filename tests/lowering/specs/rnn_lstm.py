"""KernelBench 36/38-style LSTM (batch_first, 2 layers, bidirectional), returning output, h_n and c_n."""
import torch
import torch.nn as nn

batch_size, seq, in_f, hidden, layers = 3, 7, 5, 19, 2


class Model(nn.Module):
    def __init__(self, in_f, hidden, layers):
        super().__init__()
        self.lstm = nn.LSTM(in_f, hidden, layers, batch_first=True, bidirectional=True)

    def forward(self, x, h0, c0):
        out, (h, c) = self.lstm(x, (h0, c0))
        return out, h, c


def get_inputs():
    return [torch.randn(batch_size, seq, in_f), torch.randn(2 * layers, batch_size, hidden),
            torch.randn(2 * layers, batch_size, hidden)]


def get_init_inputs():
    return [in_f, hidden, layers]
