"""The `openai` provider: any OpenAI-compatible `/chat/completions` endpoint over httpx.

Works with OpenAI, vLLM, llama.cpp's server and Ollama (`http://localhost:11434/v1`). Failure policy:
- connection refused / DNS / connect timeout: `connect_retries` quick retries, then kind="unreachable"
  (an absent local server is reported in about a second, not after minutes of backoff);
- 429: retried up to `max_retries` times, honouring Retry-After (seconds or an HTTP date), else
  exponential backoff with jitter; then kind="rate_limit";
- 5xx, 408 and dropped connections: same backoff, then kind="bad_response";
- 401/403: kind="auth" at once (retrying a bad key only burns quota);
- no reply within `timeout_s`: kind="timeout" (not retried: a model that needed longer once will again).
The key is sent in the Authorization header only; it is scrubbed from every error message and log line.
"""

from __future__ import annotations

import email.utils
import logging
import random
import threading
import time
from datetime import datetime, timezone
from typing import Any, Callable

from workbench.llm.provider import LLMError, LLMProvider, LLMReply, validate_messages
from workbench.llm.provider_config import LLMConfig

log = logging.getLogger(__name__)

_RETRY_STATUSES = frozenset({408, 500, 502, 503, 504})
_SNIPPET = 300


def backoff_delay(attempt: int, base_s: float, max_s: float, rng: random.Random) -> float:
    """Exponential backoff with "equal jitter": half the step is fixed, half uniform, so it still grows.

    attempt 0 -> [base/2, base], attempt 1 -> [base, 2 base], ..., capped at max_s.
    """
    step = min(max_s, base_s * (2**attempt))
    return step / 2 + rng.uniform(0, step / 2)


def parse_retry_after(value: str | None, now: float | None = None) -> float | None:
    """Retry-After header -> seconds to wait (delta-seconds or HTTP-date); None if absent or unreadable."""
    if not value:
        return None
    value = value.strip()
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=timezone.utc)
    now_dt = datetime.fromtimestamp(time.time() if now is None else now, tz=timezone.utc)
    return max(0.0, (when - now_dt).total_seconds())


class OpenAIProvider(LLMProvider):
    """Chat completions against `config.base_url` (default: OpenAI)."""

    name = "openai"

    def __init__(
        self,
        config: LLMConfig,
        *,
        sleep: Callable[[float], None] = time.sleep,
        rng: random.Random | None = None,
    ) -> None:
        try:
            import httpx
        except ImportError:
            raise LLMError(
                "config", "the openai provider needs httpx: pip install 'kernel-workbench[llm]'"
            ) from None
        self._httpx = httpx
        self.config = config
        self.base_url = config.resolved_base_url()
        if not self.base_url.startswith(("http://", "https://")):
            raise LLMError(
                "config", f"LLM base URL must start with http:// or https://, got {self.base_url!r}"
            )
        self._model = config.model
        self._model_lock = threading.Lock()
        self._sleep = sleep
        self._rng = rng or random.Random()
        self._warned_usage = False
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if config.api_key:
            headers["Authorization"] = f"Bearer {config.api_key}"
        self._client = httpx.Client(
            base_url=self.base_url,
            headers=headers,
            timeout=httpx.Timeout(config.timeout_s, connect=config.connect_timeout_s),
        )

    def __repr__(self) -> str:
        return f"OpenAIProvider(base_url={self.base_url!r}, model={self._model!r})"

    # ---- public --------------------------------------------------------------------------------------
    @property
    def model(self) -> str | None:
        return self._model

    def describe(self) -> dict[str, Any]:
        return {"provider": self.name, "base_url": self.base_url, "model": self._model}

    def close(self) -> None:
        self._client.close()

    def list_models(self) -> list[str]:
        """Model ids the server offers (`GET /models`)."""
        response, _ = self._request("GET", "/models")
        data = self._json(response)
        items = data.get("data") if isinstance(data, dict) else None
        if not isinstance(items, list):
            raise LLMError(
                "bad_response", f"GET {self.base_url}/models returned no 'data' list: {self._snip(response)}"
            )
        return [str(item.get("id")) for item in items if isinstance(item, dict) and item.get("id")]

    def context_window(self) -> int | None:
        """Tokens the model sees (prompt + reply): the configured value, else what `GET /models` reports
        (vLLM's `max_model_len`, llama.cpp's `meta.n_ctx`, LM Studio's `context_length`), else None."""
        if self.config.context_window:
            return int(self.config.context_window)
        try:
            response, _ = self._request("GET", "/models")
            items = self._json(response).get("data") or []
        except (LLMError, AttributeError) as exc:
            log.info("context window unknown (GET /models: %s)", exc)
            return None
        for item in items if isinstance(items, list) else []:
            if not isinstance(item, dict) or (self._model and item.get("id") not in (self._model, None)):
                continue
            meta = item.get("meta") if isinstance(item.get("meta"), dict) else {}
            for value in (item.get("max_model_len"), item.get("context_length"), item.get("n_ctx"),
                          meta.get("n_ctx"), meta.get("n_ctx_train")):  # fmt: skip
                if isinstance(value, int) and value > 0:
                    return value
        return None

    def generate(self, messages: list[dict], *, max_tokens: int = 2048, temperature: float = 0.7) -> LLMReply:
        validate_messages(messages)
        if max_tokens < 1:
            raise LLMError("config", f"max_tokens must be >= 1, got {max_tokens}")
        model = self._model or self._discover_model()
        payload = {
            "model": model,
            "messages": [{"role": m["role"], "content": m["content"]} for m in messages],
            "max_tokens": int(max_tokens),
            "temperature": float(temperature),
            "stream": False,
        }
        t0 = time.perf_counter()
        response, attempts = self._request("POST", "/chat/completions", json=payload)
        latency = time.perf_counter() - t0
        data = self._json(response)
        if not isinstance(data, dict):
            raise LLMError("bad_response", f"chat completion is not a JSON object: {self._snip(response)}")
        if data.get("error"):
            raise LLMError(
                "bad_response",
                f"server returned an error object: {self._scrub(str(data['error']))[:_SNIPPET]}",
            )
        choices = data.get("choices")
        if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
            raise LLMError("bad_response", f"chat completion has no choices: {self._snip(response)}")
        choice = choices[0]
        message = choice.get("message") if isinstance(choice.get("message"), dict) else {}
        text = message.get("content")
        if text is None:
            text = choice.get("text")  # some servers answer in the legacy completions shape
        finish = choice.get("finish_reason")
        if not isinstance(text, str):
            raise LLMError(
                "bad_response",
                f"chat completion has no text content (finish_reason={finish!r}); "
                "a reasoning model may need a larger max_tokens",
            )
        usage = data.get("usage") if isinstance(data.get("usage"), dict) else {}
        if not usage and not self._warned_usage:
            log.warning(
                "%s reports no token usage; token budgets will count 0 for its replies", self.base_url
            )
            self._warned_usage = True
        return LLMReply(
            text=text,
            prompt_tokens=int(usage.get("prompt_tokens") or 0),
            completion_tokens=int(usage.get("completion_tokens") or 0),
            model=str(data.get("model") or model),
            latency_s=latency,
            finish_reason=finish if isinstance(finish, str) else None,
            attempts=attempts,
        )

    # ---- internals -----------------------------------------------------------------------------------
    def _discover_model(self) -> str:
        with self._model_lock:
            if self._model is None:
                models = self.list_models()
                if not models:
                    raise LLMError("config", f"{self.base_url} lists no models; set WORKBENCH_LLM_MODEL")
                self._model = models[0]
                log.info(
                    "no model configured; using %s, the first model %s lists", self._model, self.base_url
                )
            return self._model

    def _request(self, method: str, path: str, json: dict | None = None) -> tuple[Any, int]:
        """Send with the retry policy; return (response, attempts). Only 2xx responses come back."""
        httpx = self._httpx
        cfg = self.config
        url = f"{self.base_url}{path}"
        attempts = conn_failures = http_failures = 0
        while True:
            attempts += 1
            try:
                response = self._client.request(method, path, json=json)
            except (httpx.ConnectError, httpx.ConnectTimeout) as exc:
                if conn_failures >= cfg.connect_retries:
                    raise LLMError(
                        "unreachable",
                        f"cannot connect to {self.base_url} ({type(exc).__name__}: {self._scrub(str(exc))}) "
                        f"after {attempts} attempt(s); is the server running? "
                        "(set WORKBENCH_LLM_BASE_URL or OPENAI_BASE_URL)",
                        attempts=attempts,
                    ) from None
                delay = backoff_delay(
                    conn_failures, min(cfg.backoff_base_s, 0.5), cfg.backoff_max_s, self._rng
                )
                conn_failures += 1
                log.info("%s %s: %s; retrying in %.2fs", method, url, type(exc).__name__, delay)
                self._sleep(delay)
                continue
            except httpx.TimeoutException as exc:
                raise LLMError(
                    "timeout",
                    f"{method} {url}: no reply within {cfg.timeout_s:g}s ({type(exc).__name__}); "
                    "raise llm.timeout_s / WORKBENCH_LLM_TIMEOUT_S for slow models",
                    attempts=attempts,
                ) from None
            except httpx.TransportError as exc:
                # the server dropped the connection mid-request: transient, same policy as a 5xx
                if http_failures >= cfg.max_retries:
                    raise LLMError(
                        "unreachable",
                        f"{method} {url}: connection failed ({type(exc).__name__}: {self._scrub(str(exc))}) "
                        f"after {attempts} attempt(s)",
                        attempts=attempts,
                    ) from None
                delay = backoff_delay(http_failures, cfg.backoff_base_s, cfg.backoff_max_s, self._rng)
                http_failures += 1
                log.info("%s %s: %s; retrying in %.2fs", method, url, type(exc).__name__, delay)
                self._sleep(delay)
                continue

            status = response.status_code
            if status < 300:
                return response, attempts
            if status in (401, 403):
                raise LLMError(
                    "auth",
                    f"{url} refused the request with HTTP {status}: check the API key "
                    f"(WORKBENCH_LLM_API_KEY or OPENAI_API_KEY{'; none is set' if not cfg.api_key else ''}). "
                    f"Server said: {self._snip(response)}",
                    status=status,
                    attempts=attempts,
                )
            if status == 429:
                retry_after = parse_retry_after(response.headers.get("retry-after"))
                if http_failures >= cfg.max_retries:
                    raise LLMError(
                        "rate_limit",
                        f"{url} is rate limiting (HTTP 429) after {attempts} attempt(s): "
                        f"{self._snip(response)}",
                        status=status,
                        attempts=attempts,
                    )
                if retry_after is not None and retry_after > cfg.retry_after_max_s:
                    raise LLMError(
                        "rate_limit",
                        f"{url} asks to retry after {retry_after:.0f}s (> llm.retry_after_max_s="
                        f"{cfg.retry_after_max_s:g}s): {self._snip(response)}",
                        status=status,
                        attempts=attempts,
                    )
                delay = (
                    retry_after
                    if retry_after is not None
                    else backoff_delay(http_failures, cfg.backoff_base_s, cfg.backoff_max_s, self._rng)
                )
                http_failures += 1
                log.info(
                    "%s %s: HTTP 429; retrying in %.2fs (retry-after=%s)", method, url, delay, retry_after
                )
                self._sleep(delay)
                continue
            if status in _RETRY_STATUSES:
                if http_failures >= cfg.max_retries:
                    raise LLMError(
                        "bad_response",
                        f"{url} failed with HTTP {status} after {attempts} attempt(s): "
                        f"{self._snip(response)}",
                        status=status,
                        attempts=attempts,
                    )
                delay = backoff_delay(http_failures, cfg.backoff_base_s, cfg.backoff_max_s, self._rng)
                http_failures += 1
                log.info("%s %s: HTTP %d; retrying in %.2fs", method, url, status, delay)
                self._sleep(delay)
                continue
            if status == 404:
                raise LLMError(
                    "config",
                    f"{url} returned 404: check the base URL (OpenAI-compatible servers usually end in /v1) "
                    f"and the model name {self._model!r}. Server said: {self._snip(response)}",
                    status=status,
                    attempts=attempts,
                )
            raise LLMError(
                "bad_response",
                f"{url} returned HTTP {status}: {self._snip(response)}",
                status=status,
                attempts=attempts,
            )

    def _json(self, response: Any) -> Any:
        try:
            return response.json()
        except ValueError:
            raise LLMError("bad_response", f"reply is not JSON: {self._snip(response)}") from None

    def _snip(self, response: Any) -> str:
        try:
            body = response.text
        except Exception as exc:  # noqa: BLE001 - undecodable body: say so instead of failing the report
            body = f"<unreadable body: {exc}>"
        return self._scrub(body.strip().replace("\n", " "))[:_SNIPPET]

    def _scrub(self, text: str) -> str:
        key = self.config.api_key
        return text.replace(key, "<redacted>") if key else text
