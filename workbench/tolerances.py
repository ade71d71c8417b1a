"""Per-dtype tolerances, declared next to the dtypes they apply to.

`tf32` is the row a spec opts into with `ALLOW_TF32 = True` (Triton's default for an fp32 `tl.dot`
on NVIDIA GPUs rounds operands to tf32: relative errors near 3e-4 in norm, larger per element).
"""
from __future__ import annotations

import torch

# (atol, rtol), compared as |out - ref| <= atol + rtol * |ref|, elementwise.
DEFAULT_TOLERANCES: dict[str, tuple[float, float]] = {
    "float64": (1e-7, 1e-7),
    "float32": (1e-4, 1e-4),
    "tf32": (1e-2, 1e-2),
    "float16": (1e-2, 1e-2),
    "bfloat16": (2e-2, 2e-2),
    "float8_e4m3fn": (1e-1, 1e-1),
    "float8_e5m2": (2e-1, 2e-1),
}


def dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def is_exact_dtype(dtype: torch.dtype) -> bool:
    """Integer, bool and other non-floating outputs must match bit for bit."""
    return not (dtype.is_floating_point or dtype.is_complex)


def tolerance_for(dtype: torch.dtype, overrides: dict[str, tuple[float, float]] | None = None,
                  allow_tf32: bool = False) -> tuple[float, float]:
    """(atol, rtol) for an output of `dtype`; (0, 0) for exact dtypes."""
    if is_exact_dtype(dtype):
        return (0.0, 0.0)
    name = dtype_name(dtype)
    table = dict(DEFAULT_TOLERANCES)
    if overrides:
        table.update({k: tuple(v) for k, v in overrides.items()})  # type: ignore[misc]
    if name == "float32" and allow_tf32:
        return table["tf32"]
    return table.get(name, (1e-2, 1e-2))


# The case studies' float kernels (conv1d, Optimized FM, PFFN): outputs of order 1, accumulated in fp32 and
# rounded to the dtype once or twice (an intermediate, the output), compared with PyTorch in the same dtype
# or with fp32. One table for their specs, declared benchmarks and device checks: it used to be six copies
# that had drifted (bf16 atol 5e-2 in four, 6e-2 in the two PFFN ones). bf16 5e-2: every bf16 result of the
# H200 fuzzer was inside it (max abs error against fp32: PFFN 3.8e-2, conv1d 2.8e-2; Optimized FM reached
# 6.9e-2 on its largest outputs, inside atol + rtol * |ref|: results/case_studies/gpu_fuzz/seed1_cd3f253.json).
CASE_STUDY_TOLERANCES: dict[str, tuple[float, float]] = {
    "float32": (1e-4, 1e-4),
    "tf32": (1e-2, 1e-2),
    "float16": (1e-2, 1e-2),
    "bfloat16": (5e-2, 2e-2),
}


def case_study_tolerances(tf32: bool = False) -> dict[str, tuple[float, float]]:
    """A copy of `CASE_STUDY_TOLERANCES`; with `tf32` the float32 row is the tf32 one (a benchmark whose
    kernel and baselines both run fp32 on TF32 tensor cores, as cuDNN does by default)."""
    table = dict(CASE_STUDY_TOLERANCES)
    if tf32:
        table["float32"] = table["tf32"]
    return table
