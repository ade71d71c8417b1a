"""LLM configuration: environment precedence, YAML with ${VAR} secrets, redaction."""

from __future__ import annotations

import json
import logging

import pytest
import yaml

from workbench.llm import LLMConfig, LLMError

SECRET = "sk-live-ABCDEF-987654"


def test_env_precedence_and_types():
    env = {
        "OPENAI_BASE_URL": "http://openai-var/v1",
        "WORKBENCH_LLM_BASE_URL": "http://workbench-var/v1",
        "OPENAI_API_KEY": "from-openai-var",
        "WORKBENCH_LLM_API_KEY": SECRET,
        "WORKBENCH_LLM_MODEL": "qwen",
        "WORKBENCH_LLM_TIMEOUT_S": "12.5",
        "WORKBENCH_LLM_MAX_RETRIES": "7",
    }
    cfg = LLMConfig.from_env(env, provider="openai")
    assert cfg.base_url == "http://workbench-var/v1" and cfg.model == "qwen"
    assert cfg.api_key == SECRET and cfg.api_key_env == "WORKBENCH_LLM_API_KEY"
    assert cfg.timeout_s == 12.5 and cfg.max_retries == 7
    only_openai = LLMConfig.from_env(
        {"OPENAI_API_KEY": SECRET, "OPENAI_BASE_URL": "http://x/v1"}, provider="openai"
    )
    assert only_openai.api_key_env == "OPENAI_API_KEY" and only_openai.base_url == "http://x/v1"
    # explicit overrides beat the environment; None overrides are ignored
    assert LLMConfig.from_env(env, model="llama", base_url=None).model == "llama"
    assert LLMConfig.from_env({}, provider="openai").resolved_base_url() == "https://api.openai.com/v1"


def test_yaml_secrets_resolve_from_env_and_are_never_written(tmp_path):
    path = tmp_path / "run.yaml"
    path.write_text(
        "llm:\n"
        "  provider: openai\n"
        "  base_url: ${MY_LLM_URL:-http://127.0.0.1:8080/v1}\n"
        "  model: smollm2\n"
        "  api_key: ${MY_LLM_KEY}\n"
        "  timeout_s: 30\n"
    )
    env = {"MY_LLM_KEY": SECRET}
    cfg = LLMConfig.from_yaml(path, env=env)
    assert cfg.api_key == SECRET and cfg.base_url == "http://127.0.0.1:8080/v1" and cfg.timeout_s == 30
    assert SECRET not in repr(cfg)
    saved = cfg.to_dict()
    assert saved["api_key"] == "${MY_LLM_KEY}"
    out = tmp_path / "saved.yaml"
    out.write_text(yaml.safe_dump({"llm": saved}))
    assert SECRET not in out.read_text() and SECRET not in json.dumps(saved)
    # the saved file reloads with the key taken from the environment again
    again = LLMConfig.from_yaml(out, env=env)
    assert again == cfg


def test_missing_secret_variable_is_a_config_error(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("provider: openai\napi_key: ${NOT_SET_ANYWHERE_123}\n")
    with pytest.raises(LLMError) as ei:
        LLMConfig.from_yaml(path, env={})
    assert ei.value.kind == "config" and "NOT_SET_ANYWHERE_123" in str(ei.value)


def test_key_from_plain_env_is_redacted_in_records():
    cfg = LLMConfig(provider="openai", api_key=SECRET)
    assert cfg.to_dict()["api_key"] == "<redacted>"
    assert cfg.to_dict(redact=False)["api_key"] == SECRET
    with pytest.raises(LLMError):  # a saved, redacted config cannot be used as if it had a key
        LLMConfig.from_dict(cfg.to_dict())


def test_literal_key_in_yaml_warns(tmp_path, caplog):
    path = tmp_path / "c.yaml"
    path.write_text(f"provider: openai\napi_key: {SECRET}\n")
    with caplog.at_level(logging.WARNING):
        cfg = LLMConfig.from_yaml(path, env={})
    assert cfg.api_key == SECRET and "literal llm.api_key" in caplog.text and SECRET not in caplog.text


@pytest.mark.parametrize(
    "data, fragment",
    [
        ({"provider": "gpt"}, "unknown LLM provider"),
        ({"temperature": 0.2}, "unknown llm config keys"),
        ({"timeout_s": -1}, "timeout_s"),
        ({"max_retries": "many"}, "max_retries"),
    ],
)
def test_bad_config_values(data, fragment):
    with pytest.raises(LLMError) as ei:
        LLMConfig.from_dict(data, env={})
    assert ei.value.kind == "config" and fragment in str(ei.value)


def test_unreadable_yaml_is_a_config_error(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text("llm: [unclosed\n")
    with pytest.raises(LLMError) as ei:
        LLMConfig.from_yaml(path, env={})
    assert ei.value.kind == "config"
    with pytest.raises(LLMError):
        LLMConfig.from_yaml(tmp_path / "missing.yaml", env={})


def test_every_key_variable_is_stripped_from_candidate_processes():
    # the harness launches candidates with workbench.env.stripped_environ(); the variables this package
    # reads a key from must all be caught by it
    from workbench.env import stripped_environ
    from workbench.llm.provider_config import ENV_VARS

    env = {var: SECRET for var in ENV_VARS["api_key"]} | {"PATH": "/bin", "WORKBENCH_LLM_MODEL": "m"}
    assert stripped_environ(env) == {"PATH": "/bin", "WORKBENCH_LLM_MODEL": "m"}


def test_key_passed_in_code_does_not_warn(caplog):
    from workbench.llm import get_provider

    with caplog.at_level(logging.WARNING):
        get_provider("openai", base_url="http://127.0.0.1:9/v1", api_key=SECRET).close()
    assert "literal" not in caplog.text
