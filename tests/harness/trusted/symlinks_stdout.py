"""Replaces its stdout file with a link to a file only root may read, hoping the root server copies it
into `stdout_tail` (policy off: the file-system route itself is what is tested)."""
import os

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
        target = os.environ.get("WB_TEST_ROOTONLY_FILE", "/etc/shadow")
        for name in ("stdout.txt", "stderr.txt"):
            try:
                os.unlink(name)
                os.symlink(target, name)
            except OSError:
                pass

    def forward(self, a, b):
        out = torch.empty_like(a)
        add_kernel[(triton.cdiv(a.numel(), 1024),)](a, b, out, a.numel(), self.scale, BLOCK=1024)
        return out
