"""One pre-warmed worker process, shared by the harness (`workbench.harness.Harness`) and the suites' fork
server (`workbench.suites.forkserver.ForkServer`).

A worker is `python -m MODULE ARGS...` kept running with its imports done (torch, triton: seconds each),
spoken to in JSON lines: one request on its stdin, one answer on its stdout. It announces itself with a
first line `{"ready": true, ...}`. Its stderr is the caller's. A worker that dies or stops answering is
started again once for the same request; a second loss is the caller's to report.
"""
from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

ROOT = str(Path(__file__).resolve().parents[1])


class WorkerLost(RuntimeError):
    """The worker died or did not answer, twice for one request."""


class WarmWorker:
    """`python -m module *args`, started on first use (or `start()`); `request` is thread-safe."""

    def __init__(self, module: str, args: tuple[str, ...] = (), env: dict[str, str] | None = None,
                 startup_timeout_s: float = 180.0, name: str = "worker") -> None:
        self.module, self.args, self.name = module, tuple(args), name
        self._env = env
        self._startup_timeout = startup_timeout_s
        self._proc: subprocess.Popen[str] | None = None
        self._lock = threading.Lock()
        self.startup_s: float | None = None  # the last start's seconds, until `ready`
        self.ready_info: dict[str, Any] = {}  # the last start's ready line

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def start(self) -> float:
        """Start it now if it is not running; returns the seconds this call spent starting it."""
        with self._lock:
            return self._ensure()

    def _ensure(self) -> float:
        if self.running:
            return 0.0
        env = dict(os.environ if self._env is None else self._env)
        env["PYTHONPATH"] = ROOT + os.pathsep + env.get("PYTHONPATH", "")
        t0 = time.perf_counter()
        self._proc = subprocess.Popen([sys.executable, "-m", self.module, *self.args], stdin=subprocess.PIPE,
                                      stdout=subprocess.PIPE, stderr=None, text=True, env=env, bufsize=1)
        line = self._readline(self._startup_timeout)
        try:
            info = json.loads(line) if line else {}
            ready = isinstance(info, dict) and bool(info.get("ready"))
        except ValueError:
            info, ready = {}, False
        if not ready:
            self.close()
            raise RuntimeError(f"the {self.name} failed to start (see its stderr above)")
        self.startup_s = time.perf_counter() - t0
        self.ready_info = info
        log.info("%s ready in %.2f s", self.name, self.startup_s)
        return self.startup_s

    def _readline(self, timeout_s: float) -> str | None:
        proc = self._proc
        assert proc is not None and proc.stdout is not None
        out: list[str] = []
        t = threading.Thread(target=lambda: out.append(proc.stdout.readline()), daemon=True)  # type: ignore[union-attr]
        t.start()
        t.join(timeout_s)
        return out[0] if out and out[0] else None

    def request(self, payload: dict[str, Any], timeout_s: float) -> tuple[str, float]:
        """Send `payload`, return (the answer's line, seconds spent starting the worker on the way).
        Raises `WorkerLost` when it is lost twice."""
        startup = 0.0
        with self._lock:
            for attempt in (1, 2):
                startup += self._ensure()
                proc = self._proc
                assert proc is not None and proc.stdin is not None
                try:
                    proc.stdin.write(json.dumps(payload) + "\n")
                    proc.stdin.flush()
                    line = self._readline(timeout_s)
                except (BrokenPipeError, OSError):
                    line = None
                if line:
                    return line, startup
                log.warning("%s lost (attempt %d); restarting", self.name, attempt)
                self.close()
        raise WorkerLost(f"the {self.name} died twice on this request")

    def close(self) -> None:
        proc, self._proc = self._proc, None
        if proc is None:
            return
        try:
            if proc.stdin:
                proc.stdin.close()
            proc.wait(timeout=10)
        except (subprocess.TimeoutExpired, OSError):
            proc.kill()
            proc.wait()
