"""The typed records the context memory stores: one `Node` per candidate, one `RunInfo` per search.

They live here, not in `workbench.search`, because the memory is below the search in the dependency
order (search -> memory) and is usable alone (cross-session queries from a notebook).
"""

from __future__ import annotations

import hashlib
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

from workbench.result import EvalResult

# Node.status values beyond the harness's `Status`: a node is created "pending" (generated, not yet
# evaluated) and ends with a harness status or "generation_failed" (no candidate came out of the
# operator: LLM error, unparseable response, exhausted tuning space).
PENDING = "pending"
GENERATION_FAILED = "generation_failed"


def content_hash(text: str) -> str:
    """The key prompt, response, source and result texts are stored under (once each)."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def new_id() -> str:
    return uuid.uuid4().hex[:12]


@dataclass
class Node:
    """One candidate in a search graph: where it came from, what it is, how it fared."""

    run_id: str
    spec_key: str
    operator: str  # seed | offline | offline-crossover | llm | llm-crossover ...
    parents: list[str] = field(default_factory=list)  # one id, two for crossover, none for seeds/drafts
    source: str | None = None  # candidate source; None when generation failed
    prompt: str | None = None  # the full prompt text (LLM operators), for audit
    response: str | None = None  # the raw model response
    status: str = PENDING  # pending | a workbench.result.Status value | generation_failed
    error_class: str | None = None  # None when passed or pending; else the failure class
    fitness: float = 0.0
    speedup: float = 0.0
    runtime_us: float | None = None
    result: EvalResult | None = None
    diagnosis: str = ""
    platform: str = "cpu"
    prompt_tokens: int = 0
    completion_tokens: int = 0
    island: int | None = None
    seq: int = 0  # creation order within the run
    created_at: float = field(default_factory=time.time)
    evaluated_at: float | None = None
    meta: dict[str, Any] = field(default_factory=dict)
    id: str = field(default_factory=new_id)

    @property
    def evaluated(self) -> bool:
        return self.status != PENDING

    @property
    def passed(self) -> bool:
        return self.status == "passed"

    @property
    def source_hash(self) -> str | None:
        return content_hash(self.source) if self.source is not None else None

    def apply_result(self, result: EvalResult, diagnosis: str) -> None:
        """Record the harness's verdict on this node."""
        self.result = result
        self.status = result.status.value
        self.error_class = None if result.passed else result.status.value
        self.fitness = float(result.fitness) if result.passed else 0.0
        self.speedup = float(result.speedup or 0.0)
        self.runtime_us = result.runtime_us
        self.diagnosis = diagnosis
        self.evaluated_at = time.time()

    def fail_generation(self, error_class: str, diagnosis: str) -> None:
        """Record that the operator produced no candidate (the node stays in the graph)."""
        self.status = GENERATION_FAILED
        self.error_class = error_class
        self.fitness = 0.0
        self.diagnosis = diagnosis
        self.evaluated_at = time.time()

    def summary(self) -> dict[str, Any]:
        """A JSON-ready view without the long texts (search tree files, tables)."""
        return {
            "id": self.id,
            "seq": self.seq,
            "parents": list(self.parents),
            "operator": self.operator,
            "status": self.status,
            "error_class": self.error_class,
            "fitness": self.fitness,
            "speedup": self.speedup,
            "runtime_us": self.runtime_us,
            "island": self.island,
            "platform": self.platform,
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "created_at": self.created_at,
            "evaluated_at": self.evaluated_at,
            "diagnosis": self.diagnosis,
            "meta": self.meta,
        }


@dataclass
class RunInfo:
    """One search: what it searched, how, and why it stopped."""

    run_id: str
    spec_key: str
    spec_path: str
    platform: str
    policy: str
    config: dict[str, Any] = field(default_factory=dict)  # everything needed to resume (no secrets)
    created_at: float = field(default_factory=time.time)
    status: str = "running"  # running | finished | failed
    stop_rule: str | None = None
    stop_message: str | None = None
