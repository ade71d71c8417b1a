"""The LLM step: providers that turn a prompt into text, the prompt, and everything that turns a reply into
a checked candidate (docs/llm.md has the map of the package's files).

    from workbench.llm import LLMSettings, get_provider
    from workbench.llm.step import LLMStep
    step = LLMStep(get_provider("openai"), LLMSettings(best_of=2))
    outcomes = step.expand(ctx)                     # ctx: a workbench.llm.context.StepContext

The provider alone:

    from workbench.llm import get_provider, LLMError
    from workbench.llm.parse import extract_code

    llm = get_provider("openai")                    # base URL, model, key from the environment
    llm = get_provider("openai", base_url="http://127.0.0.1:8080/v1", model="smollm2")
    llm = get_provider("transformers", model_dir="/models/tiny")
    llm = get_provider("none")                      # the search uses the offline tuning operator
    reply = llm.generate([{"role": "user", "content": "..."}], max_tokens=512, temperature=0.2)
    found = extract_code(reply.text)                # never raises; found.code may be None

httpx and transformers are imported only when their provider is built.
"""

from __future__ import annotations

from typing import Any

from workbench.llm.provider import ERROR_KINDS, LLMError, LLMProvider, LLMReply, NoneProvider
from workbench.llm.provider_config import PROVIDERS, LLMConfig
from workbench.llm.settings import LLMSettings, LLMSettingsError

__all__ = [
    "ERROR_KINDS",
    "PROVIDERS",
    "LLMConfig",
    "LLMError",
    "LLMProvider",
    "LLMReply",
    "LLMSettings",
    "LLMSettingsError",
    "get_provider",
]


def get_provider(name: str, config: LLMConfig | None = None, **cfg: Any) -> LLMProvider:
    """Build the provider `name` ("openai" | "transformers" | "none").

    `cfg` holds `LLMConfig` field overrides (None values are ignored, so CLI flags can be passed
    straight through). Without `config`, the environment supplies the rest (see docs/llm.md).
    Raises `LLMError(kind="config")` for an unknown name or an unusable configuration.
    """
    if name not in PROVIDERS:
        raise LLMError("config", f"unknown LLM provider {name!r}; choose one of {', '.join(PROVIDERS)}")
    if config is None:
        config = LLMConfig.from_env(provider=name, **cfg)
    else:
        merged = config.to_dict(redact=False)
        merged.update({k: v for k, v in cfg.items() if v is not None})
        merged["provider"] = name
        config = LLMConfig.from_dict(merged)
    if name == "none":
        return NoneProvider()
    if name == "openai":
        from workbench.llm.openai_compat import OpenAIProvider

        return OpenAIProvider(config)
    from workbench.llm.local_hf import TransformersProvider

    return TransformersProvider(config)
