"""From a model's reply to a checked candidate, before the harness sees it (`candidate_from_reply`).

    reply ─► edits against the parent (when asked for and present) or the whole module in the reply
          ─► static repairs (workbench.llm.repair), each recorded
          ─► pre-harness checks (workbench.llm.precheck): a failure is a rejected candidate, no evaluation

Pure and fast (AST work, milliseconds): no provider, no search state. `workbench.llm.step` calls it on
every reply; benchmarks call it on recorded replies.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from workbench.llm.edits import Region, apply_edits, apply_region, has_edits, parse_edits
from workbench.llm.parse import extract_code
from workbench.llm.precheck import precheck
from workbench.llm.repair import repair_source
from workbench.llm.settings import LLMSettings


@dataclass
class ReplyCandidate:
    """A reply turned into a candidate, or the reason it cannot be one (`source` None or `rejected`).

    `error_class`: `parse_error` (no code), `edit_not_applied` (edits or a region that do not fit the
    parent; rejected), `precheck` (a check failed; rejected, source kept), or None (a candidate)."""

    source: str | None
    rejected: bool  # the candidate exists but fails a check: record it, do not evaluate it
    error_class: str | None
    diagnosis: str
    notes: list[str] = field(default_factory=list)  # how it was obtained and repaired
    form: str = "module"  # "edits" | "module"


def candidate_from_reply(
    text: str,
    *,
    spec_source: str,
    parent_source: str | None,
    settings: LLMSettings,
    edit_prompt: bool,
    finish_reason: str | None = None,
    region: Region | None = None,
) -> ReplyCandidate:
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
                return ReplyCandidate(None, True, "edit_not_applied",
                                      f"region edit not applied: {outcome.diagnosis}", form=form)  # fmt: skip
            source = outcome.source
            notes.append(outcome.diagnosis)
    if form != "region":
        if edit_prompt and parent_source is not None and has_edits(text):
            form = "edits"
            edits, unclosed = parse_edits(text)
            outcome = apply_edits(parent_source, edits, unclosed=unclosed)
            if outcome.source is None:
                return ReplyCandidate(None, True, "edit_not_applied", f"edits not applied: {outcome.diagnosis}",
                                      form=form)  # fmt: skip
            source = outcome.source
            notes.append(outcome.diagnosis)
            notes.extend(outcome.notes)
        else:
            ext = ext or extract_code(text, finish_reason=finish_reason)
            if ext.code is None:
                return ReplyCandidate(None, False, "parse_error", f"no usable code in the response: {ext.diagnosis}")
            source = ext.code
            notes.append(ext.diagnosis)
    if settings.repairs:
        fixed = repair_source(source)
        source = fixed.source
        notes.extend(fixed.repairs)
    if settings.prechecks:
        problems = precheck(source, spec_source=spec_source, parent_source=parent_source)
        if problems:
            return ReplyCandidate(
                source,
                True,
                "precheck",
                "rejected before evaluation: " + "; ".join(problems),
                notes,
                form,
            )
    return ReplyCandidate(source, False, None, "; ".join(n for n in notes if n), notes, form)
