"""Distributed evaluation on Ray (the `distributed` extra): `RayEvaluator` and its errors.

`RayEvaluator` needs `ray` and is imported on first use, so the scheduling core
(`workbench.distributed.dispatcher`) and the checks (`preflight`) import without it.
"""

from typing import Any

from workbench.distributed.errors import (
    ClusterUnreachable,
    DistributedError,
    PlatformUnavailable,
    WorkersUnplaceable,
    WorkerVersionMismatch,
)

__all__ = [
    "RayEvaluator",
    "DistributedError",
    "ClusterUnreachable",
    "PlatformUnavailable",
    "WorkerVersionMismatch",
    "WorkersUnplaceable",
]


def __getattr__(name: str) -> Any:
    if name == "RayEvaluator":
        from workbench.distributed.ray_backend import RayEvaluator

        return RayEvaluator
    raise AttributeError(name)
