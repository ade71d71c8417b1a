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


# The device's memory, beside its clock: every job that holds GPU memory for a while (a harness evaluation,
# a torch.compile baseline) holds this lock shared; one that ran out of memory beside others runs again
# holding it exclusive, alone on the GPU. A gate (held exclusive only briefly by the shared, and through the
# wait by the exclusive) keeps a stream of shared holders from starving an exclusive one. Re-entrant within
# a process: a holder asking again gets it at once (no wait on its own lock through the gate).
_held_memory = 0


def memory_lock_path(device: str, index: int = 0) -> Path:
    return lock_path(device, index).with_suffix(".memory")


@contextlib.contextmanager
def device_memory(device: str, exclusive: bool = False, index: int = 0) -> Iterator[float]:
    """Hold `device`'s memory lock (shared, or `exclusive`) for the body; yields the seconds spent waiting.
    A no-op on the CPU unless `WB_CLOCK_CPU=1` (as `device_clock`)."""
    global _held_memory
    if (device != "cuda" and os.environ.get("WB_CLOCK_CPU") != "1") or _held_memory:
        yield 0.0
        return
    path = memory_lock_path(device, index)
    gate = os.open(path.with_suffix(".gate"), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    t0 = time.perf_counter()
    try:
        fcntl.flock(gate, fcntl.LOCK_EX)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
        finally:
            fcntl.flock(gate, fcntl.LOCK_UN)
        waited = time.perf_counter() - t0
        if waited > 1.0:
            log.debug("waited %.1f s for %s (%s)", waited, path, "exclusive" if exclusive else "shared")
        _held_memory += 1
        try:
            yield waited
        finally:
            _held_memory -= 1
    finally:
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)
        os.close(gate)


def out_of_memory(text: str) -> bool:
    """Whether an error's text is the GPU running out of memory (torch's and the CUDA driver's wording)."""
    low = text.lower()
    return "out of memory" in low or "outofmemoryerror" in low


def _alone_path(device: str, index: int = 0) -> Path:
    return lock_path(device, index).with_suffix(".alone")


def _alone_entry(key: str) -> str:
    import hashlib

    return hashlib.sha256(key.encode("utf-8")).hexdigest()


def needs_the_device_alone(key: str, device: str, index: int = 0) -> bool:
    """Whether the work named `key` (a problem at one size) was seen to run out of device memory beside
    other work on this device: every process that shares the device's memory lock reads one book, so the
    harness servers of one run (and of later runs on this host) learn it once, not once each."""
    try:
        with open(_alone_path(device, index), encoding="ascii") as fh:
            return _alone_entry(key) in {line.strip() for line in fh}
    except (OSError, UnicodeDecodeError):
        return False


def learn_the_device_alone(key: str, device: str, index: int = 0) -> None:
    """Write `key` into the book `needs_the_device_alone` reads (an append under the file's lock)."""
    entry = _alone_entry(key)
    try:
        fd = os.open(_alone_path(device, index), os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o600)
    except OSError as exc:
        log.warning("could not record %s as needing the device alone: %s", device, exc)
        return
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        known = os.pread(fd, 1 << 22, 0).decode("ascii", "replace").split()
        if entry not in known:
            os.write(fd, (entry + "\n").encode("ascii"))
    finally:
        os.close(fd)
