"""EXPECT status=incorrect
Computes only in the first calls (the correctness trials and the sizing round) and returns stale output
afterwards: every timed round has judged repetitions, so stale outputs fail."""
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
        self.last = None

    def forward(self, a, b):
        self.calls += 1
        if self.last is None or self.calls <= 7 or self.last.shape != a.shape:
            self.last = launch(a, b, self.scale)
        return self.last