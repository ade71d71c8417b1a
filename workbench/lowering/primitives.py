"""The one registry of what the lowering can emit, filled where each part is defined (as Inductor's
`register_lowering`), from one explicit list of modules (`MODULES`).

- `register(op, Primitive)`: an ATen op (its packet name) lowered as one standalone kernel, no fusion.
- `register_tunables({name: (choices, default)})`: the TUNABLES a module's kernels read (the candidate
  declares the ones its kernels use, in registration order).
- `register_helper(name, source)`: a `@triton.jit` helper a kernel may call; emitted once per candidate.

`load()` imports every module of `MODULES` once; `lookup(op)` and the tables are complete after it. Adding a
primitive is: define it in a module that registers it, and name the module in `MODULES`. Nothing else
decides whether a primitive exists."""
from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any, Callable

# every module that registers primitives, tunables, helpers or fusion families (families.py); `load()`
# imports them all, so the tables are complete after it
MODULES = ("templates", "pointwise", "conv", "pool", "scan", "sort", "bucketize", "copies", "frexp", "gather",
           "rnn", "special", "softmax", "scatter_reduce", "compaction", "view_copies",
           "logcumsumexp", "distances", "adaptive_pool", "uniques", "histc", "mode", "repeat_interleave",
           "linalg_small", "polygamma", "grid_sample", "linalg_jacobi", "linalg_qr", "linalg_exp", "linalg_ldl",
           "hash_tensor", "segment_reduce", "histogram", "igamma", "fft_real", "ctc", "bincount", "one_hot",
           "int_matmul")


@dataclass(frozen=True)
class Primitive:
    prefix: str
    tunables: tuple[str, ...]
    # make(kernel name, node, names, expr) -> (kernel source, launch lines, helper names)
    make: Callable[..., Any]
    # the node returns a tuple: False for one tensor, True for (values, indices), an int for that many
    # outputs; they are named <node>_0, <node>_1, ...
    tuple_out: bool | int = False

    @property
    def n_out(self) -> int:
        return 2 if self.tuple_out is True else int(self.tuple_out)


PRIMITIVES: dict[str, Primitive] = {}
TUNABLE_DEFAULTS: dict[str, tuple[list[Any], Any]] = {}
HELPERS: dict[str, str] = {}
_loaded: list[bool] = []


def register(op: str, prim: Primitive) -> None:
    if op in PRIMITIVES and PRIMITIVES[op] != prim:
        raise ValueError(f"primitive {op} registered twice")
    PRIMITIVES[op] = prim


def register_tunables(defaults: dict[str, tuple[list[Any], Any]]) -> None:
    for k, v in defaults.items():
        if k in TUNABLE_DEFAULTS and TUNABLE_DEFAULTS[k] != v:
            raise ValueError(f"tunable {k} registered twice with different choices")
        TUNABLE_DEFAULTS[k] = v


def register_helper(name: str, source: str) -> None:
    HELPERS[name] = source


def load() -> None:
    if not _loaded:
        for m in MODULES:
            importlib.import_module(f"workbench.lowering.{m}")
        _loaded.append(True)


def lookup(op: str) -> Primitive | None:
    load()
    return PRIMITIVES.get(op)


def helper_sources(used: set[str]) -> list[str]:
    """The sources of the helpers a candidate's kernels call, in name order."""
    load()
    missing = sorted(used - HELPERS.keys())
    if missing:
        raise KeyError(f"helpers used but never registered: {missing}")
    return [HELPERS[n] for n in sorted(used)]
