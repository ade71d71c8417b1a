"""The body of one Ray worker actor: a pre-warmed harness, one evaluation at a time.

The class is plain Python (Ray wraps it with `ray.remote` in `ray_backend`), so it carries the same
isolation rules as the local pool: every candidate runs in its own process forked by the harness
server, with the harness's timeout and secret stripping.
"""

from __future__ import annotations

import logging
import os
import platform as _platform
import socket
import time
from typing import Any

from workbench.jobs import EvalJob
from workbench.result import EvalResult, Status

log = logging.getLogger(__name__)


class HarnessWorker:
    def __init__(self, device: str = "auto", label: str | None = None) -> None:
        from workbench.env import ensure_interpreter_if_no_gpu

        ensure_interpreter_if_no_gpu()  # before anything imports triton in this process
        self._device = device
        self._label = label  # the platform resource this worker was pinned to, if any
        self._harness: Any = None

    def info(self) -> dict[str, Any]:
        """Who and what this worker is: the driver checks versions and platforms from this."""
        import torch
        import triton

        from platforms import describe_device

        plat = describe_device("cpu" if self._device == "cpu" else "auto")
        out: dict[str, Any] = {
            "pid": os.getpid(),
            "host": socket.gethostname(),
            "python": _platform.python_version(),
            "triton": triton.__version__,
            "torch": torch.__version__,
            "detected_label": plat.label,
            "label": self._label or plat.label,
            "platform": plat.to_dict(),
        }
        try:
            import ray

            ctx = ray.get_runtime_context()
            out["node_id"] = ctx.get_node_id()
            out["gpu_ids"] = [str(g) for g in ray.get_gpu_ids()]
        except Exception:  # outside Ray (unit use): no node identity
            out["node_id"] = None
        return out

    def warm(self) -> float:
        """Start the harness server now (torch and triton imported once), not at the first job."""
        from workbench.harness import Harness

        t0 = time.perf_counter()
        if self._harness is None:
            self._harness = Harness(device=self._device)
        if not self._harness.started:
            self._harness.start()
        return time.perf_counter() - t0

    def start(self) -> dict[str, Any]:
        """info() then warm(): what a replacement worker runs in one call."""
        info = self.info()
        info["warm_s"] = self.warm()
        return info

    def evaluate(self, job: EvalJob) -> tuple[EvalResult, float]:
        """One evaluation; returns (result, seconds spent in the harness) so the driver can price Ray."""
        t0 = time.perf_counter()
        if self._harness is None:
            self.warm()
        try:
            res = self._harness.evaluate_job(job)
        except (
            Exception
        ) as exc:  # the harness itself broke: an infrastructure error, and a fresh harness next
            log.exception("harness failed on job %s", job.job_id)
            try:
                self._harness.close()
            finally:
                self._harness = None
            res = EvalResult(
                status=Status.INFRA_ERROR,
                error=f"harness on {socket.gethostname()}: {type(exc).__name__}: {exc}",
                device=self._device,
            )
        return res, time.perf_counter() - t0

    def pid(self) -> int:
        return os.getpid()

    def close(self) -> None:
        if self._harness is not None:
            self._harness.close()
            self._harness = None
