"""Test-wide setup, before anything imports triton: Triton's interpreter on the CPU, offline Hugging Face,
a headless matplotlib. No test file repeats it.

The one exception is `pytest -m gpu` on a machine with a CUDA device: the `gpu` tests (device checks and
the fuzzer of the case-study kernels) compile their kernels for it, so the interpreter stays off. Without
that, `gpu` tests are skipped (on a GPU machine too: they need compiled kernels, not the interpreter).
"""
from __future__ import annotations

import os
import sys

import pytest

from workbench.env import cuda_visible  # decides without importing torch or triton


def _marker_expression(argv: list[str]) -> str:
    for i, a in enumerate(argv):
        if a == "-m" and i + 1 < len(argv):
            return argv[i + 1]
        if a.startswith("-m") and len(a) > 2 and not a.startswith("-m="):
            return a[2:]
    return ""


def _gpu_run(argv: list[str]) -> bool:
    # An xdist worker's argv is not pytest's: it inherits the controller's decision through the environment.
    if os.environ.get("PYTEST_XDIST_WORKER"):
        return os.environ.get("WB_PYTEST_GPU_RUN") == "1"
    expr = _marker_expression(argv)
    return "gpu" in expr and "not gpu" not in expr and cuda_visible()


GPU_RUN = _gpu_run(sys.argv)
os.environ["WB_PYTEST_GPU_RUN"] = "1" if GPU_RUN else "0"
if not GPU_RUN:
    os.environ.setdefault("TRITON_INTERPRET", "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("MPLBACKEND", "Agg")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if GPU_RUN:
        return
    skip = pytest.mark.skip(reason="a gpu test: needs a CUDA device and `pytest -m gpu` (compiled kernels)")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)
