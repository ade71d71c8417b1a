"""Finds its own channel through gc (policy and guards off) and sends a second `isolated` message, after
its first: a message outside its phase is a forged report (the candidate's failure), never infra_error."""
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
                # a claim the server would read as a list and fail on, if it read it at all
                o.send({"isolated": {"missing": 12345, "uid": "root"}})
                break

    def forward(self, a, b):
        out = torch.empty_like(a)
        add_kernel[(triton.cdiv(a.numel(), 1024),)](a, b, out, a.numel(), self.scale, BLOCK=1024)
        return out
