"""Errors the distributed evaluator raises before a search starts (bad cluster, bad input)."""

from __future__ import annotations


class DistributedError(ValueError, RuntimeError):
    """The cluster cannot serve the evaluations asked for; the message says what to fix.

    A ValueError too: callers that validate their configuration (`make_evaluator`, the search's
    start-up) already turn ValueError into a clear message before anything runs.
    """


class ClusterUnreachable(DistributedError):
    """The Ray address does not answer (or answers, but not as a Ray cluster)."""


class PlatformUnavailable(DistributedError):
    """No worker of a requested platform exists in the cluster."""


class WorkerVersionMismatch(DistributedError):
    """A worker runs another Triton version than the driver: its kernels would not be the ones searched."""


class WorkersUnplaceable(DistributedError):
    """Ray could not start the requested workers (not enough GPUs/CPUs/platform slots)."""
