"""Elementwise: out = a + b * scale (KernelBench format)."""
import torch
import torch.nn as nn

N = 4099  # odd on purpose: exercises the tail mask
SHAPES = {"production": {"N": 1 << 24}, "small_odd": {"N": 127}}
CPU_SHAPES = ["small_odd"]


class Model(nn.Module):
    def __init__(self, scale: float) -> None:
        super().__init__()
        self.scale = scale

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return a + b * self.scale


def get_inputs():
    return [torch.randn(N), torch.randn(N)]


def get_init_inputs():
    return [0.5]
