"""EXPECT status=rejected violation=python_compute
Per-element Python compute of vector_add that returns extra outputs to buy values (the bound grows by one per
output tensor): the judge compares the output count with the reference's, so the padding fails the trial;
the values it read are past the bound of the one output the reference returns.
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


class ModelNew(nn.Module):
    def __init__(self, scale):
        super().__init__()
        self.scale = scale

    def forward(self, a, b):
        vals = [float(a[i]) + float(b[i]) * self.scale for i in range(a.numel())]  # the compute, in Python
        src = torch.tensor(vals, dtype=a.dtype, device=a.device)
        out = torch.empty_like(a)
        copy_kernel[(triton.cdiv(a.numel(), 1024),)](src, out, a.numel(), BLOCK=1024)  # a launch: the rule's due
        return (out,) + tuple(torch.empty(0, device=a.device) for _ in range(2 * a.numel()))
