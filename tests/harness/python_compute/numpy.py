"""EXPECT status=rejected violation=python_compute
Per-element Python compute of vector_add on values taken out of the inputs: `.numpy()` then per element
(refused by name, as `tolist`; with both lines off counted by elements).
"""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def copy_kernel(src_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(out_ptr + offs, tl.load(src_ptr + offs, mask=m), mask=m)


def values(x):
    return [float(v) for v in x.cpu().numpy()]  # a device tensor has no numpy() of its own


class ModelNew(nn.Module):
    def __init__(self, scale):
        super().__init__()
        self.scale = scale

    def forward(self, a, b):
        vals = [x + y * self.scale for x, y in zip(values(a), values(b))]  # the compute, in Python floats
        src = torch.tensor(vals, dtype=a.dtype, device=a.device)
        out = torch.empty_like(a)
        copy_kernel[(triton.cdiv(a.numel(), 1024),)](src, out, a.numel(), BLOCK=1024)  # a launch: the rule's due
        return out
