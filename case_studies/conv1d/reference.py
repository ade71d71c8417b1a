"""conv1d as the paper's baselines compute it: `F.conv1d`, and the conv2d formulation of the same
convolution (a height-1 image), which the paper also compares with (section 5.1, Table 3).

Shapes: x `[B, C_in, L]`, weight `[C_out, C_in, K]`, bias `[C_out]` -> `[B, C_out, L_out]`,
`L_out = (L + 2 * padding - K) // stride + 1`. Production (section 5.1): B 2048, C_in = C_out = 96, L 200;
the paper gives no kernel size: we take K 3, stride 1, padding 1 and say so.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn


def conv1d_reference(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None,
                     stride: int = 1, padding: int = 0) -> torch.Tensor:
    """The paper's first baseline: PyTorch's conv1d."""
    return F.conv1d(x, weight, bias, stride=stride, padding=padding)


def conv1d_as_conv2d(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None,
                     stride: int = 1, padding: int = 0) -> torch.Tensor:
    """The paper's second baseline: the same convolution as conv2d over a height-1 image."""
    y = F.conv2d(x.unsqueeze(2), weight.unsqueeze(2), bias, stride=(1, stride), padding=(0, padding))
    return y.squeeze(2)


def conv1d_exact(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None,
                 stride: int = 1, padding: int = 0) -> torch.Tensor:
    """The ground truth the GPU checks compare every kernel with: fp32 inputs, cuDNN's TF32 off."""
    prev = torch.backends.cudnn.allow_tf32
    torch.backends.cudnn.allow_tf32 = False
    try:
        return F.conv1d(x.float(), weight.float(), None if bias is None else bias.float(), stride=stride,
                        padding=padding)
    finally:
        torch.backends.cudnn.allow_tf32 = prev


def out_length(length: int, kernel_size: int, stride: int, padding: int) -> int:
    return (length + 2 * padding - kernel_size) // stride + 1


class Conv1dReference(nn.Module):
    """An `nn.Conv1d` in the given dtype; the module both the spec and `ModelNew` hold."""

    def __init__(self, c_in: int, c_out: int, kernel_size: int, stride: int = 1, padding: int = 0,
                 bias: bool = True, dtype: str = "float32"):
        super().__init__()
        self.conv = nn.Conv1d(c_in, c_out, kernel_size, stride=stride, padding=padding, bias=bias)
        self.conv.to(getattr(torch, dtype))
        self.stride, self.padding = stride, padding

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return conv1d_reference(x, self.conv.weight, self.conv.bias, self.stride, self.padding)
