"""A cache of seeded spec inputs shared by the harness's processes (in /dev/shm when there is one).

Every evaluation rebuilds the same inputs from the same seeds: `get_inputs()` under `torch.manual_seed`
on the host, in the candidate process and again in the reference process. For large specs that is
most of the harness's overhead (a 4096^2 fp32 matmul: 2.4 s of host RNG per candidate on the H200).
The first evaluation of a (spec, constants, seed) generates and the trusted reference process stores
the result; later processes load it (a memory-mapped read of /dev/shm) instead of generating again.

Rules that keep it honest:
- only the reference process writes (the candidate process opens entries read-only; its guard refuses
  writes outside its sandbox anyway), and writes are atomic (temporary file, then rename);
- an entry holds the CPU RNG state `get_inputs()` left behind, restored on a hit, so a hit leaves the
  process exactly as a miss would;
- the key covers the spec's text, every `.py` beside it (helpers that build inputs), the constants in
  force, the seed and torch's version; anything that fails to load is a miss, never an error;
- entries only for all-CPU inputs; the cache is bounded (`WB_INPUT_CACHE_MB`, default 2048) and
  evicts the oldest entries first. `WB_INPUT_CACHE=off` disables it, `WB_INPUT_CACHE=DIR` moves it.
"""
from __future__ import annotations

import hashlib
import json
import logging
import os
import tempfile
from pathlib import Path
from typing import Any

import torch

from workbench.harness.settings import HarnessSettings
from workbench.spec import Spec

log = logging.getLogger(__name__)
_SIBLINGS: dict[str, str] = {}  # spec directory -> digest of its .py files (fixed for a process)


def cache_dir(env: str) -> Path | None:
    """Where entries live (`env`: the setting `WB_INPUT_CACHE`), or None when disabled."""
    if env.lower() in ("off", "0", "no", "false"):
        return None
    if env:
        return Path(env)
    base = Path("/dev/shm") if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK) else Path(
        tempfile.gettempdir())
    return base / f"wb_inputs_{os.getuid()}"


def _siblings_digest(spec: Spec) -> str:
    d = str(spec.path.resolve().parent)
    if d not in _SIBLINGS:
        h = hashlib.sha256()
        for p in sorted(Path(d).glob("*.py")):
            try:
                h.update(p.name.encode() + b"\0" + p.read_bytes())
            except OSError:
                pass
        _SIBLINGS[d] = h.hexdigest()
    return _SIBLINGS[d]


def entry_key(spec: Spec, seed: int, kind: str = "inputs") -> str:
    consts = json.dumps(spec.constants(), sort_keys=True, default=repr)
    h = hashlib.sha256("\0".join([kind, spec.source, _siblings_digest(spec), consts, str(seed),
                                  torch.__version__]).encode())
    return h.hexdigest()[:40]


class InputCache:
    """Load or store the host inputs of one seed; `writable=False` in the candidate process."""

    def __init__(self, writable: bool, directory: Path | None = None, max_mb: float | None = None,
                 settings: HarnessSettings | None = None) -> None:
        """`directory` and `max_mb` default to the settings' (`WB_INPUT_CACHE`, `WB_INPUT_CACHE_MB`): the
        harness passes its own, a tool outside it gets this process's environment's."""
        s = settings if settings is not None else HarnessSettings.from_env()
        self.dir = directory if directory is not None else cache_dir(s.input_cache)
        self.writable = writable and self.dir is not None
        self.max_bytes = int((max_mb if max_mb is not None else s.input_cache_mb) * 2**20)
        self.hits = self.misses = 0

    def prime(self, spec: Spec) -> None:
        """Read what the key needs from the spec's folder now (before a guard makes it private)."""
        if self.dir is not None:
            _siblings_digest(spec)

    def get(self, spec: Spec, seed: int) -> list[Any] | None:
        if self.dir is None:
            return None
        path = self.dir / (entry_key(spec, seed) + ".pt")
        try:
            blob = torch.load(path, weights_only=True, map_location="cpu", mmap=True)
            inputs, rng = blob["inputs"], blob["rng"]
            torch.set_rng_state(rng)
        except FileNotFoundError:
            self.misses += 1
            return None
        except Exception as exc:  # a torn or foreign file is a miss: the caller generates
            log.debug("input cache: unreadable %s: %s", path, exc)
            self.misses += 1
            return None
        self.hits += 1
        return list(inputs)

    def put(self, spec: Spec, seed: int, inputs: list[Any]) -> None:
        if not self.writable or self.dir is None:
            return
        tensors = [x for x in inputs if isinstance(x, torch.Tensor)]
        if any(t.device.type != "cpu" for t in tensors):
            return
        size = sum(t.numel() * t.element_size() for t in tensors)
        if size > self.max_bytes:
            return
        tmp: str | None = None
        try:
            self.dir.mkdir(mode=0o700, exist_ok=True)
            self._evict(self.max_bytes - size)
            path = self.dir / (entry_key(spec, seed) + ".pt")
            fd, tmp = tempfile.mkstemp(dir=self.dir, suffix=".tmp")
            with os.fdopen(fd, "wb") as f:
                torch.save({"inputs": list(inputs), "rng": torch.get_rng_state()}, f)
            os.replace(tmp, path)
        except Exception as exc:  # a full /dev/shm or an unpicklable input: just no cache entry
            log.debug("input cache: not stored: %s", exc)
            if tmp is not None and os.path.exists(tmp):
                os.unlink(tmp)

    def _evict(self, budget: int) -> None:
        entries = []
        for p in self.dir.glob("*.pt"):  # type: ignore[union-attr]
            try:
                st = p.stat()
            except OSError:
                continue
            entries.append((st.st_mtime, st.st_size, p))
        total = sum(s for _, s, _ in entries)
        for _, s, p in sorted(entries):
            if total <= budget:
                break
            try:
                p.unlink()
                total -= s
            except OSError:
                pass
