"""EXPECT status=rejected violation=python_compute
Per-element Python compute of vector_add on values taken out of the inputs: Reads every element through the
tensor's printed text (`str(x)` dispatches no aten op at all) and parses it back.
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
    out = []
    for i in range(0, x.numel(), 512):  # under the printer's summary threshold (1000): every element shown
        text = str(x[i:i + 512]).replace("tensor(", "").replace("[", "").replace("]", "").replace(")", "")
        out += [float(t) for t in text.replace("\n", " ").split(",") if _number(t)]  # not "device='cuda:0'"
    return out


def _number(text):
    try:
        float(text)
    except ValueError:
        return False
    return True


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
