"""Typed LLM configuration: environment variables, YAML with `${VAR}` secrets, explicit overrides.

Precedence, lowest first: defaults, environment variables, the YAML file, keyword overrides.
Secrets are read from the environment at load time and live only in memory: `repr()` hides the key,
`to_dict()` writes it back as the `${VAR}` reference it came from (or `<redacted>`), so a saved run
config can be reloaded on another machine without the key ever touching the disk.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from workbench.llm.provider import LLMError

log = logging.getLogger(__name__)

PROVIDERS = ("openai", "transformers", "none")
DEFAULT_OPENAI_BASE_URL = "https://api.openai.com/v1"
REDACTED = "<redacted>"

# env var -> config field; the first variable that is set wins for a field.
ENV_VARS: dict[str, tuple[str, ...]] = {
    "provider": ("WORKBENCH_LLM_PROVIDER",),
    "base_url": ("WORKBENCH_LLM_BASE_URL", "OPENAI_BASE_URL"),
    "model": ("WORKBENCH_LLM_MODEL",),
    "api_key": ("WORKBENCH_LLM_API_KEY", "OPENAI_API_KEY"),
    "model_dir": ("WORKBENCH_LLM_MODEL_DIR",),
    "timeout_s": ("WORKBENCH_LLM_TIMEOUT_S",),
    "max_retries": ("WORKBENCH_LLM_MAX_RETRIES",),
    "device": ("WORKBENCH_LLM_DEVICE",),
    "context_window": ("WORKBENCH_LLM_CONTEXT_WINDOW",),
}

_OPTIONAL_STR = frozenset({"base_url", "model", "api_key", "api_key_env", "model_dir"})
_VAR_RE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")


@dataclass
class LLMConfig:
    """Everything a provider needs. Field names are the keys accepted by YAML and `get_provider(**cfg)`."""

    provider: str = "none"
    # openai-compatible endpoint (OpenAI, vLLM, llama.cpp server, Ollama's /v1)
    base_url: str | None = None
    model: str | None = None  # None: ask the server's /models and take the first one
    api_key: str | None = field(default=None, repr=False)
    api_key_env: str | None = None  # the variable the key came from (what to_dict writes back)
    timeout_s: float = 300.0  # per HTTP call (read); generation on a slow server takes minutes
    connect_timeout_s: float = 5.0
    max_retries: int = 4  # extra attempts on 429 and 5xx
    connect_retries: int = 2  # extra attempts on connection errors: an absent server fails fast
    backoff_base_s: float = 1.0  # full-jitter exponential backoff: U(0, min(max, base * 2**n))
    backoff_max_s: float = 30.0
    retry_after_max_s: float = 120.0  # a longer Retry-After than this fails with kind="rate_limit"
    # transformers (a local causal LM directory)
    model_dir: str | None = None
    device: str = "cpu"  # "cpu", "cuda", "auto"
    dtype: str = "float32"  # torch dtype name for the local model
    seed: int | None = None  # seeds sampling in the local provider
    # tokens the model sees (prompt + reply); None: ask the server's /models (vLLM, llama.cpp's own
    # server report it; llama-cpp-python's does not, so set it to the server's --n_ctx there)
    context_window: int | None = None

    def __post_init__(self) -> None:
        if self.provider not in PROVIDERS:
            raise LLMError(
                "config", f"unknown LLM provider {self.provider!r}; choose one of {', '.join(PROVIDERS)}"
            )
        for name in (
            "timeout_s",
            "connect_timeout_s",
            "backoff_base_s",
            "backoff_max_s",
            "retry_after_max_s",
        ):
            value = getattr(self, name)
            if not isinstance(value, (int, float)) or value < 0:
                raise LLMError("config", f"llm.{name} must be a non-negative number, got {value!r}")
        for name in ("max_retries", "connect_retries"):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 0:
                raise LLMError("config", f"llm.{name} must be a non-negative integer, got {value!r}")

    # ---- loading -------------------------------------------------------------------------------------
    @classmethod
    def field_names(cls) -> tuple[str, ...]:
        return tuple(f.name for f in dataclasses.fields(cls))

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None, **overrides: Any) -> LLMConfig:
        """Defaults, then environment variables, then `overrides` (None values are ignored)."""
        env = os.environ if env is None else env
        values: dict[str, Any] = {}
        for name, variables in ENV_VARS.items():
            for var in variables:
                if env.get(var):
                    values[name] = env[var]
                    if name == "api_key":
                        values["api_key_env"] = var
                    break
        values.update({k: v for k, v in overrides.items() if v is not None})
        return cls.from_dict(values, env=env)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], env: Mapping[str, str] | None = None) -> LLMConfig:
        """Build from plain data, resolving `${VAR}` / `${VAR:-default}` in strings from `env`."""
        env = os.environ if env is None else env
        unknown = sorted(set(data) - set(cls.field_names()))
        if unknown:
            raise LLMError(
                "config", f"unknown llm config keys {unknown}; allowed: {', '.join(cls.field_names())}"
            )
        values: dict[str, Any] = {}
        for key, raw in data.items():
            if isinstance(raw, str):
                resolved, var = _resolve(raw, env, key)
                if key == "api_key":
                    if var is not None:
                        values["api_key_env"] = var
                    if resolved == REDACTED:
                        raise LLMError(
                            "config", "llm.api_key is '<redacted>' (a saved config): set it to ${VAR}"
                        )
                # an empty optional string ("${WORKBENCH_LLM_MODEL:-}") means "not set"
                values[key] = None if resolved == "" and key in _OPTIONAL_STR else resolved
            else:
                values[key] = raw
        for name, typ in (
            ("timeout_s", float),
            ("connect_timeout_s", float),
            ("backoff_base_s", float),
            ("backoff_max_s", float),
            ("retry_after_max_s", float),
            ("max_retries", int),
            ("connect_retries", int),
            ("seed", int),
            ("context_window", int),
        ):
            if isinstance(values.get(name), str):
                try:
                    values[name] = typ(values[name])
                except ValueError:
                    raise LLMError(
                        "config", f"llm.{name} must be a {typ.__name__}, got {values[name]!r}"
                    ) from None
        return cls(**values)

    @classmethod
    def from_yaml(cls, path: str | Path, env: Mapping[str, str] | None = None, **overrides: Any) -> LLMConfig:
        """Load a YAML file (keys at the top level or under `llm:`), on top of the environment."""
        import yaml

        try:
            data = yaml.safe_load(Path(path).read_text()) or {}
        except (OSError, yaml.YAMLError) as exc:
            raise LLMError("config", f"cannot read LLM config {path}: {exc}") from None
        if isinstance(data, dict) and isinstance(data.get("llm"), dict):
            data = data["llm"]
        if not isinstance(data, dict):
            raise LLMError("config", f"LLM config {path} must be a mapping, got {type(data).__name__}")
        merged = dict(data)
        merged.update({k: v for k, v in overrides.items() if v is not None})
        base = cls.from_env(env)
        # YAML and overrides sit on top of the environment values.
        combined = {k: v for k, v in base.to_dict(redact=False).items()}
        if "api_key" in merged:
            combined.pop("api_key_env", None)
        combined.update(merged)
        key = data.get("api_key")
        if isinstance(key, str) and key and key != REDACTED and not _VAR_RE.search(key):
            log.warning("%s holds a literal llm.api_key; prefer a ${OPENAI_API_KEY} reference", path)
        return cls.from_dict(combined, env=env)

    # ---- saving --------------------------------------------------------------------------------------
    def to_dict(self, *, redact: bool = True) -> dict[str, Any]:
        """Plain data for run records. The key becomes `${VAR}` (or `<redacted>`) unless redact=False."""
        out = dataclasses.asdict(self)
        if redact and self.api_key is not None:
            out["api_key"] = f"${{{self.api_key_env}}}" if self.api_key_env else REDACTED
        return out

    def resolved_base_url(self) -> str:
        return (self.base_url or DEFAULT_OPENAI_BASE_URL).rstrip("/")


def _resolve(value: str, env: Mapping[str, str], key: str) -> tuple[str, str | None]:
    """Substitute `${VAR}` references; return the text and the single variable name if it was one."""
    only_var: str | None = None
    m = _VAR_RE.fullmatch(value.strip())
    if m:
        only_var = m.group(1)

    def sub(match: re.Match) -> str:
        var, default = match.group(1), match.group(2)
        if var in env and env[var] != "":
            return env[var]
        if default is not None:
            return default
        raise LLMError("config", f"environment variable {var} (referenced by llm.{key}) is not set")

    return _VAR_RE.sub(sub, value), only_var
