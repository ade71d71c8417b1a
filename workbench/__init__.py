"""Kernel workbench: agentic search for fast, correct Triton kernels (KernelEvolve, rebuilt).

Heavy modules (torch, triton) are imported lazily so the CLI answers bad input quickly.
"""
from __future__ import annotations

from typing import Any

__version__ = "0.1.0"


def evaluate(*args: Any, **kwargs: Any):  # noqa: ANN201 - re-export, typed in harness
    """See `workbench.harness.evaluate`."""
    from workbench.harness import evaluate as _evaluate

    return _evaluate(*args, **kwargs)


def optimize(*args: Any, **kwargs: Any):  # noqa: ANN201 - re-export, typed in search
    """See `workbench.search.optimize`."""
    from workbench.search import optimize as _optimize

    return _optimize(*args, **kwargs)
