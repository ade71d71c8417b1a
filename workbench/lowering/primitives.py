"""Registry of the standalone primitives (ops that are one kernel each, without fusion).

The modules that define primitives register themselves on import; `codegen` imports them (importing them
from here would close a cycle: each of them imports `register` from this module)."""
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
