"""Finds its own channel through gc (policy off) and reports, with the right nonce, that the *spec* is bad.
A candidate's report can fail it, never blame someone else: `bad_spec` is outside the schema."""
import gc
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


def _channel():
    for o in gc.get_objects():
        if type(o).__name__ == "Channel" and getattr(o, "nonce", ""):
            return o
    return None


class ModelNew(nn.Module):
    def __init__(self, scale):
        super().__init__()
        self.scale = scale
        ch = _channel()
        if ch is not None:
            msg = {"finished": True, "status": os.environ.get("WB_FORGE_STATUS", "bad_spec"), "violations": [],
                   "error": "the spec is broken", "timings_s": {}, "launches": 1, "aten_ops": []}
            if os.environ.get("WB_FORGE_LAUNCHES"):
                msg["launches"] = os.environ["WB_FORGE_LAUNCHES"]  # a string where an int belongs
            ch.send(msg)
            os._exit(0)

    def forward(self, a, b):
        out = torch.empty_like(a)
        add_kernel[(triton.cdiv(a.numel(), 1024),)](a, b, out, a.numel(), self.scale, BLOCK=1024)
        return out
