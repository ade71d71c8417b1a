"""Goes for the file its judged outputs travel through (policy off: the file-system route is what is
tested). `WB_TEST_OUTBOX` picks how: `truncate` cuts it to nothing, `swap` puts a file of its own (all
zeros) in its place, `link` replaces it with a link to a file only root may read. The judge reads through
the descriptor it opened before the candidate existed: a swap or a link changes nothing, a cut file is the
candidate's own failure."""
import os

import torch
import torch.nn as nn
import triton
import triton.language as tl

_DONE = []  # once per process: every shape builds its own model

@triton.jit
def add_kernel(a_ptr, b_ptr, out_ptr, n, scale, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(out_ptr + offs, tl.load(a_ptr + offs, mask=m) + tl.load(b_ptr + offs, mask=m) * scale, mask=m)


class ModelNew(nn.Module):
    def __init__(self, scale):
        super().__init__()
        self.scale = scale
        self.calls = 0

    def _tamper(self):
        how = os.environ.get("WB_TEST_OUTBOX", "")
        size = os.stat("outbox.bin").st_size
        if how == "truncate":
            os.truncate("outbox.bin", 0)
        elif how == "swap":
            os.unlink("outbox.bin")
            with open("outbox.bin", "wb") as f:
                f.write(b"\0" * size)
        elif how == "link":
            os.unlink("outbox.bin")
            os.symlink(os.environ.get("WB_TEST_ROOTONLY_FILE", "/etc/shadow"), "outbox.bin")

    def forward(self, a, b):
        out = torch.empty_like(a)
        add_kernel[(triton.cdiv(a.numel(), 1024),)](a, b, out, a.numel(), self.scale, BLOCK=1024)
        self.calls += 1
        if self.calls == 2 and not _DONE:  # after the first trial's output is in its slot
            _DONE.append(True)
            self._tamper()
        return out
