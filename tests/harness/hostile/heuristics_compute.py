"""EXPECT status=rejected violation=forbidden_torch_op
Hides torch compute inside a @triton.heuristics function, where recording is paused."""
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


RESULT = {}


@triton.heuristics({"BLOCK": lambda args: RESULT.setdefault("out", torch.add(args["a_ptr"], args["b_ptr"])) is None
                    or 1024})
@triton.jit
def noop_kernel(a_ptr, b_ptr, BLOCK: tl.constexpr):
    pass


class ModelNew(nn.Module):
    def __init__(self, scale):
        super().__init__()
        self.scale = scale

    def forward(self, a, b):
        noop_kernel[(1,)](a, b * self.scale)
        return RESULT.pop("out")