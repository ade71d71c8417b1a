"""EXPECT status=rejected violation=file_write
Rewrites its own saved outputs after the trials with torch.save (e.g. to overwrite a wrong trial)."""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def add_kernel(a_ptr, b_ptr, out_ptr, n, scale, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(out_ptr + offs, tl.load(a_ptr + offs, mask=m) + tl.load(b_ptr + offs, mask=m) * scale, mask=m)


def launch(a, b, scale):
    out = torch.empty_like(a)
    add_kernel[(triton.cdiv(a.numel(), 1024),)](a, b, out, a.numel(), scale, BLOCK=1024)
    return out



class ModelNew(nn.Module):
    def __init__(self, scale):
        super().__init__()
        self.scale = scale
        self.calls = 0

    def forward(self, a, b):
        self.calls += 1
        out = launch(a, b, self.scale)
        torch.save([out], "out_0_0.pt")
        return out