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
