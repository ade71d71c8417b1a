"""One clock per device: a cross-process lock held by whoever times work on a GPU.

Two processes timing kernels on one GPU at the same time slow each other down, so neither number is true.
The suite overlaps the CPU work of several problems (lowering, Triton's and torch.compile's compiles) with
the GPU's timing of one candidate; every timed window (the harness's baseline and timed rounds, the suite's
torch.compile baselines) holds this lock, an `flock` on a file named after the device, so the windows
never overlap across processes. On the CPU (the interpreter, where times rank nothing) it is a no-op unless
`WB_CLOCK_CPU=1`. The harness server holds it for its timed windows only (the baseline's rounds, the
candidate's timed rounds), so one evaluation's compile and correctness trials overlap another's timing.

The lock file's folder: `WB_CLOCK_DIR` (default the system's temp folder); its name carries the uid and the
device's index, so unrelated users and GPUs do not wait on each other.
"""
from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import tempfile
import time
from pathlib import Path
from typing import Iterator

log = logging.getLogger(__name__)


def lock_path(device: str, index: int = 0) -> Path:
    folder = Path(os.environ.get("WB_CLOCK_DIR") or tempfile.gettempdir())
    return folder / f"workbench-clock-{os.getuid()}-{device}{index}.lock"


@contextlib.contextmanager
def device_clock(device: str, index: int = 0) -> Iterator[float]:
    """Hold `device`'s clock for the body; yields the seconds spent waiting for it (0 on the CPU, unless
    `WB_CLOCK_CPU=1`: a CPU machine shared by timing jobs, and the tests of who holds it)."""
    if device != "cuda" and os.environ.get("WB_CLOCK_CPU") != "1":
        yield 0.0
        return
    path = lock_path(device, index)
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    t0 = time.perf_counter()
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        waited = time.perf_counter() - t0
        if waited > 1.0:
            log.debug("waited %.1f s for %s", waited, path)
        yield waited
    finally:
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)
