"""The search's LLM operator: a thin adapter from the operator interface to `workbench.llm.step.LLMStep`.

Everything about prompts, replies, repairs, checks and edits lives in `workbench/llm/` (docs/llm.md);
this file only maps the step's reply outcomes to the engine's typed proposals and links each node's
verdict to its saved call.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from workbench.llm.prompt import PromptBuilder
from workbench.llm.settings import LLMSettings
from workbench.llm.step import LLMStep, Outcome, ReplyOutcome
from workbench.llm.transcript import link_verdict
from workbench.search.node import Node
from workbench.search.operators.base import Operator, OperatorContext, Proposal, Provenance, Signal

_SIGNALS = {Outcome.CANDIDATE: Signal.CANDIDATE, Outcome.REJECTED: Signal.REJECTED, Outcome.FAILED: Signal.FAILED}


class LLMOperator(Operator):
    """Drafts (no parent), mutates (one), crosses over (two) and repairs kernels through the LLM step."""

    name = "llm"
    can_draft = True
    supports_crossover = True
    can_repair = True
    uses_related = True

    def __init__(
        self,
        provider: Any,
        settings: LLMSettings | None = None,
        *,
        prompts: PromptBuilder | None = None,
        retriever: Any = "auto",
        concurrent: bool = True,
    ) -> None:
        self.step = LLMStep(provider, settings, prompts=prompts, retriever=retriever, concurrent=concurrent)

    @property
    def settings(self) -> LLMSettings:
        return self.step.settings

    def propose(self, ctx: OperatorContext) -> Proposal:
        *others, chosen = self.step.expand(ctx)
        prop = _proposal(chosen)
        prop.extra = [_proposal(o) for o in others]
        return prop

    def record_verdict(self, node: Node, run_folder: Path) -> None:
        call = node.meta.get("provenance", {}).get("call_file")
        if not call:
            return
        r = node.result  # None: rejected or failed before the harness
        link_verdict(
            Path(run_folder) / call,
            node=node.id,
            status=str(node.status),
            fitness=node.fitness if r is not None else None,
            speedup=node.speedup if r is not None else None,
            error_class=node.error_class,
            summary=r.summary() if r is not None else node.diagnosis,
        )

    def close(self) -> None:
        self.step.close()


def _proposal(r: ReplyOutcome) -> Proposal:
    m = r.meta
    return Proposal(
        r.kind,
        source=r.source,
        prompt=r.prompt,
        response=r.response,
        error_class=r.error_class,
        diagnosis=r.diagnosis,
        prompt_tokens=r.prompt_tokens,
        completion_tokens=r.completion_tokens,
        meta=m,
        signal=_SIGNALS[r.outcome],
        fatal=r.fatal,
        provenance=Provenance(
            "llm",
            model=m.get("model"),
            sample=m.get("sample"),
            temperature=m.get("temperature"),
            form=m.get("form"),
            region=(m.get("prompt") or {}).get("region"),
            call_file=r.call_file,
        ),
    )
