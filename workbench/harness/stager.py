"""The round stager (trusted, in the server process): shows the candidate each timed round's inputs only
when that round begins.

The reference process writes round k's sets into the job's `pending` directory (one the candidate cannot
see: its mount namespace has a private /dev/shm, and the directory is mode 0700 of another uid); the
stager renames the file into the stage when round k begins, and may ask for round k+1 while the candidate
loads round k. The job pipeline (`job_pipeline.py`) drives it through `rounds.drive`.
"""
from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any, Protocol

from workbench.harness import rounds as _rounds
from workbench.harness.channel import Link


class _Seeds(Protocol):
    """What the stager needs of the server: the seeds of round k's r repetitions (`Server._seeds`)."""

    def _seeds(self, kind: int, k: int, r: int) -> list[int]: ...


class RoundStager:
    """Stages the candidate's rounds: the reference process writes round k's sets into `pending` (a
    directory the candidate cannot see: its mount namespace has a private /dev/shm, and it is mode 0700
    of another uid), and only when round k begins is the file renamed into the stage. `ahead` lets the
    reference write round k+1 while the candidate loads round k."""

    def __init__(self, server: _Seeds, ref: Link, stage: Path, pending: Path, deadline: float,
                 cache: bool) -> None:
        self.server, self.ref, self.stage, self.pending = server, ref, stage, pending
        self.deadline, self.cache = deadline, cache
        self.inflight: tuple[int, int] | None = None
        self.ready: dict[tuple[int, int], str] = {}
        self.files: list[Path] = []
        self.wait_s = 0.0

    def _ask(self, k: int, r: int) -> None:
        self.ref.send({"make_round": k, "seeds": self.server._seeds(1, k, r), "dir": str(self.pending),
                       "cache": self.cache})
        self.inflight = (k, r)

    def _wait(self) -> None:
        t0 = time.perf_counter()
        made = self.ref.recv(self.deadline, expect="made")
        self.wait_s += time.perf_counter() - t0
        if "failure" in made:
            raise _rounds.RoundFailure({"reference_error": made["reference_error"]})
        assert self.inflight is not None
        self.ready[self.inflight] = made["file"]
        self.inflight = None

    def drain(self) -> None:
        """Collect a round staged ahead that will not run (the rounds ended early): the reference's next
        report must be the verdict."""
        if self.inflight is not None:
            try:
                self._wait()
            except _rounds.RoundFailure:
                self.inflight = None

    def ahead(self, k: int, r: int) -> Any:
        self._ask(k, r)
        return self._wait

    def __call__(self, k: int, r: int) -> dict[str, Any]:
        if self.inflight is not None:
            self._wait()
        if (k, r) not in self.ready:
            self._ask(k, r)
            self._wait()
        name = self.ready.pop((k, r))
        for p in self.files:
            p.unlink(missing_ok=True)
        os.replace(self.pending / name, self.stage / name)
        for old in self.ready.values():  # staged ahead for an R that changed: never shown
            if old != name:
                (self.pending / old).unlink(missing_ok=True)
        self.ready.clear()
        self.files = [self.stage / name]
        return {"stage": k, "file": name}

