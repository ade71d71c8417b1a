"""Finds its own channel through gc (policy and guards off) and asks for a trial's inputs out of turn (a later
trial's, before the first's): a message outside its phase is a forged report, whether the inputs are shared
(the server waits for trial 0's request) or staged (it waits for `timing`)."""
import gc

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def add_kernel(a_ptr, b_ptr, out_ptr, n, scale, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(out_ptr + offs, tl.load(a_ptr + offs, mask=m) + tl.load(b_ptr + offs, mask=m) * scale, mask=m)


class ModelNew(nn.Module):
    def __init__(self, scale):
        super().__init__()
        self.scale = scale
        for o in gc.get_objects():
            if type(o).__name__ == "Channel" and getattr(o, "nonce", ""):
                o.send({"inputs": [0, 1]})
                break

    def forward(self, a, b):
        out = torch.empty_like(a)
        add_kernel[(triton.cdiv(a.numel(), 1024),)](a, b, out, a.numel(), self.scale, BLOCK=1024)
        return out
