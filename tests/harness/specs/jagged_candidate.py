import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def k(x_ptr, o_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(o_ptr + offs, tl.load(x_ptr + offs, mask=m) * 2.0, mask=m)


class ModelNew(nn.Module):
    def forward(self, x):
        o = torch.empty_like(x)
        k[(triton.cdiv(x.numel(), 64),)](x, o, x.numel(), BLOCK=64)
        return o
