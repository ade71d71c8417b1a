"""KernelBench-like reference written for the lowering tests: tensors the forward builds from literals
(export lifts them to constants), next to parameters: a column pick and a per-column scale."""
import torch
import torch.nn as nn

in_features = 19
out_features = 7


class Model(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.fc = nn.Linear(in_features, out_features)

    def forward(self, x):
        y = self.fc(x)
        cols = torch.tensor([0, 2, 2, -1, 5])
        scale = torch.tensor([[0.5, -1.0, 2.0, 0.25, 3.0]])
        return torch.relu(y[:, cols] * scale)


def get_inputs():
    return [torch.randn(6, in_features)]


def get_init_inputs():
    return [in_features, out_features]
