"""The LLM operator: prompt assembly from the runtime context, the LLM step's failure paths through the
real `openai` provider against a local HTTP endpoint with the real harness on CPU, and every call saved
in the run folder with its node's verdict."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

import workbench
from tests.search.chat_server import ChatServer
from workbench.llm.prompt import PromptBuilder, load_template
from workbench.llm.transcript import calls_table, load_calls
from workbench.memory import Memory
from workbench.search.node import Node
from workbench.search.operators import OperatorContext

FIX = Path(__file__).parent / "fixtures"
SPEC = FIX / "add_spec.py"
SRC = (FIX / "add_candidate.py").read_text()


class _Retriever:
    """Records what the operator asked for (the retrieval interface of docs/CONTRACTS.md)."""

    def __init__(self) -> None:
        self.calls: list[tuple] = []

    def retrieve(self, diagnosis: str, *, platform: str, arch: str, budget_tokens: int = 1200):
        self.calls.append((diagnosis, platform, arch, budget_tokens))

        class R:
            text = "Mask the tail: offs < n, and keep BLOCK_SIZE a power of two."
            hits: list = []

        return R()


def _parent(
    status: str = "compile_error",
    fit: float = 0.0,
    diag: str = "status: compile_error\nerror:\nCompilationError: at 12:4: unsupported tensor index",
) -> Node:
    return Node(
        run_id="r",
        spec_key="s",
        operator="seed",
        source=SRC,
        status=status,
        fitness=fit,
        speedup=fit,
        diagnosis=diag,
    )


def _ctx(parents, **kw) -> OperatorContext:
    return OperatorContext(
        spec_path=str(SPEC),
        spec_source=SPEC.read_text(),
        spec_key="s",
        platform="cuda:sm_90",
        arch="sm_90",
        parents=parents,
        **kw,
    )


def test_template_is_versioned_package_data() -> None:
    system, user = load_template("universal_v1")
    assert "Triton" in system and "$reference_source" in user and "$memory_section" in user
    with pytest.raises(FileNotFoundError):
        load_template("universal_v999")


def test_prompt_assembles_reference_parent_diagnosis_knowledge_and_memory() -> None:
    best = Node(
        run_id="old",
        spec_key="s",
        operator="llm",
        source="# the best earlier kernel\n",
        status="passed",
        fitness=2.5,
    )
    fail = Node(
        run_id="old",
        spec_key="s",
        operator="llm",
        status="incorrect",
        error_class="incorrect",
        diagnosis="status: incorrect\nwrong output: max abs error 0.5",
    )
    retr = _Retriever()
    messages, text = PromptBuilder(retriever=retr).build(
        _ctx([_parent()], past_best=[best], past_failures=[fail])
    )
    assert [m["role"] for m in messages] == ["system", "user"]
    user = messages[1]["content"]
    assert "return a + b * self.scale" in user  # the spec's reference source
    assert "def add_scaled_kernel" in user  # the parent kernel
    assert (
        "unsupported tensor index" in user and "fails (compile_error)" in user
    )  # its diagnosis, a repair task
    assert "Mask the tail" in user  # retrieved knowledge
    assert retr.calls[0][1:] == ("cuda", "sm_90", 1200) and "unsupported tensor index" in retr.calls[0][0]
    assert "# the best earlier kernel" in user and "fitness 2.5" in user  # best past attempt from memory
    assert "- incorrect: wrong output: max abs error 0.5" in user  # distinct past failures
    assert "$" not in user.replace("$ ", "")  # every placeholder filled
    assert text.startswith("### system\n") and user in text


def test_prompt_without_retriever_and_for_speed_and_crossover() -> None:
    ok = _parent("passed", 1.7, "status: passed\ncorrect; speedup 1.700x")
    _, text = PromptBuilder(retriever=None).build(_ctx([ok]))
    assert "Relevant knowledge" not in text and "Make it faster" in text and "1.7x" in text
    other = _parent("passed", 1.2, "status: passed")
    _, text2 = PromptBuilder(retriever=None).build(_ctx([ok, other]))
    assert "Parent kernel A" in text2 and "Parent kernel B" in text2 and "combines their strengths" in text2
    _, draft = PromptBuilder(retriever=None).build(_ctx([]))
    assert "Write a first Triton implementation" in draft and "Parent kernel" not in draft


@pytest.mark.slow  # loads the embedding model
def test_real_retriever_when_installed() -> None:
    retrieval = pytest.importorskip("retrieval")
    try:
        r = retrieval.Retriever.default()
    except Exception as exc:  # no index built in this checkout
        pytest.skip(f"retrieval index unavailable: {exc}")
    _, text = PromptBuilder(retriever=r).build(_ctx([_parent()]))
    assert "## Relevant knowledge" in text


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _llm(url: str) -> dict:
    return {"base_url": url, "model": "stub", "max_retries": 0, "connect_retries": 0, "timeout_s": 30}


def test_llm_failures_become_nodes_and_good_code_is_evaluated(tmp_path: Path, cpu_evaluator) -> None:
    good = SRC.replace("BLOCK_SIZE = 16", "BLOCK_SIZE = 64")
    replies = [
        "Sure! I would make it faster by using bigger blocks.",  # no code at all
        "Here:\n```python\n" + good + "\n```\nBigger blocks, fewer programs.",
    ]
    with ChatServer(replies) as srv:
        run = workbench.optimize(
            SPEC,
            seeds=[FIX / "add_candidate.py"],
            llm="openai",
            llm_options=_llm(srv.url),
            offline_share=0.0,
            retrieval=False,
            budget=2,
            evaluator=cpu_evaluator,
            run_dir=tmp_path,
            progress=False,
            device="cpu",
            trials=1,
        )
    nodes = list(run.tree)
    assert [n.operator for n in nodes] == ["seed", "llm", "llm"]
    bad, ok = nodes[1], nodes[2]
    assert (
        bad.status == "generation_failed" and bad.error_class == "parse_error" and bad.response == replies[0]
    )
    assert ok.status == "passed" and ok.source.strip() == good.strip()
    for n in (bad, ok):  # each prompt saved with its node, tokens counted
        assert "## Reference implementation" in n.prompt and n.prompt_tokens == 100 and n.meta["template"]
    assert srv.requests[0]["messages"][1]["content"] in bad.prompt
    with Memory(tmp_path / "memory.sqlite") as mem:  # ... and in the memory
        stored = {n.id: n for n in mem.run_history(run.run_id)}
        assert stored[bad.id].response == replies[0] and stored[ok.id].prompt == ok.prompt
        assert mem.failures_by_class(run.spec_key) == {"parse_error": 1}
    assert run.stop.rule == "budget_evals"
    # every call is a file in the run folder, linked to its node and the node's verdict
    calls = load_calls(run.run_dir)
    assert [c.reply for c in calls] == replies and [c.node for c in calls] == [bad.id, ok.id]
    assert [c.outcome for c in calls] == ["failed", "candidate"] and calls[0].error_class == "parse_error"
    assert calls[0].verdict["status"] == "generation_failed" and calls[0].verdict["fitness"] is None
    assert calls[1].verdict["status"] == "passed" and calls[1].verdict["fitness"] == ok.fitness > 0
    assert calls[1].messages == srv.requests[1]["messages"] and calls[1].candidate.strip() == good.strip()
    assert ok.meta["provenance"]["call_file"] == f"llm_calls/{calls[1].call}.json"
    table = calls_table(run)  # a Run or its folder
    assert list(table["node"]) == [bad.id, ok.id] and list(table["status"]) == ["generation_failed", "passed"]
    assert table["prompt"][1] == ok.prompt and table["reply"][0] == replies[0]


def test_unreachable_endpoint_stops_with_one_reason_and_keeps_memory(tmp_path: Path) -> None:
    run = workbench.optimize(
        SPEC,
        llm="openai",
        llm_options=_llm(f"http://127.0.0.1:{_free_port()}/v1"),
        retrieval=False,
        budget=5,
        run_dir=tmp_path,
        progress=False,
        device="cpu",
    )
    assert run.stop.rule == "llm_unavailable" and "unreachable" in run.stop.message
    # the failed drafts are recorded nodes: one, or two when the second generation (the engine keeps
    # capacity + 1 in flight) was already under way when the first one stopped the search
    nodes = list(run.tree)
    assert 1 <= len(nodes) <= 2
    for node in nodes:
        assert node.error_class == "llm_unreachable" and node.operator == "llm-draft" and node.prompt
    with Memory(tmp_path / "memory.sqlite") as mem:
        assert mem.get_run(run.run_id).stop_rule == "llm_unavailable"
        assert all(mem.get_node(n.id).error_class == "llm_unreachable" for n in nodes)


def test_bad_key_is_fatal(tmp_path: Path) -> None:
    with ChatServer(["unused"], status=401) as srv:
        run = workbench.optimize(
            SPEC,
            llm="openai",
            llm_options=_llm(srv.url),
            retrieval=False,
            budget=5,
            run_dir=tmp_path,
            progress=False,
            device="cpu",
        )
    assert run.stop.rule == "llm_unavailable" and run.tree.evaluated()[0].error_class == "llm_auth"
