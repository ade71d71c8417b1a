"""A matrix inverse through matrix_power(x, -2): its decomposition threads an effect token (export's
side-effect input) through the graph, which once crashed the lowering (IndexError); now lowered
(`linalg_small.py`)."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return torch.linalg.matrix_power(x, -2) + x


def get_inputs():
    return [torch.randn(3, 4, 4) + 4 * torch.eye(4)]


def get_init_inputs():
    return []
