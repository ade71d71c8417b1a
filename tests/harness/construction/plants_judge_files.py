"""Computes the right answer, and plants files under the names the judge once read beside the outbox:
a pickle of another structure (the judge raised on it and blamed the spec) and a compressed archive that
inflates to far more than it weighs. The judge reads only trusted buffers: planted files change nothing."""
import io
import os
import zipfile

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def add_kernel(a_ptr, b_ptr, out_ptr, n, scale, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(out_ptr + offs, tl.load(a_ptr + offs, mask=m) + tl.load(b_ptr + offs, mask=m) * scale, mask=m)


def _plant():
    names = [f"out_0_{t}.pt" for t in range(4)] + [f"t_{k}_{i}.pt" for k in range(12) for i in range(64)]
    bomb = io.BytesIO()
    with zipfile.ZipFile(bomb, "w", compression=zipfile.ZIP_DEFLATED) as z:
        z.writestr("archive/data.pkl", b"\0" * (8 << 20))
    for j, name in enumerate(names):
        try:
            if j % 2:
                with open(name, "wb") as f:
                    f.write(bomb.getvalue())
            else:
                # no tensor in it: pickling a tensor in a forward counts its values as read into Python
                torch.save({"not": "a list of outputs", "x": [0.0] * 3}, name)
        except OSError:
            return


class ModelNew(nn.Module):
    def __init__(self, scale):
        super().__init__()
        self.scale = scale
        self.calls = 0

    def forward(self, a, b):
        out = torch.empty_like(a)
        add_kernel[(triton.cdiv(a.numel(), 1024),)](a, b, out, a.numel(), self.scale, BLOCK=1024)
        self.calls += 1
        if self.calls in (1, 2) and os.environ.get("WB_TEST_PLANT", "on") == "on":
            _plant()  # after the harness saved trial 0 and before it saves trial 1: the files are there
        return out
