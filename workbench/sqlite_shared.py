"""Opening one SQLite file that many threads and processes share (the context memory, a suite's store).

SQLite waits out a writer through its busy timeout, but not everywhere: switching a file to WAL, or opening
one while another connection recovers its WAL index, answers `database is locked` at once (a suite on the
GPU lost a problem to it when eight problems opened the run's memory together). Those steps retry here
with backoff until the same deadline the busy timeout would have given.
"""

from __future__ import annotations

import logging
import sqlite3
import time
from pathlib import Path
from typing import Callable, TypeVar

log = logging.getLogger(__name__)

T = TypeVar("T")

BUSY_TIMEOUT_S = 30.0


def _is_busy(exc: sqlite3.OperationalError) -> bool:
    text = str(exc).lower()
    return "locked" in text or "busy" in text


def retry_busy(step: Callable[[], T], *, deadline_s: float = BUSY_TIMEOUT_S, what: str = "sqlite") -> T:
    """`step()`, again after a pause while SQLite says the file is busy, until `deadline_s` has passed."""
    end = time.monotonic() + deadline_s
    pause = 0.02
    tries = 0
    while True:
        try:
            return step()
        except sqlite3.OperationalError as exc:
            tries += 1
            if not _is_busy(exc) or time.monotonic() + pause > end:
                raise
            if tries == 1:
                log.debug("%s busy (%s): retrying", what, exc)
            time.sleep(pause)
            pause = min(pause * 2, 0.5)


def connect_shared(path: str | Path, *, synchronous: str = "NORMAL") -> sqlite3.Connection:
    """An autocommit connection to `path` in WAL mode, usable from any thread (the caller locks)."""
    conn = sqlite3.connect(str(path), timeout=BUSY_TIMEOUT_S, isolation_level=None, check_same_thread=False)
    conn.row_factory = sqlite3.Row
    try:
        retry_busy(lambda: conn.execute("PRAGMA journal_mode=WAL").fetchone(), what=str(path))
        retry_busy(lambda: conn.execute(f"PRAGMA synchronous={synchronous}"), what=str(path))
    except BaseException:
        conn.close()
        raise
    return conn
