"""The operator interface: a context in, one typed proposal out; the verdict of what it proposed back.

The engine reads a proposal's `signal`, never its text:

- `CANDIDATE`: `source` is new; the engine evaluates it. A copy of a node already in the graph is
  a `duplicate` rejection when it had a cost (`costly`, the default), else (the offline tuner's) it is
  dropped unrecorded; many drops in a row stop the search as exhausted.
- `REJECTED`: turned away before evaluation; `error_class` is the reason (`precheck`,
  `edit_not_applied`, `duplicate`) and `diagnosis` the detail. Recorded as a node, costs no
  evaluation; the search's `max_rejected` bounds them.
- `FAILED`: no candidate (an LLM error, no code in the reply, no parent to tune); recorded, and it
  counts against the evaluation budget as a failed node. `fatal`: the operator cannot work at all.
- `EXHAUSTED`: nothing new can come from this operator (every configuration of the tuning space is in
  the graph): the search stops with `space_exhausted`.

`provenance` says how the candidate was made (model, sample, temperature, the saved LLM call).
"""

from __future__ import annotations

import abc
from dataclasses import asdict, dataclass, field
from enum import Enum
from pathlib import Path
from typing import Any

from workbench.search.node import Node


class Signal(str, Enum):
    CANDIDATE = "candidate"
    REJECTED = "rejected"
    FAILED = "failed"
    EXHAUSTED = "exhausted"


@dataclass
class OperatorContext:
    """Everything an operator may read, snapshotted in the engine's thread (operators run in a pool).
    It is also the LLM step's `workbench.llm.context.StepContext`."""

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
    calls_dir: str | None = None  # where an LLM operator saves each call (runs/<run>/llm_calls); None: nowhere


@dataclass(frozen=True)
class Provenance:
    """How a proposal was made; saved in its node's `meta["provenance"]`."""

    operator: str  # the operator that made it ("llm", "offline")
    model: str | None = None  # the model that answered
    sample: int | None = None  # the i-th reply of a best-of-n expansion
    temperature: float | None = None
    form: str | None = None  # module | region | edits (an LLM reply), tuned (the offline tuner)
    region: str | None = None  # the parent's part the prompt asked for
    call_file: str | None = None  # the saved LLM call (workbench.llm.transcript)

    def to_meta(self, run_folder: str | Path | None = None) -> dict[str, Any]:
        """The fields that are set; the call file relative to the run folder when inside it."""
        out = {k: v for k, v in asdict(self).items() if v is not None}
        if self.call_file and run_folder is not None:
            try:
                out["call_file"] = str(Path(self.call_file).relative_to(Path(run_folder)))
            except ValueError:
                pass
        return out


@dataclass
class Proposal:
    """What an operator produced: a candidate, or a recorded reason why not (see the module docstring)."""

    operator: str  # the node's operator label: llm-draft, llm, llm-crossover, offline, offline-crossover
    source: str | None = None
    prompt: str | None = None
    response: str | None = None
    error_class: str | None = None
    diagnosis: str = ""
    prompt_tokens: int = 0
    completion_tokens: int = 0
    meta: dict[str, Any] = field(default_factory=dict)
    # CANDIDATE when there is a source, FAILED when not, unless the operator says otherwise
    signal: Signal | None = None
    fatal: bool = False  # the operator cannot work at all (unreachable endpoint, bad key): stop
    # made at a cost (a model call): a duplicate of it is still recorded; the tuner's are free and dropped
    costly: bool = True
    provenance: Provenance | None = None
    extra: list["Proposal"] = field(default_factory=list)  # the other, turned-away replies of a best-of-n

    def __post_init__(self) -> None:
        if self.signal is None:
            self.signal = Signal.CANDIDATE if self.source is not None else Signal.FAILED
        if self.signal is Signal.CANDIDATE and self.source is None:
            raise ValueError("a CANDIDATE proposal needs a source")

    @property
    def to_evaluate(self) -> bool:
        return self.signal is Signal.CANDIDATE


class Operator(abc.ABC):
    """Turns parent node(s) into a new candidate. Must not raise: failures come back as Proposals."""

    name = "operator"
    can_draft = False  # can write a candidate from the spec alone
    supports_crossover = False  # accepts two parents
    can_repair = False  # can fix a candidate that fails (rewrite code, not just parameters)
    uses_related = False  # reads OperatorContext.related (the engine queries the memory only then)

    @abc.abstractmethod
    def propose(self, ctx: OperatorContext) -> Proposal: ...

    def record_verdict(self, node: Node, run_folder: Path) -> None:  # noqa: B027 - an optional hook
        """Called once a node this operator proposed has its verdict (evaluated, or rejected/failed
        before evaluation); the LLM operator links it to the saved call."""

    def close(self) -> None:  # noqa: B027 - an optional hook, most operators hold nothing
        pass
