"""What happens to a model's reply before the harness sees it, and the knobs of the LLM step.

    reply ─► edits against the parent (when asked for and present) or the whole module in the reply
          ─► static repairs (workbench.llm.repair), each recorded
          ─► pre-harness checks (workbench.llm.precheck): a failure is a recorded node, no evaluation

`LLMStepConfig` is saved with the run (`SearchConfig.llm_step`). Its defaults come from the
measurement in results/llm/ (benchmarks/llm_local.py); the docstring of each field says which arm.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from workbench.llm.edits import Region, apply_edits, apply_region, has_edits, parse_edits
from workbench.llm.parse import extract_code
from workbench.llm.precheck import precheck
from workbench.llm.repair import repair_source

EDIT_MODES = ("region", "search_replace", "off")
SAMPLE_MODES = ("ops", "off")


class LLMStepError(ValueError):
    """A bad LLM-step option: one line naming it."""


@dataclass
class LLMStepConfig:
    repairs: bool = True  # static repairs before the checks
    prechecks: bool = True  # AST checks; a failure is recorded without an evaluation
    # how a passing parent is changed: "region" (the model rewrites one named part of it: tunables, a
    # kernel, forward), "search_replace" (SEARCH/REPLACE blocks), "off" (a whole module). Every mode
    # still accepts a whole module or SEARCH/REPLACE blocks when the reply holds them.
    edits: str = "region"
    best_of: int = 1  # replies per expansion; the first that passes the checks is evaluated
    # temperature of the i-th reply of an expansion (cycled); one value: every reply alike
    temperatures: list[float] = field(default_factory=lambda: [0.7])
    samples: str = "ops"  # "ops": code samples keyed by the spec's aten ops; "off": none
    sample_min_overlap: float = 1.0  # 1.0: only kernels for the same op set are shown
    context_window: int | None = None  # tokens; None: ask the provider, else no limit is enforced

    def __post_init__(self) -> None:
        if self.edits not in EDIT_MODES:
            raise LLMStepError(f"llm_step.edits must be one of {EDIT_MODES}, got {self.edits!r}")
        if self.samples not in SAMPLE_MODES:
            raise LLMStepError(f"llm_step.samples must be one of {SAMPLE_MODES}, got {self.samples!r}")
        if not isinstance(self.best_of, int) or self.best_of < 1:
            raise LLMStepError(f"llm_step.best_of must be an integer >= 1, got {self.best_of!r}")
        temps = list(self.temperatures) if isinstance(self.temperatures, (list, tuple)) else [self.temperatures]
        if not temps or any(not isinstance(t, (int, float)) or not 0 <= t <= 2 for t in temps):
            raise LLMStepError(f"llm_step.temperatures must be numbers in [0, 2], got {self.temperatures!r}")
        self.temperatures = [float(t) for t in temps]
        if not 0 < self.sample_min_overlap <= 1:
            raise LLMStepError(f"llm_step.sample_min_overlap must be in (0, 1], got {self.sample_min_overlap}")

    def temperature(self, i: int) -> float:
        return self.temperatures[i % len(self.temperatures)]

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any] | None) -> LLMStepConfig:
        d = dict(d or {})
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(d) - names)
        if unknown:
            raise LLMStepError(f"unknown llm_step option(s) {unknown}; allowed: {', '.join(sorted(names))}")
        return cls(**d)


@dataclass
class Finished:
    """A reply turned into a candidate, or the reason it cannot be one (`source` None or `rejected`)."""

    source: str | None
    rejected: bool  # the candidate exists but fails a check: record it, do not evaluate it
    error_class: str | None
    diagnosis: str
    notes: list[str] = field(default_factory=list)  # how it was obtained and repaired
    form: str = "module"  # "edits" | "module"


def finish_reply(
    text: str,
    *,
    spec_source: str,
    parent_source: str | None,
    cfg: LLMStepConfig,
    edit_prompt: bool,
    finish_reason: str | None = None,
    region: Region | None = None,
) -> Finished:
    """Turn a reply into a checked candidate. Never raises."""
    notes: list[str] = []
    form = "module"
    ext = None
    if region is not None and parent_source is not None and not has_edits(text):
        ext = extract_code(text, finish_reason=finish_reason)
        if ext.code is not None and not ext.defines_model_new:
            form = "region"
            outcome = apply_region(parent_source, region, ext.code)
            if outcome.source is None:
                return Finished(None, False, "edit_not_applied", f"region edit not applied: {outcome.diagnosis}",
                                form=form)  # fmt: skip
            source = outcome.source
            notes.append(outcome.diagnosis)
    if form != "region":
        if edit_prompt and parent_source is not None and has_edits(text):
            form = "edits"
            edits, unclosed = parse_edits(text)
            outcome = apply_edits(parent_source, edits, unclosed=unclosed)
            if outcome.source is None:
                return Finished(None, False, "edit_not_applied", f"edits not applied: {outcome.diagnosis}", form=form)
            source = outcome.source
            notes.append(outcome.diagnosis)
            notes.extend(outcome.notes)
        else:
            ext = ext or extract_code(text, finish_reason=finish_reason)
            if ext.code is None:
                return Finished(None, False, "parse_error", f"no usable code in the response: {ext.diagnosis}")
            source = ext.code
            notes.append(ext.diagnosis)
    if cfg.repairs:
        fixed = repair_source(source)
        source = fixed.source
        notes.extend(fixed.repairs)
    if cfg.prechecks:
        problems = precheck(source, spec_source=spec_source, parent_source=parent_source)
        if problems:
            return Finished(
                source,
                True,
                "precheck",
                "rejected before evaluation: " + "; ".join(problems),
                notes,
                form,
            )
    return Finished(source, False, None, "; ".join(n for n in notes if n), notes, form)
