"""Prints what it can find of the host's secrets (policy and guards off): its environment, its process's
exec-time environment block, and a world-readable file outside the paths it needs (read with `open` and
with `torch.from_file`, which no audit hook sees). Then it fills its sandbox to find its bound."""
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


def _read(path):
    got = []
    try:
        with open(path, "rb") as f:
            got.append(f.read(200).decode(errors="replace"))
    except OSError as exc:
        got.append(f"open: {type(exc).__name__}")
    try:
        t = torch.from_file(path, shared=False, size=64, dtype=torch.uint8)
        got.append(bytes(t.tolist()).decode(errors="replace"))
    except Exception as exc:  # noqa: BLE001
        got.append(f"from_file: {type(exc).__name__}")
    return " | ".join(got)


def _fill(mb):
    if mb <= 0:
        return "-"
    chunk = b"\0" * (1 << 20)
    n = 0
    try:
        with open("fill.bin", "wb") as f:
            while n < mb:
                f.write(chunk)
                f.flush()
                n += 1
        return f"wrote {mb} MB"
    except OSError as exc:
        return f"stopped at {n} MB: OSError {exc.errno}"
    finally:
        try:
            os.remove("fill.bin")
        except OSError:
            pass


class ModelNew(nn.Module):
    def __init__(self, scale):
        super().__init__()
        self.scale = scale
        print("ENV " + " ".join(f"{k}={v}" for k, v in sorted(os.environ.items())), flush=True)
        try:
            with open("/proc/self/environ", "rb") as f:
                print("EXECENV " + f.read().replace(b"\0", b" ").decode(errors="replace"), flush=True)
        except OSError as exc:
            print(f"EXECENV unreadable {exc}", flush=True)
        print("HOSTFILE " + _read(os.environ.get("WB_TEST_HOSTFILE", "/nonexistent")), flush=True)
        print("FILL " + _fill(int(os.environ.get("WB_TEST_FILL_MB", "0"))), flush=True)

    def forward(self, a, b):
        out = torch.empty_like(a)
        add_kernel[(triton.cdiv(a.numel(), 1024),)](a, b, out, a.numel(), self.scale, BLOCK=1024)
        return out
