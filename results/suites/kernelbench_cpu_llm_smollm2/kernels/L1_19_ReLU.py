"""Triton candidate lowered from 19_ReLU.py by workbench.lowering (no LLM).

The forward is the spec's forward captured to core ATen: glue (views, allocations) stays as
tensor methods, every computing op runs in one of the kernels below. Sizes are read from the
inputs at run time. TUNABLES are the block sizes the offline tuner may change.
ATen ops captured: aten.relu.default
"""
import math  # noqa: F401 - the spec's __init__ may use it
import os  # noqa: F401 - reads TRITON_INTERPRET only

import torch
import torch.nn as nn
import triton
import triton.language as tl

TUNABLES = {"BLOCK": [256, 512, 1024, 2048, 4096], "NUM_WARPS": [2, 4, 8]}
BLOCK = 1024
NUM_WARPS = 8


@triton.jit
def fused_0(out0_ptr, in0_ptr, n, size1, in0_s0, in0_s1, BLOCK: tl.constexpr):
    """Fused pointwise: relu (rank 2, broadcast by strides)."""
    pid = tl.program_id(0)
    offs = pid.to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    i1 = offs % size1
    t1 = offs // size1
    i0 = t1
    x0 = tl.load(in0_ptr + i0 * in0_s0 + i1 * in0_s1, mask=mask, other=0)
    v0 = tl.maximum(x0, 0)
    tl.store(out0_ptr + offs, v0, mask=mask)


def _bshape(*shapes):
    """Broadcast shape of several shapes (torch's rules), in plain Python."""
    r = max((len(s) for s in shapes), default=0)
    out = [1] * r
    for s in shapes:
        for i, d in enumerate(s):
            j = r - len(s) + i
            if d != 1:
                out[j] = d
    return out


def _numel(shape):
    n = 1
    for d in shape:
        n *= d
    return n


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        dev = x.device
        # relu.default
        _shape = _bshape(x.shape)
        relu = torch.empty(_shape, dtype=torch.float32, device=dev)
        _e0 = x.expand(_shape)
        _n = _numel(_shape)
        fused_0[(triton.cdiv(_n, BLOCK),)](relu, _e0, _n, _shape[1], *_e0.stride(), BLOCK=BLOCK, num_warps=NUM_WARPS)
        return relu
