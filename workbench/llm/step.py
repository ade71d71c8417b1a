"""The LLM step of one expansion: prompt -> best-of-n replies -> candidates, each call saved.

    step = LLMStep(get_provider("openai"), LLMSettings(best_of=2))
    replies = step.expand(ctx)        # ctx: a StepContext (the search's OperatorContext is one)
    replies[-1]                       # the chosen one: the first candidate, else the last reply's failure

1. The prompt (`workbench.llm.prompt.PromptBuilder`: spec, parents, diagnosis, code samples keyed by
   the spec's ops, retrieved knowledge, past attempts) is fitted to the model's context window.
2. Each reply (`LLMSettings.best_of`, temperatures from `LLMSettings.temperatures`) becomes a
   candidate through `workbench.llm.candidate.candidate_from_reply` (edits, repairs, pre-harness
   checks); a candidate already in the graph (`ctx.seen_hashes`) is rejected as a duplicate. The first
   candidate ends the expansion; the replies before it come back as rejected or failed outcomes.
3. With `ctx.calls_dir`, every call is saved there (`workbench.llm.transcript`).

Never raises: a provider error, a template bug or an unusable reply is an outcome with a reason.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from workbench.llm.candidate import candidate_from_reply
from workbench.llm.context import StepContext
from workbench.llm.edits import Region, editable_regions
from workbench.llm.prompt import CHARS_PER_TOKEN, Prompt, PromptBuilder
from workbench.llm.provider import LLMError
from workbench.llm.settings import LLMSettings
from workbench.llm.transcript import CallRecord, new_call_id, write_call
from workbench.memory.records import content_hash

log = logging.getLogger(__name__)

FATAL_LLM_KINDS = frozenset({"unreachable", "auth", "config"})  # the next call would fail the same way
_PROMPT_MARGIN_TOKENS = 48  # chat-template tokens the server adds around the messages
_MIN_REPLY_TOKENS = 256  # below this a module does not fit: send the prompt as is, recorded


class Outcome(str, Enum):
    """What one reply became before any evaluation."""

    CANDIDATE = "candidate"  # a checked candidate: evaluate it
    REJECTED = "rejected"  # turned away before evaluation (`error_class` names the check): costs no evaluation
    FAILED = "failed"  # no candidate: the call, the prompt or the parse failed


@dataclass
class ReplyOutcome:
    outcome: Outcome
    kind: str  # llm-draft (no parent) | llm (one) | llm-crossover (two)
    source: str | None = None
    error_class: str | None = None  # precheck, edit_not_applied, duplicate, parse_error, llm_<kind>, prompt_error
    diagnosis: str = ""
    prompt: str | None = None
    response: str | None = None
    prompt_tokens: int = 0
    completion_tokens: int = 0
    meta: dict[str, Any] = field(default_factory=dict)  # template, prompt fitting, sample, temperature, repairs
    fatal: bool = False  # the provider cannot work at all (unreachable, bad key, bad config)
    call_file: str | None = None  # the saved call (workbench.llm.transcript), when saved


def expansion_kind(n_parents: int) -> str:
    return {0: "llm-draft", 1: "llm"}.get(n_parents, "llm-crossover")


class LLMStep:
    """Prompt, provider calls and reply handling of the LLM step (see the module docstring)."""

    def __init__(
        self,
        provider: Any,
        settings: LLMSettings | None = None,
        *,
        prompts: PromptBuilder | None = None,
        retriever: Any = "auto",
        concurrent: bool = True,
    ) -> None:
        """`prompts`: a builder of your own; else one for `settings.template` with `retriever` (a
        `retrieval.Retriever`, None, or "auto") and op-keyed samples when `settings.samples == "ops"`.
        `concurrent`: the provider takes parallel calls (an HTTP endpoint); else one at a time."""
        self.provider = provider
        self.settings = settings or LLMSettings()
        self.prompts = prompts or PromptBuilder(
            self.settings.template,
            retriever=retriever,
            op_samples="auto" if self.settings.samples == "ops" else None,
            sample_min_overlap=self.settings.sample_min_overlap,
        )
        self._call_lock = None if concurrent else threading.Lock()
        self._window: int | None | bool = False  # False: not asked yet
        self._window_lock = threading.Lock()
        self._chars_per_token = CHARS_PER_TOKEN

    # -- context window ------------------------------------------------------------------------
    def context_window(self) -> int | None:
        """`settings.context_window`, else what the provider reports (asked once), else None."""
        with self._window_lock:
            if self._window is False:
                window = self.settings.context_window
                ask = getattr(self.provider, "context_window", None)
                if window is None and callable(ask):
                    try:
                        window = ask()
                    except Exception as exc:  # noqa: BLE001 - unknown window: prompts go unfitted
                        log.info("context window unknown: %s", exc)
                        window = None
                self._window = window
            return self._window  # type: ignore[return-value]

    def prompt(self, ctx: StepContext, edit_prompt: bool, region: Region | None) -> tuple[Prompt, int]:
        """The prompt fitted to the window, and the reply's token limit."""
        window = self.context_window()
        max_tokens = self.settings.max_new_tokens
        if window is None:
            return self.prompts.assemble(ctx, edit_prompt=edit_prompt, region=region), max_tokens
        budget = window - max_tokens - _PROMPT_MARGIN_TOKENS
        prompt = self.prompts.assemble(ctx, edit_prompt=edit_prompt, budget_tokens=max(budget, 1),
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
    def expand(self, ctx: StepContext) -> list[ReplyOutcome]:
        """Every reply of the expansion in order; the last is the chosen one (the first candidate,
        else the last failure). Never empty."""
        kind = expansion_kind(len(ctx.parents))
        parent = ctx.parents[0] if len(ctx.parents) == 1 else None
        edit_prompt = self.settings.edits != "off" and parent is not None and parent.passed and bool(parent.source)
        region = None
        if edit_prompt and self.settings.edits == "region":
            regions = editable_regions(parent.source)  # type: ignore[union-attr]
            region = regions[ctx.seed % len(regions)] if regions else None
        meta: dict[str, Any] = {"template": self.prompts.template_name}
        try:
            prompt, max_tokens = self.prompt(ctx, edit_prompt, region)
        except Exception as exc:  # noqa: BLE001 - a template bug is ours, but it still becomes a recorded node
            log.exception("prompt assembly failed")
            return [ReplyOutcome(Outcome.FAILED, kind, error_class="prompt_error",
                                 diagnosis=f"{type(exc).__name__}: {exc}", meta=meta)]  # fmt: skip
        meta["prompt"] = prompt.info
        out: list[ReplyOutcome] = []
        for i in range(self.settings.best_of):
            reply = self._one_reply(ctx, kind, prompt, max_tokens, i, edit_prompt, region, dict(meta))
            out.append(reply)
            if reply.outcome is Outcome.CANDIDATE:
                break
            if reply.error_class and reply.error_class.startswith("llm_"):
                break  # the endpoint failed: the next reply would fail the same way
        return out

    def _generate(self, messages: list[dict], max_tokens: int, temperature: float) -> Any:
        if self._call_lock is None:
            return self.provider.generate(messages, max_tokens=max_tokens, temperature=temperature)
        with self._call_lock:
            return self.provider.generate(messages, max_tokens=max_tokens, temperature=temperature)

    def _one_reply(
        self,
        ctx: StepContext,
        kind: str,
        prompt: Prompt,
        max_tokens: int,
        i: int,
        edit_prompt: bool,
        region: Region | None,
        meta: dict[str, Any],
    ) -> ReplyOutcome:
        temperature = self.settings.temperature(i)
        meta.update(sample=i, temperature=temperature, max_tokens=max_tokens)
        started = time.time()
        try:
            reply = self._generate(prompt.messages, max_tokens, temperature)
        except LLMError as exc:
            kind_ = getattr(exc, "kind", "bad_response")
            res = ReplyOutcome(Outcome.FAILED, kind, prompt=prompt.text, error_class=f"llm_{kind_}",
                               fatal=kind_ in FATAL_LLM_KINDS, diagnosis=f"LLM call failed ({kind_}): {exc}",
                               meta=meta)  # fmt: skip
            return self._save(ctx, res, prompt, started, region, None)
        except Exception as exc:  # noqa: BLE001 - a provider bug: recorded, not raised
            log.exception("LLM provider raised")
            res = ReplyOutcome(Outcome.FAILED, kind, prompt=prompt.text, error_class="llm_error",
                               diagnosis=f"LLM provider raised {type(exc).__name__}: {exc}", meta=meta)  # fmt: skip
            return self._save(ctx, res, prompt, started, region, None)
        ptok = int(getattr(reply, "prompt_tokens", 0) or 0)
        ctok = int(getattr(reply, "completion_tokens", 0) or 0)
        self._learn_ratio(len(prompt.text), ptok)
        meta.update(model=getattr(reply, "model", None), latency_s=getattr(reply, "latency_s", None),
                    finish_reason=getattr(reply, "finish_reason", None))  # fmt: skip
        parent = ctx.parents[0] if len(ctx.parents) == 1 else None
        fin = candidate_from_reply(
            reply.text or "",
            spec_source=ctx.spec_source,
            parent_source=parent.source if parent is not None else None,
            settings=self.settings,
            edit_prompt=edit_prompt,
            finish_reason=getattr(reply, "finish_reason", None),
            region=region,
        )
        meta.update(form=fin.form, notes=fin.notes)
        repairs = [n for n in fin.notes if n.startswith("repaired:")]
        if repairs:
            meta["repairs"] = repairs
        common = dict(prompt=prompt.text, response=reply.text, prompt_tokens=ptok, completion_tokens=ctok, meta=meta)
        if fin.rejected:
            res = ReplyOutcome(Outcome.REJECTED, kind, source=fin.source, error_class=fin.error_class,
                               diagnosis=fin.diagnosis, **common)  # fmt: skip
        elif fin.source is None:
            res = ReplyOutcome(Outcome.FAILED, kind, error_class=fin.error_class, diagnosis=fin.diagnosis, **common)
        elif content_hash(fin.source) in ctx.seen_hashes:
            res = ReplyOutcome(Outcome.REJECTED, kind, source=fin.source, error_class="duplicate",
                               diagnosis="rejected before evaluation: the candidate is identical to an earlier node",
                               **common)  # fmt: skip
        else:
            res = ReplyOutcome(Outcome.CANDIDATE, kind, source=fin.source, diagnosis=fin.diagnosis, **common)
        return self._save(ctx, res, prompt, started, region, reply)

    def _save(self, ctx: StepContext, res: ReplyOutcome, prompt: Prompt, started: float, region: Region | None,
              reply: Any) -> ReplyOutcome:  # fmt: skip
        calls_dir = getattr(ctx, "calls_dir", None)
        if not calls_dir:
            return res
        m = res.meta
        rec = CallRecord(
            call=new_call_id(res.kind, m.get("sample", 0)), started_at=started, kind=res.kind,
            parents=[p.id for p in ctx.parents], sample=m.get("sample", 0), temperature=m.get("temperature", 0.0),
            max_tokens=m.get("max_tokens", 0), messages=prompt.messages, reply=res.response,
            outcome=res.outcome.value, error_class=res.error_class, diagnosis=res.diagnosis, form=m.get("form"),
            region=region.name if region is not None else None, candidate=res.source, model=m.get("model"),
            finish_reason=m.get("finish_reason"), prompt_tokens=res.prompt_tokens,
            completion_tokens=res.completion_tokens, latency_s=m.get("latency_s"),
        )  # fmt: skip
        path = write_call(calls_dir, rec)
        if path is not None:
            res.call_file = str(path)
        return res

    def close(self) -> None:
        close = getattr(self.provider, "close", None)
        if callable(close):
            close()

