"""Honest: one count read per output (its size), the values doubled by Triton."""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def double(x_ptr, o_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    m = offs < n
    tl.store(o_ptr + offs, tl.load(x_ptr + offs, mask=m) * 2.0, mask=m)


class ModelNew(nn.Module):
    def forward(self, x, lens):
        outs = []
        for i in range(x.shape[0]):
            n = int(lens[i])  # the one value this output reads: its size
            o = torch.empty(n, device=x.device, dtype=x.dtype)
            double[(1,)](x[i], o, n, BLOCK=16)
            outs.append(o)
        return tuple(outs)
