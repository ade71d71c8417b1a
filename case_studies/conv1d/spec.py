"""conv1d (KernelEvolve section 5.1), KernelBench format. `Model` is the paper's baseline (`F.conv1d`).

Production (section 5.1): x [2048, 96, 200], C_out 96. The paper gives no kernel size: kernel 3,
stride 1, padding 1 is our production case. FP16 for serving, FP32 (TF32 tensor cores, cuDNN's default)
for training. The module defaults are a small odd CPU shape.
"""
from __future__ import annotations

import torch

from case_studies.conv1d.reference import Conv1dReference
from workbench.tolerances import case_study_tolerances

# The case-study kernel imports its own package's helpers (the harness's static policy allows these).
ALLOWED_IMPORTS = ["case_studies"]

B = 3
C_IN = 24
C_OUT = 20
L = 37
KSIZE = 3
STRIDE = 1
PADDING = 1
DTYPE = "float32"

SHAPES = {
    "production": dict(B=2048, C_IN=96, C_OUT=96, L=200, KSIZE=3, STRIDE=1, PADDING=1, DTYPE="float16"),
    "production_fp32": dict(B=2048, C_IN=96, C_OUT=96, L=200, KSIZE=3, STRIDE=1, PADDING=1, DTYPE="float32"),
    "kernel1": dict(B=2048, C_IN=96, C_OUT=96, L=200, KSIZE=1, STRIDE=1, PADDING=0, DTYPE="float16"),
    "kernel5": dict(B=2048, C_IN=96, C_OUT=96, L=200, KSIZE=5, STRIDE=1, PADDING=2, DTYPE="float16"),
    "batch256": dict(B=256, C_IN=96, C_OUT=96, L=200, KSIZE=3, STRIDE=1, PADDING=1, DTYPE="float16"),
    "odd": dict(B=2, C_IN=5, C_OUT=7, L=123, KSIZE=5, STRIDE=2, PADDING=2, DTYPE="float16"),
}
CPU_SHAPES = ["odd"]
# (atol, rtol). fp16/bf16: one rounding of an output of magnitude ~3; fp32 runs on TF32 tensor cores
# (ALLOW_TF32), as cuDNN does by default, so it takes the tf32 row rather than the ieee fp32 one.
TOLERANCES = case_study_tolerances()   # the tf32 row applies: ALLOW_TF32 below
ALLOW_TF32 = True


class Model(Conv1dReference):
    def __init__(self, c_in: int, c_out: int, kernel_size: int, stride: int = 1, padding: int = 0,
                 bias: bool = True, dtype: str = "float32"):
        super().__init__(c_in, c_out, kernel_size, stride, padding, bias, dtype)


def get_inputs() -> list[torch.Tensor]:
    return [torch.randn(B, C_IN, L, dtype=getattr(torch, DTYPE))]


def get_init_inputs() -> list:
    return [C_IN, C_OUT, KSIZE, STRIDE, PADDING, True, DTYPE]
