"""The universal operator's LLM step: prompt -> best-of-n replies -> edits or module -> repairs -> checks.

The prompt comes from `UniversalPromptBuilder` (workbench/search/operators/prompt.py), fitted to the
model's context window. Each reply of an expansion (`LLMStepConfig.best_of`, temperatures from
`LLMStepConfig.temperatures`) goes through `finish_reply`; the first that passes the pre-harness
checks is the proposal, the others come back with it as rejected proposals that the engine records.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

from workbench.llm.edits import Region, editable_regions
from workbench.search.operators.base import Operator, OperatorContext, Proposal
from workbench.search.operators.llm_step import LLMStepConfig, finish_reply
from workbench.search.operators.prompt import (
    CHARS_PER_TOKEN,
    DEFAULT_TEMPLATE,
    Prompt,
    UniversalPromptBuilder,
    load_template,
)

__all__ = ["DEFAULT_TEMPLATE", "LLMOperator", "UniversalPromptBuilder", "load_template"]

log = logging.getLogger(__name__)

_FATAL_LLM_KINDS = {"unreachable", "auth", "config"}
_PROMPT_MARGIN_TOKENS = 48  # chat-template tokens the server adds around the messages
_MIN_REPLY_TOKENS = 256  # below this a module does not fit: send the prompt as is, recorded


class LLMOperator(Operator):
    """The universal operator with an LLM step (see the module docstring)."""

    name = "llm"
    can_draft = True
    supports_crossover = True
    can_repair = True
    uses_related = True

    def __init__(
        self,
        provider: Any,
        builder: UniversalPromptBuilder | None = None,
        *,
        max_tokens: int = 2048,
        temperature: float = 0.7,
        concurrent: bool = True,
        step: LLMStepConfig | None = None,
    ) -> None:
        self.provider = provider
        # a local model generates one reply at a time; an HTTP endpoint takes parallel requests
        self._call_lock = None if concurrent else threading.Lock()
        self.builder = builder or UniversalPromptBuilder()
        self.max_tokens = max_tokens
        # without a step config, the given temperature is the whole schedule (the pre-issue-19 API)
        self.step = step or LLMStepConfig(temperatures=[temperature])
        self._window: int | None | bool = False  # False: not asked yet
        self._window_lock = threading.Lock()
        self._chars_per_token = CHARS_PER_TOKEN

    @property
    def temperature(self) -> float:
        return self.step.temperature(0)

    # -- context window ------------------------------------------------------------------------
    def context_window(self) -> int | None:
        with self._window_lock:
            if self._window is False:
                window = self.step.context_window
                ask = getattr(self.provider, "context_window", None)
                if window is None and callable(ask):
                    try:
                        window = ask()
                    except Exception as exc:  # noqa: BLE001 - unknown window: prompts go unfitted
                        log.info("context window unknown: %s", exc)
                        window = None
                self._window = window
            return self._window  # type: ignore[return-value]

    def _prompt(self, ctx: OperatorContext, edit_prompt: bool, region: Region | None) -> tuple[Prompt, int]:
        window = self.context_window()
        max_tokens = self.max_tokens
        if window is None:
            return self.builder.assemble(ctx, edit_prompt=edit_prompt, region=region), max_tokens
        budget = window - max_tokens - _PROMPT_MARGIN_TOKENS
        prompt = self.builder.assemble(ctx, edit_prompt=edit_prompt, budget_tokens=max(budget, 1),
                                       chars_per_token=self._chars_per_token, region=region)  # fmt: skip
        est = prompt.info["prompt_tokens_est"]
        if est + max_tokens + _PROMPT_MARGIN_TOKENS > window:
            # the prompt could not shrink enough: give the reply what is left, when that is enough
            room = window - est - _PROMPT_MARGIN_TOKENS
            if room >= _MIN_REPLY_TOKENS:
                max_tokens = room
                prompt.info["max_tokens_cut_to"] = room
        prompt.info["context_window"] = window
        return prompt, max_tokens

    def _learn_ratio(self, prompt_chars: int, prompt_tokens: int) -> None:
        """Characters per token as this server counts them (the lowest seen: estimates stay safe)."""
        if prompt_tokens > 100:
            self._chars_per_token = min(self._chars_per_token, prompt_chars / prompt_tokens)

    # -- one expansion ---------------------------------------------------------------------------
    def propose(self, ctx: OperatorContext) -> Proposal:
        kind = {0: "llm-draft", 1: "llm"}.get(len(ctx.parents), "llm-crossover")
        parent = ctx.parents[0] if len(ctx.parents) == 1 else None
        edit_prompt = self.step.edits != "off" and parent is not None and parent.passed and bool(parent.source)
        region = None
        if edit_prompt and self.step.edits == "region":
            regions = editable_regions(parent.source)  # type: ignore[union-attr]
            region = regions[ctx.seed % len(regions)] if regions else None
        meta: dict[str, Any] = {"template": self.builder.template_name}
        try:
            prompt, max_tokens = self._prompt(ctx, edit_prompt, region)
        except Exception as exc:  # a template bug is ours, but it still becomes a recorded node
            log.exception("prompt assembly failed")
            return Proposal(
                kind, error_class="prompt_error", diagnosis=f"{type(exc).__name__}: {exc}", meta=meta
            )
        meta["prompt"] = prompt.info
        tried: list[Proposal] = []
        for i in range(self.step.best_of):
            prop = self._one_reply(ctx, kind, prompt, max_tokens, i, edit_prompt, region, dict(meta))
            if prop.source is not None and not prop.rejected:
                prop.extra = tried
                return prop
            tried.append(prop)
            if prop.error_class and prop.error_class.startswith("llm_"):
                break  # the endpoint failed: the next reply would fail the same way
        last = tried.pop()
        last.extra = tried
        return last

    def _generate(self, messages: list[dict], max_tokens: int, temperature: float) -> Any:
        if self._call_lock is None:
            return self.provider.generate(messages, max_tokens=max_tokens, temperature=temperature)
        with self._call_lock:
            return self.provider.generate(messages, max_tokens=max_tokens, temperature=temperature)

    def _one_reply(
        self,
        ctx: OperatorContext,
        kind: str,
        prompt: Prompt,
        max_tokens: int,
        i: int,
        edit_prompt: bool,
        region: Region | None,
        meta: dict[str, Any],
    ) -> Proposal:
        from workbench.llm import LLMError
        from workbench.memory import content_hash

        temperature = self.step.temperature(i)
        meta.update(sample=i, temperature=temperature, max_tokens=max_tokens)
        try:
            reply = self._generate(prompt.messages, max_tokens, temperature)
        except LLMError as exc:
            kind_ = getattr(exc, "kind", "bad_response")
            return Proposal(kind, prompt=prompt.text, error_class=f"llm_{kind_}", fatal=kind_ in _FATAL_LLM_KINDS,
                            diagnosis=f"LLM call failed ({kind_}): {exc}", meta=meta)  # fmt: skip
        except Exception as exc:  # a provider bug: recorded, not raised
            log.exception("LLM provider raised")
            return Proposal(kind, prompt=prompt.text, error_class="llm_error",
                            diagnosis=f"LLM provider raised {type(exc).__name__}: {exc}", meta=meta)  # fmt: skip
        ptok = int(getattr(reply, "prompt_tokens", 0) or 0)
        ctok = int(getattr(reply, "completion_tokens", 0) or 0)
        self._learn_ratio(len(prompt.text), ptok)
        meta.update(model=getattr(reply, "model", None), latency_s=getattr(reply, "latency_s", None),
                    finish_reason=getattr(reply, "finish_reason", None))  # fmt: skip
        parent = ctx.parents[0] if len(ctx.parents) == 1 else None
        fin = finish_reply(
            reply.text or "",
            spec_source=ctx.spec_source,
            parent_source=parent.source if parent is not None else None,
            cfg=self.step,
            edit_prompt=edit_prompt,
            finish_reason=getattr(reply, "finish_reason", None),
            region=region,
        )
        meta.update(form=fin.form, notes=fin.notes)
        repairs = [n for n in fin.notes if n.startswith("repaired:")]
        if repairs:
            meta["repairs"] = repairs
        common = dict(prompt=prompt.text, response=reply.text, prompt_tokens=ptok, completion_tokens=ctok, meta=meta)
        if fin.source is None:
            return Proposal(kind, error_class=fin.error_class, diagnosis=fin.diagnosis,
                            rejected=fin.error_class == "edit_not_applied", **common)  # fmt: skip
        if fin.rejected:
            return Proposal(kind, source=fin.source, error_class=fin.error_class, diagnosis=fin.diagnosis,
                            rejected=True, **common)  # fmt: skip
        if content_hash(fin.source) in ctx.seen_hashes:
            return Proposal(kind, source=fin.source, error_class="duplicate", rejected=True,
                            diagnosis="rejected before evaluation: the candidate is identical to an earlier node",
                            **common)  # fmt: skip
        return Proposal(kind, source=fin.source, diagnosis=fin.diagnosis, **common)

    def close(self) -> None:
        close = getattr(self.provider, "close", None)
        if callable(close):
            close()
