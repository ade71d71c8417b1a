"""Looks through /etc for the host's secrets (policy and guards off): lists it, reads every path named in
`WB_TEST_ETC` (with `open` and with `torch.from_file`, which no audit hook sees) and prints its `passwd`.
Its forward is honest: the harness must pass it and show it nothing it planted."""
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
        t = torch.from_file(path, shared=False, size=16, dtype=torch.uint8)
        got.append(bytes(t.tolist()).decode(errors="replace"))
    except Exception as exc:  # noqa: BLE001
        got.append(f"from_file: {type(exc).__name__}")
    return " | ".join(got).replace("\n", " ")


class ModelNew(nn.Module):
    def __init__(self, scale):
        super().__init__()
        self.scale = scale
        print("ETCLIST " + " ".join(sorted(os.listdir("/etc"))), flush=True)
        for path in filter(None, os.environ.get("WB_TEST_ETC", "").split(",")):
            print(f"ETCREAD {path} {_read(path)}", flush=True)
        print("PASSWD " + _read("/etc/passwd"), flush=True)

    def forward(self, a, b):
        out = torch.empty_like(a)
        add_kernel[(triton.cdiv(a.numel(), 1024),)](a, b, out, a.numel(), self.scale, BLOCK=1024)
        return out
