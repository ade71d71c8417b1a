"""The LLM step's prompt: one builder over the runtime context, fitted to the model's window.

The prompt assembles the spec's reference source, the parent kernel(s), the parent's diagnosis
(compile error, mismatch report, timings and speedup, profile summary), code samples for the same
aten ops as the spec (the repository's kernels and passing kernels of earlier runs, issue 19),
knowledge retrieved for that diagnosis when a `retrieval.Retriever` is available, and the best past
attempts and distinct past failures from the context memory. A passing parent gets an answer format
of SEARCH/REPLACE edits or of one named region. The templates are package data
(`workbench/llm/templates/universal_v*.md`).

When the model's context window is known, sections are dropped (knowledge, then memory, then
samples) and long texts clipped until prompt + reply fit; what was done is in `Prompt.info`.
"""

from __future__ import annotations

import logging
import math
import re
import string
import threading
from dataclasses import dataclass, field
from importlib import resources
from typing import Any

from workbench.llm.context import StepContext
from workbench.llm.settings import LLMSettings
from workbench.memory.records import Node

log = logging.getLogger(__name__)

DEFAULT_TEMPLATE = LLMSettings.default("template")


def load_template(name: str = DEFAULT_TEMPLATE) -> tuple[str, str]:
    """(system, user) texts of a template shipped in `workbench/llm/templates/<name>.md`."""
    text = resources.files("workbench.llm").joinpath("templates").joinpath(f"{name}.md").read_text("utf-8")
    text = re.sub(r"<!--.*?-->\s*", "", text, count=1, flags=re.S)  # the leading maintainer comment
    m = re.match(r"\s*# system\n(.*?)\n# user\n(.*)\Z", text, flags=re.S)
    if not m:
        raise ValueError(f"template {name}: expected '# system' then '# user' sections")
    return m.group(1).strip() + "\n", m.group(2).strip() + "\n"


MODULE_FORMAT = (
    "Reply with exactly one ```python code block containing the whole module, then at most three "
    "sentences on what you changed and why."
)
EDIT_FORMAT = """Reply with edits to the parent kernel above, each one in this form:

<<<<<<< SEARCH
lines copied exactly from the parent kernel
=======
the lines that replace them
>>>>>>> REPLACE

Each SEARCH part must copy lines of the parent exactly and match one place only. Change only what makes
the kernel faster and keep it correct. If the change cannot be written as edits, reply with the whole
module in one ```python code block instead."""
REGION_FORMAT = """Change only this part of the parent kernel ($name) to make the kernel faster, keeping it correct:

```python
$region
```
$hint
Reply with the new version of exactly this part in one ```python code block, and nothing else of the module."""
# What a faster version of each kind of region usually changes (the 0.5B model sent the tunables back
# unchanged without it).
REGION_HINTS = {
    "tunables": "Pick other values from the lists in TUNABLES: the current ones are the parent's.\n",
    "kernel": "Keep the kernel's name and arguments; do less work per element or load and store less.\n",
    "forward": "Keep the signature; launch fewer or larger programs, avoid needless copies.\n",
}
# Sections dropped, in this order, when the prompt does not fit the model's context window.
DROP_ORDER = ("knowledge_section", "memory_section", "samples_section")
# A first estimate of characters per token for code and English (BPE tokenizers: 3-4); the operator
# refines it from the server's own prompt token counts.
CHARS_PER_TOKEN = 3.0


@dataclass
class Prompt:
    """The chat messages, the same prompt as one text, and how it was fitted (saved on the node)."""

    messages: list[dict[str, str]]
    text: str
    info: dict[str, Any] = field(default_factory=dict)


def _clip(text: str, limit: int) -> str:
    text = text.rstrip()
    if len(text) <= limit:
        return text
    return text[:limit] + f"\n# ... [{len(text) - limit} more characters cut]"


class PromptBuilder:
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
        op_samples: Any = None,
        sample_min_overlap: float = 1.0,
    ) -> None:
        """`op_samples`: a `retrieval.samples.OpSampleIndex`, "auto" for one over the repository's
        kernels keyed by `spec_ops`, or None for no op-keyed samples."""
        self.template_name = template
        self.system, self.user = load_template(template)
        self._retriever = retriever
        self._retriever_lock = threading.Lock()
        self.knowledge_tokens = knowledge_tokens
        self.max_code_chars = max_code_chars
        self.max_reference_chars = max_reference_chars
        self._op_samples = op_samples
        self.sample_min_overlap = sample_min_overlap

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

    @property
    def op_samples(self) -> Any:
        with self._retriever_lock:
            if self._op_samples == "auto":
                try:
                    from retrieval.samples import OpSampleIndex
                    from workbench.llm.spec_ops import spec_ops

                    self._op_samples = OpSampleIndex(spec_ops)
                except ImportError as exc:
                    log.info("op-keyed samples unavailable: %s", exc)
                    self._op_samples = None
            return self._op_samples

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

    def _knowledge_section(self, ctx: StepContext) -> str:
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
        hits = getattr(res, "hits", None)
        if self.op_samples is not None and hits:
            # similarity-retrieved code samples are for whatever op was nearest: the op-keyed samples
            # section replaces them (a 0.5B model copied one for another op verbatim, issue 19)
            text = "\n".join(h.render() for h in hits if getattr(h, "level", "") != "code_sample")
        return (
            f"\n## Relevant knowledge (retrieved for this diagnosis and platform)\n{text.strip()}\n"
            if text.strip()
            else ""
        )

    def _memory_section(self, ctx: StepContext) -> str:
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

    def _samples_section(self, ctx: StepContext, info: dict[str, Any]) -> str:
        """Kernels for the same aten ops as the spec; nothing rather than a kernel for another op."""
        index = self.op_samples
        if index is None:
            return ""
        from retrieval.samples import CodeSample
        from workbench.llm.spec_ops import spec_ops

        try:
            ops = spec_ops(ctx.spec_path, ctx.overrides)
        except Exception as exc:  # a spec the capture cannot run: no samples, the search goes on
            log.info("no op-keyed samples: the spec's ops could not be captured: %s", exc)
            info["spec_ops_error"] = f"{type(exc).__name__}: {exc}"[:200]
            return ""
        info["spec_ops"] = list(ops)
        related = []
        for spec_path, node in ctx.related:
            try:
                node_ops = spec_ops(spec_path)
            except Exception:  # noqa: BLE001 - an old run's spec may be gone or changed: skip it
                continue
            related.append(CodeSample(f"memory:{node.run_id}/{node.id}", node.source or "", frozenset(node_ops),
                                      spec=spec_path, fitness=node.fitness))  # fmt: skip
        try:
            found = index.match(ops, k=1, min_overlap=self.sample_min_overlap, extra=related,
                                exclude_specs=[ctx.spec_path])  # fmt: skip
        except Exception as exc:  # noqa: BLE001 - samples are an aid, never a reason to stop
            log.warning("op-keyed sample lookup failed: %s", exc)
            return ""
        info["samples"] = [{"path": smp.path, "overlap": round(score, 3)} for score, smp in found]
        out = []
        for score, smp in found:
            same = score >= 1.0
            label = (
                f"a correct kernel for the same ops ({', '.join(sorted(smp.ops))})"
                if same
                else f"a kernel that shares some ops with this spec ({', '.join(sorted(smp.ops))}); "
                f"it computes something else: adapt it, do not copy it"
            )
            where = smp.path + (f", speedup {smp.fitness:.3g}x" if smp.fitness else "")
            out.append(f"\n## Code sample: {label}\nFrom {where}.\n```python\n"
                       f"{_clip(smp.source, self.max_code_chars // 2)}\n```\n")  # fmt: skip
        return "".join(out)

    # -- assembly ----------------------------------------------------------------------------
    def build(self, ctx: StepContext, *, edit_prompt: bool = False) -> tuple[list[dict[str, str]], str]:
        """The chat messages, and the same prompt as one text (saved with the node)."""
        p = self.assemble(ctx, edit_prompt=edit_prompt)
        return p.messages, p.text

    def assemble(
        self,
        ctx: StepContext,
        *,
        edit_prompt: bool = False,
        budget_tokens: int | None = None,
        chars_per_token: float = CHARS_PER_TOKEN,
        region: Any = None,
    ) -> Prompt:
        """Fill the template; with `budget_tokens`, drop sections (DROP_ORDER) and clip the reference and
        parent until the estimated prompt size fits. `region` (a `workbench.llm.edits.Region` of the
        parent) asks for that part alone; else `edit_prompt` asks for SEARCH/REPLACE edits."""
        answer = "region" if region is not None else ("edits" if edit_prompt else "module")
        info: dict[str, Any] = {"template": self.template_name, "answer": answer}
        if region is not None:
            info["region"] = region.name
            answer_format = string.Template(REGION_FORMAT).safe_substitute(
                name=region.name, region=region.text, hint=REGION_HINTS.get(region.kind, "")
            )
        else:
            answer_format = EDIT_FORMAT if edit_prompt else MODULE_FORMAT
        fields = {
            "task": self.task(ctx.parents),
            "platform": f"{ctx.platform} ({ctx.arch})",
            "reference_source": _clip(ctx.spec_source, self.max_reference_chars),
            "parents_section": self._parents_section(ctx.parents),
            "diagnosis_section": self._diagnosis_section(ctx.parents),
            "samples_section": self._samples_section(ctx, info),
            "knowledge_section": self._knowledge_section(ctx),
            "memory_section": self._memory_section(ctx),
            "answer_format": answer_format,
        }
        messages, text = self._fill(fields)
        if budget_tokens is not None:
            info["budget_tokens"] = budget_tokens
            limit = int(budget_tokens * chars_per_token)
            dropped = []
            for name in DROP_ORDER:
                if len(text) <= limit:
                    break
                if fields[name]:
                    fields[name] = ""
                    dropped.append(name.removesuffix("_section"))
                    messages, text = self._fill(fields)
            if len(text) > limit:
                # what is left to cut: the reference first (the model needs the parent to edit it)
                over = len(text) - limit
                ref = fields["reference_source"]
                fields["reference_source"] = _clip(ref, max(400, len(ref) - over))
                dropped.append("reference clipped")
                messages, text = self._fill(fields)
            if dropped:
                info["dropped"] = dropped
            info["fits"] = len(text) <= limit
        info["prompt_chars"] = len(text)
        info["prompt_tokens_est"] = math.ceil(len(text) / chars_per_token)
        return Prompt(messages, text, info)

    def _fill(self, fields: dict[str, str]) -> tuple[list[dict[str, str]], str]:
        user = string.Template(self.user).safe_substitute(fields)
        messages = [{"role": "system", "content": self.system}, {"role": "user", "content": user}]
        return messages, chat_text(messages)


def chat_text(messages: list[dict[str, str]]) -> str:
    """The chat as one text: what a node's `prompt` holds."""
    return "".join(f"### {m['role']}\n{m['content']}\n" for m in messages)
