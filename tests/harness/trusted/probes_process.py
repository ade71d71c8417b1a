"""An honest vector_add that prints what its process can reach (policy off): its open descriptors, how
much it may write into its sandbox, and a checksum of its first input (fresh seeds per job)."""
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


def _fds():
    out = []
    for fd in sorted(int(x) for x in os.listdir("/proc/self/fd")):
        try:
            out.append(f"{fd}={os.readlink(f'/proc/self/fd/{fd}')}")
        except OSError:
            pass
    return out


def _fill(limit_mb):
    wrote = 0
    try:
        with open("fill.bin", "wb") as f:
            chunk = b"\0" * (1 << 20)
            while wrote < limit_mb:
                f.write(chunk)
                f.flush()
                wrote += 1
    except OSError as e:
        return f"stopped at {wrote} MB: {type(e).__name__} {e.errno}"
    finally:
        try:
            os.unlink("fill.bin")
        except OSError:
            pass
    return f"wrote {wrote} MB"


class ModelNew(nn.Module):
    def __init__(self, scale):
        super().__init__()
        self.scale = scale
        self.printed = False
        print("FDS " + " ".join(_fds()), flush=True)
        print("FILL " + _fill(int(os.environ.get("WB_TEST_FILL_MB", "0"))), flush=True)

    def forward(self, a, b):
        if not self.printed:
            print(f"FIRST {a[0].item():.6f} {a[1].item():.6f}", flush=True)
            self.printed = True
        out = torch.empty_like(a)
        add_kernel[(triton.cdiv(a.numel(), 1024),)](a, b, out, a.numel(), self.scale, BLOCK=1024)
        return out
