"""Helpers both forked children import: the candidate process (hostile) and the reference process (trusted).

Each process has its own copy after the fork, so nothing here is shared state between them: a traceback's
tail, the device synchronize and the GPU warm-up both contenders run before a round (bound at import, in
the server, before any candidate code exists), and the value comparison of two inputs. Nothing here reads
the job, the spec or the channel; what runs in one process only lives in `candidate_proc.py` or
`reference_proc.py`.
"""
from __future__ import annotations

import time
from typing import Any

import torch

from workbench.harness import bound

_TB_LINES = 25


def tail(tb: str, n: int = _TB_LINES) -> str:
    return "\n".join(tb.strip().splitlines()[-n:])


def sync(device: str) -> None:
    bound.synchronize(device)  # bound at import: no candidate code runs in it, before `done` or after


_WARM: dict[str, Any] = {}
_MM = torch.mm  # bound at import: the warm-up before `go` runs no function a candidate put on torch


def gpu_warm(device: str, warm_ms: float = 0.0, matmuls: int = 6) -> None:
    """Keep the GPU busy before a round: after seconds of host-side staging its clocks are down, and a
    round of a few short repetitions would run at idle clocks. Both contenders run it, the same way:
    `matmuls` fp16 4096^3 products (about 1 ms on an H200), or with `warm_ms` (`WB_WARM_MS`) set, products until
    that many milliseconds of wall time have passed (a diagnosis knob of the timing bias, docs/harness.md)."""
    if device != "cuda":
        return
    if "w" not in _WARM:
        _WARM["w"] = torch.ones(4096, 4096, dtype=torch.float16, device="cuda")
        _WARM["o"] = torch.empty_like(_WARM["w"])
    warm_s = warm_ms / 1000.0
    if warm_s <= 0:
        for _ in range(matmuls):
            _MM(_WARM["w"], _WARM["w"], out=_WARM["o"])
        return
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < warm_s:
        for _ in range(4):
            _MM(_WARM["w"], _WARM["w"], out=_WARM["o"])
        torch.cuda.synchronize()


def same_values(a: Any, b: Any) -> bool:
    if isinstance(a, torch.Tensor):
        if a.dtype.is_floating_point:
            return bool(torch.equal(torch.nan_to_num(a, nan=0.0), torch.nan_to_num(b, nan=0.0))
                        and torch.equal(torch.isnan(a), torch.isnan(b)))
        return bool(torch.equal(a, b))
    return True


