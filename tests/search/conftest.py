"""Search tests: CPU only (Triton's interpreter); one real harness pool shared by the module's tests."""

from __future__ import annotations

import pytest

from workbench.env import ensure_interpreter_if_no_gpu

ensure_interpreter_if_no_gpu()


@pytest.fixture(scope="session")
def cpu_evaluator():
    """A real LocalPoolEvaluator on CPU (one pre-warmed harness server), reused across tests."""
    from workbench.evaluator import LocalPoolEvaluator

    ev = LocalPoolEvaluator(workers=1, device="cpu")
    yield ev
    ev.close()
