"""A deterministic stand-in evaluator for tests about the search's arithmetic only (policies,
termination, bookkeeping). Anything about real kernels uses the real harness on CPU."""

from __future__ import annotations

import threading
from concurrent.futures import Future

from workbench.evaluator import EvalJob, Evaluator
from workbench.result import EvalResult, Status
from workbench.search.tunables import TunablesError, parse_tunables


def toy_fitness(cfg: dict) -> float:
    """A smooth landscape over BLOCK in [16..1024] and WARPS in [1..8], best at BLOCK=256, WARPS=4."""
    import math

    b = math.log2(cfg["BLOCK"]) - 8
    w = math.log2(cfg["WARPS"]) - 2
    return round(2.0 / (1.0 + 0.25 * b * b + 0.5 * w * w), 6)


class FakeEvaluator(Evaluator):
    """Scores a candidate by its TUNABLES through `toy_fitness`; `FAIL` in the source fails it."""

    def __init__(self, capacity: int = 1, fitness=toy_fitness) -> None:
        self._capacity = capacity
        self.fitness = fitness
        self.jobs: list[EvalJob] = []
        self._lock = threading.Lock()

    @property
    def capacity(self) -> int:
        return self._capacity

    def submit(self, job: EvalJob) -> "Future[EvalResult]":
        with self._lock:
            self.jobs.append(job)
        fut: Future[EvalResult] = Future()
        fut.set_result(self.score(job.candidate_source))
        return fut

    def score(self, source: str) -> EvalResult:
        if "FAIL" in source:
            return EvalResult(status=Status.COMPILE_ERROR, error="CompilationError: FAIL marker")
        try:
            cfg = parse_tunables(source).current
        except TunablesError as exc:
            return EvalResult(status=Status.RUNTIME_ERROR, error=str(exc))
        f = self.fitness(cfg)
        return EvalResult(
            status=Status.PASSED,
            fitness=f,
            speedup=f,
            correct=True,
            runtime_us=100.0 / f,
            baseline_runtime_us=100.0,
            device="cpu",
            platform={"label": "cpu"},
        )


TOY_SOURCE = '''"""toy candidate"""
TUNABLES = {"BLOCK": [16, 32, 64, 128, 256, 512, 1024], "WARPS": [1, 2, 4, 8]}
BLOCK = 16
WARPS = 1


def tunables_valid(cfg):
    return cfg["BLOCK"] * cfg["WARPS"] <= 4096
'''

TOY_SPEC = """import torch
from torch import nn

N = 7


class Model(nn.Module):
    def forward(self, x):
        return x + 1


def get_inputs():
    return [torch.randn(N)]


def get_init_inputs():
    return []
"""
