"""A stack of 8 Linear + BatchNorm1d + ReLU blocks among 256 Identity modules: more modules than capture's
ALL_DIMS_MAX_MODULES, so only the batch dimension is traced dynamic; every block's kernels are the same."""
import torch
import torch.nn as nn

batch_size = 16
features = 8


class Model(nn.Module):
    def __init__(self, depth: int = 8):
        super().__init__()
        layers = []
        for _ in range(depth):
            layers += [nn.Linear(features, features), nn.BatchNorm1d(features), nn.ReLU()]
            layers += [nn.Identity() for _ in range(32)]
        self.body = nn.Sequential(*layers)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.body(x)


def get_inputs():
    return [torch.randn(batch_size, features)]


def get_init_inputs():
    return [8]
