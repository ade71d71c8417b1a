"""An honest vector_add candidate that uses standard-library helpers which read frames internally."""
import enum
import logging
import warnings
from collections import namedtuple
from typing import NamedTuple

import torch
import torch.nn as nn
import triton
import triton.language as tl

Config = namedtuple("Config", "block warps")
log = logging.getLogger("candidate")


class Mode(enum.Enum):
    FAST = 1


class Launch(NamedTuple):
    grid: int


@triton.jit
def add_kernel(a_ptr, b_ptr, out_ptr, n, scale, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(out_ptr + offs, tl.load(a_ptr + offs, mask=m) + tl.load(b_ptr + offs, mask=m) * scale, mask=m)


class ModelNew(nn.Module):
    def __init__(self, scale):
        super().__init__()
        self.scale = scale
        self.cfg = Config(256, 4)

    def forward(self, a, b):
        log.warning("launching with %s", self.cfg)
        warnings.warn("a harmless warning from the candidate", stacklevel=2)
        out = torch.empty_like(a)
        launch = Launch(triton.cdiv(a.numel(), self.cfg.block))
        add_kernel[(launch.grid,)](a, b, out, a.numel(), self.scale, BLOCK=self.cfg.block)
        return out
