"""Sees its inputs while they are made, before `go`, by replacing the `torch` the spec's `get_inputs()` calls
(the spec module's own global: no watched object changes, so the patch detector is blind to it), and computes
each answer there, outside the clock; its forward then returns the answer made ahead and computes something
wrong itself. Where the candidate's process made its inputs from seeds (`WB_DEVICE_INPUTS`, before issue 32's
shared inputs) every answer came from the spy and it passed with no work in the clock; where the trusted
reference makes them, the spy sees nothing and the forward's own (wrong) result is judged: incorrect."""
import sys

import torch
import torch.nn as nn
import triton
import triton.language as tl

_MADE = []       # tensors the spy saw made, in order
_AHEAD = {}      # data pointer of `a` -> a + b * scale, computed while the inputs were made
_SCALE = [0.5]


class _Spy:
    """Stands in for `torch` in the spec's module: every name is torch's, `randn` also watches."""

    def __getattr__(self, name):
        return getattr(torch, name)

    def randn(self, *args, **kwargs):
        t = torch.randn(*args, **kwargs)
        _MADE.append(t)
        if len(_MADE) % 2 == 0:  # vector_add's get_inputs makes a, then b: the answer, ahead of the clock
            a, b = _MADE[-2], _MADE[-1]
            _AHEAD[a.data_ptr()] = a + b * _SCALE[0]
            _MADE.clear()
        return t


_SPEC = sys.modules.get("wb_spec")  # the spec's module, where the candidate's process loaded it
if _SPEC is not None:
    _SPEC.torch = _Spy()


@triton.jit
def sub_kernel(a_ptr, b_ptr, out_ptr, n, scale, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(out_ptr + offs, tl.load(a_ptr + offs, mask=m) - tl.load(b_ptr + offs, mask=m) * scale, mask=m)


class ModelNew(nn.Module):
    def __init__(self, scale):
        super().__init__()
        self.scale = scale
        _SCALE[0] = scale

    def forward(self, a, b):
        out = torch.empty_like(a)
        sub_kernel[(triton.cdiv(a.numel(), 1024),)](a, b, out, a.numel(), self.scale, BLOCK=1024)  # wrong
        return _AHEAD.get(a.data_ptr(), out)
