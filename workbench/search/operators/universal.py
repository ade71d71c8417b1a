"""The universal operator: one prompt builder over the runtime context, and the LLM step it feeds.

The prompt assembles the spec's reference source, the parent kernel(s), the parent's diagnosis
(compile error, mismatch report, timings and speedup, profile summary), knowledge retrieved for that
diagnosis when a `retrieval.Retriever` is available, and the best past attempts and distinct past
failures from the context memory. The template is package data (`templates/universal_v1.md`).
"""

from __future__ import annotations

import logging
import re
import string
import threading
from importlib import resources
from typing import Any

from workbench.search.node import Node
from workbench.search.operators.base import Operator, OperatorContext, Proposal

log = logging.getLogger(__name__)

DEFAULT_TEMPLATE = "universal_v1"
_FATAL_LLM_KINDS = {"unreachable", "auth", "config"}


def load_template(name: str = DEFAULT_TEMPLATE) -> tuple[str, str]:
    """(system, user) texts of a template shipped in `workbench/search/templates/<name>.md`."""
    text = resources.files("workbench.search").joinpath("templates").joinpath(f"{name}.md").read_text("utf-8")
    text = re.sub(r"<!--.*?-->\s*", "", text, count=1, flags=re.S)  # the leading maintainer comment
    m = re.match(r"\s*# system\n(.*?)\n# user\n(.*)\Z", text, flags=re.S)
    if not m:
        raise ValueError(f"template {name}: expected '# system' then '# user' sections")
    return m.group(1).strip() + "\n", m.group(2).strip() + "\n"


def _clip(text: str, limit: int) -> str:
    text = text.rstrip()
    if len(text) <= limit:
        return text
    return text[:limit] + f"\n# ... [{len(text) - limit} more characters cut]"


class UniversalPromptBuilder:
    """Builds the chat messages for one expansion. `retriever`: a `retrieval.Retriever`, None for no
    retrieval, or "auto" to use `retrieval.Retriever.default()` when the package is installed."""

    def __init__(
        self,
        template: str = DEFAULT_TEMPLATE,
        *,
        retriever: Any = "auto",
        knowledge_tokens: int = 1200,
        max_code_chars: int = 9000,
        max_reference_chars: int = 7000,
    ) -> None:
        self.template_name = template
        self.system, self.user = load_template(template)
        self._retriever = retriever
        self._retriever_lock = threading.Lock()
        self.knowledge_tokens = knowledge_tokens
        self.max_code_chars = max_code_chars
        self.max_reference_chars = max_reference_chars

    @property
    def retriever(self) -> Any:
        with self._retriever_lock:
            if self._retriever == "auto":
                try:
                    from retrieval import Retriever

                    self._retriever = Retriever.default()
                except Exception as exc:  # optional: missing package, missing index, ...
                    log.info("retrieval unavailable, prompts go without knowledge: %s", exc)
                    self._retriever = None
            return self._retriever

    # -- sections ----------------------------------------------------------------------------
    @staticmethod
    def task(parents: list[Node]) -> str:
        if not parents:
            return (
                "Write a first Triton implementation, `ModelNew`, of the reference below. Aim for a "
                "correct kernel with a sensible memory access pattern."
            )
        if len(parents) > 1:
            a, b = parents[0], parents[1]
            return (
                f"Two kernels for this reference are below (A: fitness {a.fitness:.3g}, B: fitness "
                f"{b.fitness:.3g}). Write one kernel that combines their strengths and is faster than both, "
                f"staying correct."
            )
        p = parents[0]
        if p.passed:
            return (
                f"The parent kernel below is correct with a speedup of {p.speedup:.3g}x over the reference. "
                f"Make it faster while keeping it correct; use its diagnosis to pick the bottleneck."
            )
        return (
            f"The parent kernel below fails ({p.status}). Fix the cause shown in its diagnosis, keeping what "
            f"already works; correctness first."
        )

    def _parents_section(self, parents: list[Node]) -> str:
        out = []
        for i, p in enumerate(parents):
            label = "Parent kernel" if len(parents) == 1 else f"Parent kernel {'AB'[i]}"
            out.append(
                f"\n## {label} (node {p.id}, fitness {p.fitness:.4g})\n```python\n"
                f"{_clip(p.source or '', self.max_code_chars)}\n```\n"
            )
        return "".join(out)

    @staticmethod
    def _diagnosis_section(parents: list[Node]) -> str:
        out = []
        for i, p in enumerate(parents):
            if p.diagnosis:
                who = "the parent" if len(parents) == 1 else f"parent {'AB'[i]}"
                out.append(f"\n## What happened to {who}\n{_clip(p.diagnosis, 3000)}\n")
        return "".join(out)

    def _knowledge_section(self, ctx: OperatorContext) -> str:
        retriever = self.retriever
        if retriever is None:
            return ""
        query = (
            ctx.parents[0].diagnosis
            if ctx.parents and ctx.parents[0].diagnosis
            else ("write a first Triton kernel for:\n" + ctx.spec_source[:1500])
        )
        try:
            with self._retriever_lock:
                # the retriever keys knowledge by platform kind ("cuda", "cpu") and architecture
                res = retriever.retrieve(
                    query,
                    platform=ctx.platform.split(":")[0],
                    arch=ctx.arch,
                    budget_tokens=self.knowledge_tokens,
                )
        except Exception as exc:  # knowledge is an aid: a failing retriever must not stop the search
            log.warning("retrieval failed, prompt goes without knowledge: %s", exc)
            return ""
        text = getattr(res, "text", "") or ""
        return (
            f"\n## Relevant knowledge (retrieved for this diagnosis and platform)\n{text.strip()}\n"
            if text.strip()
            else ""
        )

    def _memory_section(self, ctx: OperatorContext) -> str:
        parents = {p.id for p in ctx.parents}
        best = [n for n in ctx.past_best if n.id not in parents]
        out = []
        if best:
            top = best[0]
            out.append(
                f"\n## Best past attempt for this spec (node {top.id}, fitness {top.fitness:.4g}, "
                f"{top.operator})\n```python\n{_clip(top.source or '', self.max_code_chars // 2)}\n```\n"
            )
            if len(best) > 1:
                out.append(
                    "Other good attempts: "
                    + "; ".join(f"node {n.id} fitness {n.fitness:.4g}" for n in best[1:])
                    + "\n"
                )
        if ctx.past_failures:
            lines = []
            for n in ctx.past_failures:
                first = next(
                    (ln for ln in reversed(n.diagnosis.splitlines()) if ln.strip()), n.error_class or ""
                )
                lines.append(f"- {n.error_class}: {first.strip()[:240]}")
            out.append("\n## Past failures on this spec (avoid repeating them)\n" + "\n".join(lines) + "\n")
        return "".join(out)

    # -- assembly ----------------------------------------------------------------------------
    def build(self, ctx: OperatorContext) -> tuple[list[dict[str, str]], str]:
        """The chat messages, and the same prompt as one text (saved with the node)."""
        fields = {
            "task": self.task(ctx.parents),
            "platform": f"{ctx.platform} ({ctx.arch})",
            "reference_source": _clip(ctx.spec_source, self.max_reference_chars),
            "parents_section": self._parents_section(ctx.parents),
            "diagnosis_section": self._diagnosis_section(ctx.parents),
            "knowledge_section": self._knowledge_section(ctx),
            "memory_section": self._memory_section(ctx),
        }
        user = string.Template(self.user).safe_substitute(fields)
        messages = [{"role": "system", "content": self.system}, {"role": "user", "content": user}]
        text = "".join(f"### {m['role']}\n{m['content']}\n" for m in messages)
        return messages, text


class LLMOperator(Operator):
    """The universal operator with an LLM step: prompt -> `LLMProvider.generate` -> parsed candidate."""

    name = "llm"
    can_draft = True
    supports_crossover = True
    can_repair = True

    def __init__(
        self,
        provider: Any,
        builder: UniversalPromptBuilder | None = None,
        *,
        max_tokens: int = 2048,
        temperature: float = 0.7,
        concurrent: bool = True,
    ) -> None:
        self.provider = provider
        # a local model generates one reply at a time; an HTTP endpoint takes parallel requests
        self._call_lock = None if concurrent else threading.Lock()
        self.builder = builder or UniversalPromptBuilder()
        self.max_tokens = max_tokens
        self.temperature = temperature

    def propose(self, ctx: OperatorContext) -> Proposal:
        kind = {0: "llm-draft", 1: "llm"}.get(len(ctx.parents), "llm-crossover")
        meta: dict[str, Any] = {"template": self.builder.template_name}
        try:
            messages, prompt = self.builder.build(ctx)
        except Exception as exc:  # a template bug is ours, but it still becomes a recorded node
            log.exception("prompt assembly failed")
            return Proposal(
                kind, error_class="prompt_error", diagnosis=f"{type(exc).__name__}: {exc}", meta=meta
            )
        from workbench.llm import LLMError
        from workbench.llm.parse import extract_code

        try:
            if self._call_lock is None:
                reply = self.provider.generate(
                    messages, max_tokens=self.max_tokens, temperature=self.temperature
                )
            else:
                with self._call_lock:
                    reply = self.provider.generate(
                        messages, max_tokens=self.max_tokens, temperature=self.temperature
                    )
        except LLMError as exc:
            kind_ = getattr(exc, "kind", "bad_response")
            return Proposal(
                kind,
                prompt=prompt,
                error_class=f"llm_{kind_}",
                fatal=kind_ in _FATAL_LLM_KINDS,
                diagnosis=f"LLM call failed ({kind_}): {exc}",
                meta=meta,
            )
        except Exception as exc:  # a provider bug: recorded, not raised
            log.exception("LLM provider raised")
            return Proposal(
                kind,
                prompt=prompt,
                error_class="llm_error",
                diagnosis=f"LLM provider raised {type(exc).__name__}: {exc}",
                meta=meta,
            )
        meta.update(model=getattr(reply, "model", None), latency_s=getattr(reply, "latency_s", None))
        ptok, ctok = (
            int(getattr(reply, "prompt_tokens", 0) or 0),
            int(getattr(reply, "completion_tokens", 0) or 0),
        )
        ext = extract_code(reply.text)
        meta.update(n_blocks=ext.n_blocks, truncated=ext.truncated)
        if ext.code is None:
            return Proposal(
                kind,
                prompt=prompt,
                response=reply.text,
                error_class="parse_error",
                diagnosis=f"no usable code in the response: {ext.diagnosis}",
                prompt_tokens=ptok,
                completion_tokens=ctok,
                meta=meta,
            )
        return Proposal(
            kind,
            source=ext.code,
            prompt=prompt,
            response=reply.text,
            diagnosis=ext.diagnosis,
            prompt_tokens=ptok,
            completion_tokens=ctok,
            meta=meta,
        )

    def close(self) -> None:
        close = getattr(self.provider, "close", None)
        if callable(close):
            close()
