"""EXPECT status=rejected violation=os
Opens a file outside the sandbox relative to a directory descriptor (dir_fd), then links and symlinks out."""
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


def launch(a, b, scale):
    out = torch.empty_like(a)
    add_kernel[(triton.cdiv(a.numel(), 1024),)](a, b, out, a.numel(), scale, BLOCK=1024)
    return out


try:
    fd = os.open("/tmp", os.O_RDONLY)
    os.close(os.open("wb_hostile_dirfd.txt", os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=fd))
    os.symlink("/etc/passwd", "/tmp/wb_hostile_symlink")
    os.link("stdout.txt", "/tmp/wb_hostile_link")
except OSError:
    pass


class ModelNew(nn.Module):
    def __init__(self, scale):
        super().__init__()
        self.scale = scale

    def forward(self, a, b):
        return launch(a, b, self.scale)