"""The openai provider's HTTP policy against a real local HTTP server (scripted replies)."""

from __future__ import annotations

import json
import logging
import random
import socket
import threading
import time

import pytest
from llm_stub_server import Reply, completion

from workbench.llm import LLMConfig, LLMError, get_provider
from workbench.llm.openai_compat import OpenAIProvider, backoff_delay, parse_retry_after

KEY = "sk-test-SECRET-0123456789"
MSGS = [
    {"role": "system", "content": "You write Triton kernels."},
    {"role": "user", "content": "Make ReLU fast."},
]


def provider(stub, **over) -> OpenAIProvider:
    cfg = dict(
        base_url=stub.url,
        model="m",
        api_key=KEY,
        backoff_base_s=0.05,
        backoff_max_s=1.0,
        timeout_s=10.0,
        max_retries=3,
    )
    cfg.update(over)
    p = get_provider("openai", **cfg)
    assert isinstance(p, OpenAIProvider)
    return p


def test_round_trip_sends_the_request_and_reads_usage(stub):
    stub.set(Reply(body=completion(text="hello", prompt_tokens=13, completion_tokens=5, finish="length")))
    with provider(stub) as p:
        reply = p.generate(MSGS, max_tokens=77, temperature=0.3)
    assert (reply.text, reply.prompt_tokens, reply.completion_tokens) == ("hello", 13, 5)
    assert reply.model == "stub-model" and reply.finish_reason == "length" and reply.attempts == 1
    assert reply.latency_s > 0
    (req,) = stub.requests
    assert (req.method, req.path) == ("POST", "/v1/chat/completions")
    assert req.headers["Authorization"] == f"Bearer {KEY}"
    assert req.body["model"] == "m" and req.body["max_tokens"] == 77 and req.body["temperature"] == 0.3
    assert req.body["messages"] == MSGS and req.body["stream"] is False


def test_no_key_sends_no_authorization_header(stub):
    stub.set(Reply())
    with provider(stub, api_key=None) as p:
        p.generate(MSGS)
    assert "Authorization" not in stub.requests[0].headers


def test_model_is_discovered_from_the_server_when_not_configured(stub, monkeypatch):
    monkeypatch.delenv("WORKBENCH_LLM_MODEL", raising=False)
    stub.set(Reply(body={"object": "list", "data": [{"id": "served-model"}, {"id": "other"}]}), Reply())
    with provider(stub, model=None) as p:
        p.generate(MSGS)
        p.generate(MSGS)
        assert p.model == "served-model"
    paths = [r.path for r in stub.requests]
    assert paths == ["/v1/models", "/v1/chat/completions", "/v1/chat/completions"]
    assert stub.requests[1].body["model"] == "served-model"


def test_429_honours_retry_after(stub):
    stub.set(Reply(429, body={"error": {"message": "slow down"}}, headers={"Retry-After": "1"}), Reply())
    with provider(stub, backoff_base_s=0.01) as p:
        reply = p.generate(MSGS)
    assert reply.attempts == 2 and len(stub.requests) == 2
    gap = stub.requests[1].t - stub.requests[0].t
    assert gap >= 0.95, f"Retry-After: 1 not honoured (waited {gap:.3f}s)"


def test_5xx_is_retried_with_growing_backoff(stub):
    stub.set(Reply(500), Reply(503), Reply(502), Reply())
    with provider(stub, backoff_base_s=0.1, max_retries=3) as p:
        reply = p.generate(MSGS)
    assert reply.attempts == 4 and len(stub.requests) == 4
    gaps = [b.t - a.t for a, b in zip(stub.requests, stub.requests[1:], strict=False)]
    # equal jitter: attempt n waits in [base*2**n / 2, base*2**n]
    for n, gap in enumerate(gaps):
        assert gap >= 0.1 * 2**n / 2 * 0.95, gaps
    assert gaps[2] > gaps[0], gaps


def test_5xx_exhausted_is_bad_response(stub):
    stub.set(Reply(500, body="internal error"))
    with provider(stub, max_retries=2) as p, pytest.raises(LLMError) as ei:
        p.generate(MSGS)
    assert ei.value.kind == "bad_response" and ei.value.status == 500 and ei.value.attempts == 3
    assert len(stub.requests) == 3 and "HTTP 500" in str(ei.value)


def test_429_exhausted_is_rate_limit(stub):
    stub.set(Reply(429, body={"error": "quota"}))
    with provider(stub, max_retries=2) as p, pytest.raises(LLMError) as ei:
        p.generate(MSGS)
    assert ei.value.kind == "rate_limit" and len(stub.requests) == 3


def test_retry_after_longer_than_allowed_fails_at_once(stub):
    stub.set(Reply(429, headers={"Retry-After": "3600"}))
    t0 = time.monotonic()
    with provider(stub, retry_after_max_s=60) as p, pytest.raises(LLMError) as ei:
        p.generate(MSGS)
    assert ei.value.kind == "rate_limit" and len(stub.requests) == 1
    assert time.monotonic() - t0 < 2


@pytest.mark.parametrize("status", [401, 403])
def test_auth_failure_is_immediate_and_scrubs_the_key(stub, status, caplog):
    # some servers echo the key back in the error body; it must not reach the message or the logs
    stub.set(Reply(status, body={"error": {"message": f"Incorrect API key provided: {KEY}"}}), Reply())
    caplog.set_level(logging.DEBUG)
    with provider(stub) as p, pytest.raises(LLMError) as ei:
        p.generate(MSGS)
    assert ei.value.kind == "auth" and ei.value.status == status
    assert len(stub.requests) == 1, "a rejected key must not be retried"
    assert KEY not in str(ei.value) and "<redacted>" in str(ei.value)
    assert KEY not in caplog.text


def test_key_never_appears_in_logs_repr_or_records(stub, caplog):
    caplog.set_level(logging.DEBUG)
    stub.set(Reply(500), Reply())
    with provider(stub) as p:
        p.generate(MSGS)
        assert KEY not in repr(p) and KEY not in json.dumps(p.describe())
        assert KEY not in repr(p.config) and KEY not in json.dumps(p.config.to_dict())
    assert KEY not in caplog.text
    assert "retrying" in caplog.text  # the retry was logged, without the key


def test_slow_server_times_out(stub):
    stub.set(Reply(delay_s=3.0))
    t0 = time.monotonic()
    with provider(stub, timeout_s=0.5) as p, pytest.raises(LLMError) as ei:
        p.generate(MSGS)
    elapsed = time.monotonic() - t0
    assert ei.value.kind == "timeout" and "0.5s" in str(ei.value)
    assert elapsed < 2.5, f"timeout of 0.5 s took {elapsed:.2f}s"
    assert len(stub.requests) == 1


def test_unreachable_endpoint_fails_fast_and_clearly():
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    url = f"http://127.0.0.1:{port}/v1"
    t0 = time.monotonic()
    with (
        get_provider("openai", base_url=url, model="m", connect_retries=2) as p,
        pytest.raises(LLMError) as ei,
    ):
        p.generate(MSGS)
    elapsed = time.monotonic() - t0
    assert ei.value.kind == "unreachable" and ei.value.attempts == 3
    assert url in str(ei.value) and "is the server running" in str(ei.value)
    assert elapsed < 5, f"unreachable took {elapsed:.1f}s"


@pytest.mark.parametrize(
    "reply, kind",
    [
        (Reply(200, body="<html>not json</html>"), "bad_response"),
        (Reply(200, body={"choices": []}), "bad_response"),
        (Reply(200, body={"error": {"message": "model crashed"}}), "bad_response"),
        (
            Reply(200, body={"choices": [{"message": {"content": None}, "finish_reason": "length"}]}),
            "bad_response",
        ),
        (Reply(400, body={"error": {"message": "context length exceeded"}}), "bad_response"),
        (Reply(404, body={"error": "no such route"}), "config"),
    ],
)
def test_malformed_or_refused_replies(stub, reply, kind):
    stub.set(reply)
    with provider(stub) as p, pytest.raises(LLMError) as ei:
        p.generate(MSGS)
    assert ei.value.kind == kind
    assert len(stub.requests) == 1


def test_missing_usage_counts_zero_and_warns(stub, caplog):
    body = completion()
    del body["usage"]
    stub.set(Reply(body=body))
    with provider(stub) as p:
        reply = p.generate(MSGS)
    assert (reply.prompt_tokens, reply.completion_tokens) == (0, 0)
    assert "no token usage" in caplog.text


def test_concurrent_calls_share_one_provider(stub):
    stub.set(Reply(delay_s=0.2))
    results: list = []
    with provider(stub) as p:
        threads = [threading.Thread(target=lambda: results.append(p.generate(MSGS))) for _ in range(4)]
        t0 = time.monotonic()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        elapsed = time.monotonic() - t0
    assert len(results) == 4 and len(stub.requests) == 4
    assert elapsed < 0.75, f"calls were serialised ({elapsed:.2f}s for 4 x 0.2s)"


def test_bad_messages_and_settings_are_config_errors(stub):
    with provider(stub) as p:
        for bad in (
            [],
            [{"content": "x"}],
            [{"role": "robot", "content": "x"}],
            [{"role": "user", "content": 3}],
        ):
            with pytest.raises(LLMError) as ei:
                p.generate(bad)
            assert ei.value.kind == "config"
    assert stub.requests == []
    with pytest.raises(LLMError) as ei:
        get_provider("openai", base_url="localhost:8080/v1")
    assert ei.value.kind == "config"


def test_none_provider_points_to_the_offline_operator():
    p = get_provider("none")
    with pytest.raises(LLMError) as ei:
        p.generate(MSGS)
    assert ei.value.kind == "config" and "offline tuning operator" in str(ei.value)
    with pytest.raises(LLMError) as ei:
        get_provider("claude")
    assert ei.value.kind == "config" and "openai, transformers, none" in str(ei.value)


def test_backoff_grows_with_jitter_and_is_capped():
    rng = random.Random(0)
    for attempt in range(8):
        step = min(4.0, 0.5 * 2**attempt)
        draws = [backoff_delay(attempt, 0.5, 4.0, rng) for _ in range(200)]
        assert all(step / 2 <= d <= step for d in draws)
        assert max(draws) - min(draws) > step / 4  # jittered, not a constant


def test_parse_retry_after_forms():
    assert parse_retry_after("7") == 7.0
    assert parse_retry_after("0.5") == 0.5
    assert parse_retry_after("-3") == 0.0
    assert parse_retry_after(None) is None and parse_retry_after("soon") is None
    now = 1_800_000_000.0
    date = time.strftime("%a, %d %b %Y %H:%M:%S GMT", time.gmtime(now + 30))
    assert parse_retry_after(date, now=now) == pytest.approx(30.0, abs=1.0)


def test_provider_built_from_a_config_object(stub):
    cfg = LLMConfig(provider="openai", base_url=stub.url, model="cfg-model", api_key=KEY)
    stub.set(Reply())
    with get_provider("openai", config=cfg, model="override") as p:
        p.generate(MSGS)
    assert stub.requests[0].body["model"] == "override"
