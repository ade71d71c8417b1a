"""One clock per device: a cross-process readers-writer lock on the GPU's work.

Two processes running kernels on one GPU at the same time slow each other down, so a time taken while
anything else runs there is not true. The suite overlaps the CPU work of several problems (lowering,
Triton's and torch.compile's compiles) with the GPU's timing of one candidate. So every timed window (the
harness's baseline and timed rounds, the suite's torch.compile baselines) holds this clock *exclusive*
(`device_clock`), and every stretch of untimed GPU work (an evaluation's input generation, reference runs,
candidate trials and judging; a compile baseline's inputs) holds it *shared* (`device_busy`): untimed work
overlaps untimed work, never a timed window. Until 2026-12-07 only the timed windows held it, and other
evaluations' trials and input generation (gigabytes at level 1's published sizes) ran beside them: call 10's
Sigmoid timed 1.63x of eager beside them, 0.84x alone.

The lock is an `flock` on a file named after the device; a gate (held exclusive only briefly by a shared
holder, and through its wait by an exclusive one) keeps a stream of shared holders from starving a timed
window. Within a process both are re-entrant, and a shared holder that opens a timed window gives its shared
hold up while it queues and takes it back after: two evaluations reaching their timed windows at once would
otherwise each wait for the other's shared hold forever. Order with the memory lock: `device_memory` is
always taken first (outside), the clock inside, and no clock holder ever waits on the memory lock.

On the CPU (the interpreter, where times rank nothing) both are no-ops unless `WB_CLOCK_CPU=1`. The lock
file's folder: `WB_CLOCK_DIR` (default the system's temp folder); its name carries the uid and the device's
index, so unrelated users and GPUs do not wait on each other. One thread per process takes it (the harness
server, a compile baseline's child): the holds are counted per process, not per thread. `WB_CLOCK_SHARED=off`
turns the shared holds off (timed windows then exclude only each other, as before 2026-12-07): a way out
should they ever stall a run, at the price of ratios taken beside other evaluations' GPU work.
"""
from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

log = logging.getLogger(__name__)


def lock_path(device: str, index: int = 0) -> Path:
    folder = Path(os.environ.get("WB_CLOCK_DIR") or tempfile.gettempdir())
    return folder / f"workbench-clock-{os.getuid()}-{device}{index}.lock"


def _active(device: str) -> bool:
    return device == "cuda" or os.environ.get("WB_CLOCK_CPU") == "1"


@dataclass
class _Hold:
    """This process's hold of one device's clock: the open file (while held) and how deep each kind is."""

    fd: int = -1
    shared: int = 0
    exclusive: int = 0


_holds: dict[Path, _Hold] = {}


def clock_gate_path(path: Path) -> Path:
    """The clock's own gate, never the memory lock's (`device_memory`): a job waiting to hold the memory alone
    holds that gate until every other job has left, and those jobs open and close timed windows on the way
    (one shared gate deadlocked the first GPU run of the readers-writer clock, 2026-12-07)."""
    return path.with_name(path.name + ".gate")


def _gated_flock(path: Path, fd: int, mode: int) -> None:
    """`flock(fd, mode)` taken through `path`'s gate: while one process waits for the exclusive lock it holds
    the gate, so later shared requests queue behind it instead of renewing the shared hold forever."""
    gate = os.open(clock_gate_path(path), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(gate, fcntl.LOCK_EX)
        try:
            fcntl.flock(fd, mode)
        finally:
            fcntl.flock(gate, fcntl.LOCK_UN)
    finally:
        os.close(gate)


def _open(path: Path, hold: _Hold) -> None:
    if hold.fd < 0:
        hold.fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)


def _release(hold: _Hold) -> None:
    """Unlock and close the file once this process holds nothing of it."""
    if hold.fd >= 0 and not hold.shared and not hold.exclusive:
        fcntl.flock(hold.fd, fcntl.LOCK_UN)
        os.close(hold.fd)
        hold.fd = -1


@contextlib.contextmanager
def device_clock(device: str, index: int = 0) -> Iterator[float]:
    """Hold `device`'s clock exclusive for the body (a timed window: nothing else runs on the GPU); yields
    the seconds spent waiting for it (0 on the CPU, unless `WB_CLOCK_CPU=1`: a CPU machine shared by timing
    jobs, and the tests of who holds it). A shared hold of this process is given up while it waits and taken
    back (through the gate) after the body."""
    if not _active(device):
        yield 0.0
        return
    path = lock_path(device, index)
    hold = _holds.setdefault(path, _Hold())
    if hold.exclusive:  # nested in this process's own window
        hold.exclusive += 1
        try:
            yield 0.0
        finally:
            hold.exclusive -= 1
        return
    _open(path, hold)
    t0 = time.perf_counter()
    if hold.shared:
        fcntl.flock(hold.fd, fcntl.LOCK_UN)  # queue with nothing held (see the module's docstring)
    try:
        _gated_flock(path, hold.fd, fcntl.LOCK_EX)
    except BaseException:
        if hold.shared:
            _gated_flock(path, hold.fd, fcntl.LOCK_SH)
        else:
            _release(hold)
        raise
    waited = time.perf_counter() - t0
    if waited > 1.0:
        log.debug("waited %.1f s for %s (exclusive)", waited, path)
    hold.exclusive = 1
    try:
        yield waited
    finally:
        hold.exclusive = 0
        if hold.shared:  # unlocked first: waiting at the gate while holding it exclusive would deadlock
            fcntl.flock(hold.fd, fcntl.LOCK_UN)
            _gated_flock(path, hold.fd, fcntl.LOCK_SH)
        else:
            _release(hold)


@contextlib.contextmanager
def device_busy(device: str, index: int = 0) -> Iterator[float]:
    """Hold `device`'s clock shared for the body (untimed GPU work: it waits while a timed window runs and
    keeps new windows from opening); yields the seconds spent waiting. A no-op on the CPU unless
    `WB_CLOCK_CPU=1`, and within this process's own hold of either kind."""
    if not _active(device) or os.environ.get("WB_CLOCK_SHARED") == "off":
        yield 0.0
        return
    path = lock_path(device, index)
    hold = _holds.setdefault(path, _Hold())
    waited = 0.0
    if not hold.shared and not hold.exclusive:
        _open(path, hold)
        t0 = time.perf_counter()
        try:
            _gated_flock(path, hold.fd, fcntl.LOCK_SH)
        except BaseException:
            _release(hold)
            raise
        waited = time.perf_counter() - t0
        if waited > 1.0:
            log.debug("waited %.1f s for %s (shared)", waited, path)
    hold.shared += 1
    try:
        yield waited
    finally:
        hold.shared -= 1
        _release(hold)


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
