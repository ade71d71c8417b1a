"""vector_add, plus a temporary file in TMPDIR as Triton's compiler makes on a GPU: the sandbox's tmp must be writable
by the candidate's uid (a GPU-only failure once: every kernel compile hit EACCES). `tempfile` is outside the
run-time allow-list; `open` is the audit hook's to judge (inside the sandbox: allowed)."""
import os

import torch
import torch.nn as nn
import triton
import triton.language as tl

TUNABLES = {"BLOCK_SIZE": [64, 128, 256, 512, 1024, 2048, 4096], "NUM_WARPS": [1, 2, 4, 8]}
BLOCK_SIZE = 64
NUM_WARPS = 4


@triton.jit
def add_scaled_kernel(a_ptr, b_ptr, out_ptr, n, scale, BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid.to(tl.int64) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offs < n
    a = tl.load(a_ptr + offs, mask=mask)
    b = tl.load(b_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, a + b * scale, mask=mask)


class ModelNew(nn.Module):
    def __init__(self, scale: float) -> None:
        super().__init__()
        self.scale = scale

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        path = os.environ.get("TMPDIR", "") + "/kernel.cubin"
        with open(path, "wb") as f:  # what the GPU compiler does
            f.write(b"x")
        a, b = a.contiguous(), b.contiguous()
        out = torch.empty_like(a)
        n = a.numel()
        grid = (triton.cdiv(n, BLOCK_SIZE),)
        add_scaled_kernel[grid](a, b, out, n, self.scale, BLOCK_SIZE=BLOCK_SIZE, num_warps=NUM_WARPS)
        return out
