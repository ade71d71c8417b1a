"""What the LLM step reads of the search: the runtime context of one expansion.

A protocol, not a class: the search's `OperatorContext` (workbench/search/operators/base.py) has these
attributes and is passed as it is, so this package needs nothing from the search engine, and a script
or a test can hand the step any object with the same attributes (a dataclass of its own).
"""

from __future__ import annotations

from typing import Any, Protocol

from workbench.memory.records import Node


class StepContext(Protocol):
    spec_path: str
    spec_source: str
    platform: str  # label, e.g. "cpu" or "cuda:sm_90"
    arch: str  # e.g. "cpu-interpreter", "sm_90"
    parents: list[Node]  # none: a draft; one: a mutation; two: a crossover
    seen_hashes: frozenset[str]  # content hashes of the candidates already in the graph
    past_best: list[Node]  # from the context memory, for the prompt
    past_failures: list[Node]
    overrides: dict[str, Any]  # the spec's module-level constants as the search sets them
    seed: int  # per-expansion RNG seed: which region of the parent is asked for
    related: list[tuple[str, Node]]  # passing kernels of other specs, each with its spec's path
    calls_dir: str | None  # where each call's prompt and reply are saved (None: not saved)
