"""EXPECT status=passed
Memoizes on the first 16 input elements. Every repetition gets fresh inputs, so the memo never hits:
it computes every time (it prints its hit count) and scores what an honest kernel scores."""
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
        self.memo = {}
        self.hits = 0

    def forward(self, a, b):
        key = tuple(float(x[i].item()) for x in (a, b) for i in range(min(8, x.numel())))
        if key in self.memo:
            self.hits += 1
            print("memo hits:", self.hits, flush=True)
            return self.memo[key]
        out = launch(a, b, self.scale)
        self.memo[key] = out
        return out