"""One test, any device: the harness suites' device parameter.

Every exploit suite runs on the CPU (Triton's interpreter) always and on the GPU under `pytest -m gpu`:
the `cuda` parameter carries the `gpu` mark, so `tests/conftest.py` skips it, with its reason, wherever
compiled kernels cannot run. On the GPU the suites share one `Harness(device="cuda")` per module (a
server start with its spares' CUDA contexts costs seconds) and check vector_add at its CPU shape with
few trials: the GPU suite's budget for all of them is about two minutes on an H200. What the device
changes (compiled kernels, the device-time rounds on a captured graph and its audit, the device outbox)
is exercised at any size; what a large shape adds is measured elsewhere (`results/harness/`).
"""
from __future__ import annotations

from typing import Any

import pytest

DEVICES = [pytest.param("cpu", id="cpu"), pytest.param("cuda", id="cuda", marks=pytest.mark.gpu)]

# vector_add's own CPU shape (`CPU_SHAPES`): the CPU already uses only it; the GPU is held to it too.
SMALL_SHAPES = ["small_odd"]


def sized(device: str, trials: int) -> dict[str, Any]:
    """`evaluate`'s size arguments on `device`: the CPU's as the suite wrote them, the GPU's at most two
    trials (the last trial still refills the previous one's buffers) on the small shape."""
    if device == "cpu":
        return {"trials": trials}
    return {"trials": min(trials, 2), "shapes": SMALL_SHAPES}


def hang_timeout_s(device: str) -> float:
    """The wall-clock limit for a candidate that never returns: long enough for the interpreter to start,
    short on the GPU, whose spare process is already warm."""
    return 20.0 if device == "cpu" else 8.0
