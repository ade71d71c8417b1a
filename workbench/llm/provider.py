"""The provider interface every LLM backend implements, its reply record and its one error type.

Providers turn a chat (a list of `{"role": ..., "content": ...}` dicts) into text. Everything that can
go wrong is an `LLMError` with a `kind` the search engine can act on: `auth` and `config` stop a run
with one clear message, `rate_limit`/`timeout`/`unreachable`/`bad_response` become a recorded failed
node and the search goes on.
"""

from __future__ import annotations

import abc
from dataclasses import dataclass
from typing import Any

ERROR_KINDS = frozenset({"unreachable", "auth", "rate_limit", "timeout", "bad_response", "config"})


class LLMError(RuntimeError):
    """A provider failure. `kind` is one of `ERROR_KINDS`; `status` is the HTTP status when there was one."""

    def __init__(self, kind: str, message: str, *, status: int | None = None, attempts: int = 1) -> None:
        if kind not in ERROR_KINDS:
            raise ValueError(f"unknown LLMError kind {kind!r}; expected one of {sorted(ERROR_KINDS)}")
        super().__init__(message)
        self.kind = kind
        self.status = status
        self.attempts = attempts

    def __str__(self) -> str:
        return f"[{self.kind}] {self.args[0]}"


@dataclass(frozen=True)
class LLMReply:
    """One completion. Token counts come from the server (or the local tokenizer), not estimates."""

    text: str
    prompt_tokens: int
    completion_tokens: int
    model: str
    latency_s: float
    # "stop", "length" (hit max_tokens: the code is likely truncated), ... ; None when unknown.
    finish_reason: str | None = None
    attempts: int = 1

    def to_dict(self) -> dict[str, Any]:
        return {
            "text": self.text,
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "model": self.model,
            "latency_s": self.latency_s,
            "finish_reason": self.finish_reason,
            "attempts": self.attempts,
        }


class LLMProvider(abc.ABC):
    """A chat model behind one call. Implementations must be safe to call from several threads."""

    name: str = "?"

    @abc.abstractmethod
    def generate(self, messages: list[dict], *, max_tokens: int = 2048, temperature: float = 0.7) -> LLMReply:
        """Return the model's reply to `messages`, or raise `LLMError`."""

    def describe(self) -> dict[str, Any]:
        """A JSON-able description for run records (never contains secrets)."""
        return {"provider": self.name}

    def close(self) -> None:  # noqa: B027 - optional hook, not abstract: most providers hold nothing
        """Release connections or model memory; the default has nothing to release."""

    def __enter__(self) -> LLMProvider:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def validate_messages(messages: list[dict]) -> None:
    """Reject malformed chats early with a `config` error instead of a confusing server 400."""
    if not isinstance(messages, list) or not messages:
        raise LLMError("config", "messages must be a non-empty list of {'role', 'content'} dicts")
    for i, m in enumerate(messages):
        if not isinstance(m, dict) or "role" not in m or "content" not in m:
            raise LLMError("config", f"message {i} must be a dict with 'role' and 'content', got {m!r:.80}")
        if m["role"] not in ("system", "user", "assistant"):
            raise LLMError("config", f"message {i} has unknown role {m['role']!r}")
        if not isinstance(m["content"], str):
            raise LLMError("config", f"message {i} content must be a string")


class NoneProvider(LLMProvider):
    """No model configured: the search uses the offline tuning operator instead of this one."""

    name = "none"

    def generate(self, messages: list[dict], *, max_tokens: int = 2048, temperature: float = 0.7) -> LLMReply:
        raise LLMError(
            "config",
            "no LLM is configured (provider 'none'): the offline tuning operator is used instead; "
            "set WORKBENCH_LLM_BASE_URL/WORKBENCH_LLM_MODEL and pass --llm openai (or --llm transformers "
            "with a model directory) to generate kernels with a model",
        )
