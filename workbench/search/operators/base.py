"""The operator interface: a context in, one proposed candidate (or a recorded reason why not) out."""

from __future__ import annotations

import abc
from dataclasses import dataclass, field
from typing import Any

from workbench.search.node import Node


@dataclass
class OperatorContext:
    """Everything an operator may read, snapshotted in the engine's thread (operators run in a pool)."""

    spec_path: str
    spec_source: str
    spec_key: str
    platform: str  # label, e.g. "cpu" or "cuda:sm_90"
    arch: str  # e.g. "cpu-interpreter", "sm_90"
    parents: list[Node] = field(default_factory=list)
    seen_hashes: frozenset[str] = frozenset()  # candidate sources already in the graph
    past_best: list[Node] = field(default_factory=list)  # from the context memory
    past_failures: list[Node] = field(default_factory=list)  # from the context memory
    overrides: dict[str, Any] = field(default_factory=dict)
    seed: int = 0  # per-proposal RNG seed (reproducible runs)
    # passing kernels of other specs from the context memory, with each one's spec path: the LLM
    # operator offers those whose spec has the same aten ops (cross-session reuse)
    related: list[tuple[str, Node]] = field(default_factory=list)


@dataclass
class Proposal:
    """What an operator produced. `source=None` means no candidate: `error_class` and `diagnosis` say why."""

    operator: str
    source: str | None = None
    prompt: str | None = None
    response: str | None = None
    error_class: str | None = None
    diagnosis: str = ""
    prompt_tokens: int = 0
    completion_tokens: int = 0
    meta: dict[str, Any] = field(default_factory=dict)
    fatal: bool = False  # the operator cannot work at all (unreachable endpoint, bad key): stop
    exhausted: bool = False  # nothing new to propose from these parents (tuning space done)
    # a candidate (or reply) turned away before the harness: recorded as a node, costs no evaluation;
    # the search's `max_rejected` budget counts these
    rejected: bool = False
    extra: list["Proposal"] = field(default_factory=list)  # the other, rejected replies of a best-of-n


class Operator(abc.ABC):
    """Turns parent node(s) into a new candidate. Must not raise: failures come back as Proposals."""

    name = "operator"
    can_draft = False  # can write a candidate from the spec alone
    supports_crossover = False  # accepts two parents
    can_repair = False  # can fix a candidate that fails (rewrite code, not just parameters)
    uses_related = False  # reads OperatorContext.related (the engine queries the memory only then)

    @abc.abstractmethod
    def propose(self, ctx: OperatorContext) -> Proposal: ...

    def close(self) -> None:  # noqa: B027 - an optional hook, most operators hold nothing
        pass
