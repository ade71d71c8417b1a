"""Errors the profiling package raises; each message says what was wrong and what to do."""

from __future__ import annotations


class ProfilingError(RuntimeError):
    """Base class of every profiling error."""


class TraceFileError(ProfilingError):
    """A trace file is missing, empty, truncated or not a Proton output."""


class TraceVersionError(TraceFileError):
    """A trace was written by a Triton/Proton version whose format this package does not read."""


class MissingRegionsError(ProfilingError):
    """A profile lacks probe regions that the kernel declares."""

    def __init__(self, message: str, missing: list[str]):
        super().__init__(message)
        self.missing = missing


class SessionActiveError(ProfilingError):
    """A second profiling session was started while one is active."""


class ProfilingUnavailable(ProfilingError):
    """Proton cannot run here (no GPU driver, interpreter mode, or no Proton build)."""
