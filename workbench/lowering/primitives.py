"""Registry of the standalone primitives (ops that are one kernel each, without fusion)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable


@dataclass(frozen=True)
class Primitive:
    prefix: str
    tunables: tuple[str, ...]
    # make(kernel name, node, names, expr) -> (kernel source, launch lines, helper names)
    make: Callable[..., Any]
    tuple_out: bool = False   # the node returns (values, indices): outputs named <node>_0, <node>_1


PRIMITIVES: dict[str, Primitive] = {}


def register(op: str, prim: Primitive) -> None:
    PRIMITIVES[op] = prim


def load_all() -> None:
    """Import the modules that register primitives (each registers itself on import)."""
    from workbench.lowering import gather, pool, scan  # noqa: F401
