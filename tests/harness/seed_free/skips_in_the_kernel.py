"""One output buffer for every call and a flag on the device: the kernel computes on its first launch and
skips the work on every later one (on the GPU, on every replay of the captured graph), leaving the first
output in place. Right only while the inputs never change.
EXPECT status=incorrect"""
import torch
import torch.nn as nn
import triton
import triton.language as tl

_STATE = {}


@triton.jit
def _k(x_ptr, y_ptr, i_ptr, o_ptr, flag_ptr, n, cols, BLOCK: tl.constexpr):
    done = tl.load(flag_ptr)
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = (offs < n) & (done == 0)
    x = tl.load(x_ptr + offs, mask=m, other=0.0)
    y = tl.load(y_ptr + offs, mask=m, other=1.0)
    j = tl.load(i_ptr + offs, mask=m, other=0)
    g = tl.load(x_ptr + (offs // cols) * cols + j, mask=m, other=0.0)
    tl.store(o_ptr + offs, tl.exp(x) + tl.log(y + tl.sqrt(y * y - 1.0)) + g, mask=m)


@triton.jit
def _set(flag_ptr):
    tl.store(flag_ptr, 1)


class ModelNew(nn.Module):
    def forward(self, x, y, idx):
        if "out" not in _STATE:
            _STATE["out"] = torch.empty_like(x)
            _STATE["flag"] = torch.zeros(1, dtype=torch.int32, device=x.device)
        out, flag = _STATE["out"], _STATE["flag"]
        n = x.numel()
        _k[(triton.cdiv(n, 1024),)](x, y, idx, out, flag, n, x.shape[1], BLOCK=1024)
        _set[(1,)](flag)
        return out
