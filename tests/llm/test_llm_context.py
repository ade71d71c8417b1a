"""The prompt is kept within the model's context window: the window comes from the configuration or
the server's /models, the builder drops sections and clips the reference to fit, and the LLM step
records what it did (`meta["prompt"]`) and learns the server's characters per token."""

from __future__ import annotations

from pathlib import Path

from llm_stub_server import Reply, completion

from workbench.llm import get_provider
from workbench.llm.prompt import PromptBuilder
from workbench.llm.settings import LLMSettings
from workbench.search.node import Node
from workbench.search.operators import LLMOperator, OperatorContext, Signal

ROOT = Path(__file__).resolve().parents[2]
SPEC = ROOT / "examples/vector_add/spec.py"
PARENT = (ROOT / "examples/vector_add/candidate.py").read_text()


def _provider(url: str, **kw):
    return get_provider("openai", base_url=url, model="stub-model", api_key="sk-test", max_retries=0,
                        connect_retries=0, **kw)  # fmt: skip


def test_window_from_config_then_from_models(stub) -> None:
    assert _provider(stub.url, context_window=2048).context_window() == 2048
    assert stub.requests == []  # configured: the server is not asked
    stub.set(Reply(body={"object": "list", "data": [{"id": "stub-model", "max_model_len": 32768}]}))
    assert _provider(stub.url).context_window() == 32768  # vLLM
    stub.set(Reply(body={"object": "list", "data": [{"id": "stub-model", "meta": {"n_ctx": 8192}}]}))
    assert _provider(stub.url).context_window() == 8192  # llama.cpp's own server
    stub.set(Reply(body={"object": "list", "data": [{"id": "stub-model", "object": "model"}]}))
    assert _provider(stub.url).context_window() is None  # llama-cpp-python: not reported


class _Knowledge:
    def retrieve(self, diagnosis, *, platform, arch, budget_tokens):
        class R:
            text = "A long section of knowledge. " * 200
            hits: list = []

        return R()


def _ctx(parents=()) -> OperatorContext:
    best = Node(run_id="old", spec_key="s", operator="llm", source="# best " * 300, status="passed", fitness=2.0)
    return OperatorContext(spec_path=str(SPEC), spec_source=SPEC.read_text(), spec_key="s", platform="cpu",
                           arch="cpu-interpreter", parents=list(parents), past_best=[best])  # fmt: skip


def test_sections_are_dropped_in_order_until_the_prompt_fits() -> None:
    builder = PromptBuilder(retriever=_Knowledge(), op_samples=None)
    ctx = _ctx()
    full = builder.assemble(ctx)
    assert "A long section of knowledge" in full.text and "# best" in full.text
    roomy = builder.assemble(ctx, budget_tokens=full.info["prompt_tokens_est"] + 10)
    assert roomy.text == full.text and roomy.info["fits"] and "dropped" not in roomy.info
    tight = builder.assemble(ctx, budget_tokens=1500)
    assert tight.info["dropped"] == ["knowledge"] and tight.info["fits"]
    assert "A long section of knowledge" not in tight.text and "# best" in tight.text
    tiny = builder.assemble(ctx, budget_tokens=200)
    assert tiny.info["dropped"][:2] == ["knowledge", "memory"] and "reference clipped" in tiny.info["dropped"]
    assert "more characters cut" in tiny.text and "class Model" in tiny.text  # the reference's head stays


def test_the_operator_fits_its_prompt_and_records_the_sizes(stub) -> None:
    reply = "```python\n" + PARENT.replace("BLOCK_SIZE = 64", "BLOCK_SIZE = 256") + "```"
    stub.set(Reply(body=completion(reply, prompt_tokens=700, completion_tokens=300)))
    op = LLMOperator(_provider(stub.url), LLMSettings(context_window=1800, edits="off", max_new_tokens=512),
                     prompts=PromptBuilder(retriever=_Knowledge(), op_samples=None))  # fmt: skip
    parent = Node(run_id="r", spec_key="s", operator="seed", source=PARENT, status="passed", fitness=1.0,
                  speedup=1.0)  # fmt: skip
    prop = op.propose(_ctx([parent]))
    info = prop.meta["prompt"]
    assert prop.source is not None and prop.signal is Signal.CANDIDATE
    assert info["context_window"] == 1800 and info["budget_tokens"] == 1800 - 512 - 48
    assert "knowledge" in info["dropped"] and info["prompt_tokens_est"] <= info["budget_tokens"]
    assert stub.requests[-1].body["max_tokens"] == 512
    # the server counted 700 tokens for this prompt: the next estimate uses its ratio if it is lower
    assert op.step._chars_per_token == min(3.0, info["prompt_chars"] / 700)
