"""A KernelBench-format folder of small problems, candidates named after them, and broken problems.

Written by the tests into a temporary directory: `<root>/level1/<N>_<Name>.py`, like KernelBench.
"""
from __future__ import annotations

from pathlib import Path

# name -> (torch expression of x and y, Triton expression of x and y); sizes big enough that the
# CPU auto-sizer has to shrink them (batch_size * dim = 2**20 elements > the 2**16 default bound)
ELEMENTWISE = {
    "1_Add": ("x + y", "x + y"),
    "2_ReLU": ("torch.relu(x)", "tl.maximum(x, 0.0)"),
    "3_Scale": ("x * 2.0", "x * 2.0"),
    "4_Mul": ("x * y", "x * y"),
    "5_Sub": ("x - y", "x + y"),  # the candidate is wrong on purpose: incorrect, not failed
}

SPEC = '''import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x, y):
        return {expr}


batch_size = 1024
dim = 1024


def get_inputs():
    return [torch.randn(batch_size, dim), torch.randn(batch_size, dim)]


def get_init_inputs():
    return []
'''

CANDIDATE = '''import torch
import torch.nn as nn
import triton
import triton.language as tl

TUNABLES = {{"BLOCK": [256, 512, 1024, 2048]}}
BLOCK = 1024


@triton.jit
def _kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    y = tl.load(y_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, {expr}, mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x, y):
        x, y = x.contiguous(), y.contiguous()
        out = torch.empty_like(x)
        n = x.numel()
        _kernel[(triton.cdiv(n, BLOCK),)](x, y, out, n, BLOCK=BLOCK)
        return out
'''

BROKEN = {
    "6_SyntaxError": "import torch\nclass Model(torch.nn.Module:\n    pass\n",
    "7_NoGetInputs": ("import torch\nimport torch.nn as nn\n\n\nclass Model(nn.Module):\n"
                      "    def forward(self, x):\n        return x + 1\n\n\ndef get_init_inputs():\n    return []\n"),
    "8_HangAtImport": "import time\n\ntime.sleep(3600)\n",
}


def write_problems(root: Path, names: list[str] | None = None, broken: bool = False) -> Path:
    """`root/level1/` with the elementwise problems (and the broken ones); returns `root`."""
    level = root / "level1"
    level.mkdir(parents=True, exist_ok=True)
    for name, (expr, _) in ELEMENTWISE.items():
        if names is None or name in names:
            (level / f"{name}.py").write_text(SPEC.format(expr=expr))
    if broken:
        for name, text in BROKEN.items():
            (level / f"{name}.py").write_text(text)
    return root


def write_candidates(folder: Path, names: list[str] | None = None) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for name, (_, expr) in ELEMENTWISE.items():
        if names is None or name in names:
            (folder / f"{name}.py").write_text(CANDIDATE.format(expr=expr))
    return folder
