"""EXPECT status=rejected violation=python_compute
Per-element Python compute of vector_add on values taken out of the inputs: pickles each input into a file
of its sandbox (`torch.save`, legacy format: the raw storage last; no aten op per element) and decodes the
float32 bits read back with `int.from_bytes` and `math.ldexp`.
"""
import math

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
    torch.save(x.cpu(), "values.bin", _use_new_zipfile_serialization=False)
    with open("values.bin", "rb") as f:
        data = f.read()
    raw = data[len(data) - 4 * x.numel():]
    out = []
    for i in range(x.numel()):
        u = int.from_bytes(raw[4 * i:4 * i + 4], "little")
        e, f = (u >> 23) & 0xFF, u & 0x7FFFFF
        v = math.ldexp(f, -149) if e == 0 else math.ldexp(f | 0x800000, e - 150)
        out.append(-v if u >> 31 else v)
    return out


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
