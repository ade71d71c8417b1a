"""Operators turn parent nodes into new candidates: the LLM operator (`llm.py`, an adapter over
`workbench.llm`) and the offline tuner (`offline.py`), alone or mixed."""

from __future__ import annotations

import random
from typing import Any

from workbench.llm.settings import LLMSettings
from workbench.search.node import Node
from workbench.search.operators.base import Operator, OperatorContext, Proposal, Provenance, Signal
from workbench.search.operators.llm import LLMOperator
from workbench.search.operators.offline import OfflineTuningOperator, has_tunables

__all__ = [
    "LLMOperator",
    "OfflineTuningOperator",
    "Operator",
    "OperatorContext",
    "OperatorMix",
    "Proposal",
    "Provenance",
    "Signal",
    "has_tunables",
    "make_operator",
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
            if prop.signal is Signal.CANDIDATE:
                return prop
        return self.llm.propose(ctx)

    def record_verdict(self, node: Node, run_folder: Any) -> None:
        self.llm.record_verdict(node, run_folder)

    def close(self) -> None:
        self.llm.close()


def make_operator(
    llm: str = "none",
    settings: LLMSettings | None = None,
    *,
    retriever: Any = "auto",
    offline_share: float = 0.25,
    **provider_options: Any,
) -> Operator:
    """`none`: the offline tuner alone (the embedded default). A provider name (`workbench.llm.PROVIDERS`):
    the LLM operator with `settings`, and the tuner beside it when `offline_share` > 0.
    `provider_options`: `LLMConfig` fields (model, base_url ...); keys come from the environment."""
    offline = OfflineTuningOperator()
    if llm == "none":
        return offline
    from workbench.llm import get_provider

    provider = get_provider(llm, **provider_options)
    # a local model generates one reply at a time; an HTTP endpoint takes parallel requests
    op = LLMOperator(provider, settings, retriever=retriever, concurrent=llm == "openai")
    return OperatorMix(op, offline, offline_share=offline_share) if offline_share > 0 else op
