"""Operators turn parent nodes into new candidates: the universal LLM operator and the offline tuner."""

from __future__ import annotations

import random
from typing import Any

from workbench.search.operators.base import Operator, OperatorContext, Proposal
from workbench.search.operators.llm_step import LLMStepConfig, LLMStepError
from workbench.search.operators.offline import OfflineTuningOperator, has_tunables
from workbench.search.operators.prompt import UniversalPromptBuilder, load_template
from workbench.search.operators.universal import LLMOperator

__all__ = [
    "LLMOperator",
    "LLMStepConfig",
    "LLMStepError",
    "OfflineTuningOperator",
    "Operator",
    "OperatorContext",
    "OperatorMix",
    "Proposal",
    "UniversalPromptBuilder",
    "has_tunables",
    "load_template",
]


class OperatorMix(Operator):
    """The LLM operator with the offline tuner beside it: a share of expansions of correct parents that
    declare TUNABLES go to the tuner (cheap, no tokens); everything else, and whatever the tuner cannot
    do, goes to the LLM."""

    name = "mix"

    def __init__(
        self, llm: LLMOperator, offline: OfflineTuningOperator, *, offline_share: float = 0.25
    ) -> None:
        self.llm, self.offline, self.offline_share = llm, offline, offline_share
        self.can_draft, self.supports_crossover, self.can_repair = True, True, True
        self.uses_related = llm.uses_related

    def propose(self, ctx: OperatorContext) -> Proposal:
        rng = random.Random(ctx.seed ^ 0x5EED)
        if (
            ctx.parents
            and all(p.passed and has_tunables(p.source) for p in ctx.parents)
            and rng.random() < self.offline_share
        ):
            prop = self.offline.propose(ctx)
            if prop.source is not None:
                return prop
        return self.llm.propose(ctx)

    def close(self) -> None:
        self.llm.close()


def make_operator(
    llm: str = "none",
    *,
    retriever: Any = "auto",
    offline_share: float = 0.25,
    template: str = "universal_v2",
    max_new_tokens: int = 2048,
    temperature: float = 0.7,
    step: dict[str, Any] | LLMStepConfig | None = None,
    **llm_cfg: Any,
) -> Operator:
    """`none`: the offline tuner alone (the embedded default). A provider name: the universal LLM
    operator with the tuner beside it. `step`: the LLM step's options (`LLMStepConfig`); without
    `temperatures` there, `temperature` is the schedule."""
    offline = OfflineTuningOperator()
    if llm == "none":
        return offline
    from workbench.llm import get_provider

    step_cfg = step if isinstance(step, LLMStepConfig) else LLMStepConfig.from_dict(
        {"temperatures": [temperature], **(step or {})}
    )
    provider = get_provider(llm, **llm_cfg)
    builder = UniversalPromptBuilder(
        template,
        retriever=retriever,
        op_samples="auto" if step_cfg.samples == "ops" else None,
        sample_min_overlap=step_cfg.sample_min_overlap,
    )
    op = LLMOperator(
        provider,
        builder,
        max_tokens=max_new_tokens,
        concurrent=llm == "openai",
        step=step_cfg,
    )
    return OperatorMix(op, offline, offline_share=offline_share) if offline_share > 0 else op
