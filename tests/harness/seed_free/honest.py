"""Honest: exp(x) + acosh(y) + x gathered along rows, one launch."""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _k(x_ptr, y_ptr, i_ptr, o_ptr, n, cols, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + offs, mask=m, other=0.0)
    y = tl.load(y_ptr + offs, mask=m, other=1.0)
    j = tl.load(i_ptr + offs, mask=m, other=0)
    g = tl.load(x_ptr + (offs // cols) * cols + j, mask=m, other=0.0)
    tl.store(o_ptr + offs, tl.exp(x) + tl.log(y + tl.sqrt(y * y - 1.0)) + g, mask=m)


class ModelNew(nn.Module):
    def forward(self, x, y, idx):
        out = torch.empty_like(x)
        n = x.numel()
        _k[(triton.cdiv(n, 1024),)](x, y, idx, out, n, x.shape[1], BLOCK=1024)
        return out
