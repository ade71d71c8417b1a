"""The LLM step inside a real search (scripted OpenAI endpoint, real harness on CPU): proposals the
pre-harness checks reject are recorded nodes that spend no evaluation and have their own budget;
best-of-n records every reply; a passing kernel of an earlier run reaches another spec's prompt."""

from __future__ import annotations

from pathlib import Path

import workbench
from tests.search.chat_server import ChatServer
from workbench.llm.transcript import load_calls
from workbench.memory import Memory

FIX = Path(__file__).parent / "fixtures"
SPEC = FIX / "add_spec.py"
SRC = (FIX / "add_candidate.py").read_text()

# a real 0.5B reply shape: @triton.jit on forward, the forward computing in torch, no kernel
JIT_FORWARD = """```python
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, scale: float) -> None:
        super().__init__()
        self.scale = scale

    @triton.jit
    def forward(self, a, b):
        return a + b * self.scale
```
"""
BAD_EDIT = "<<<<<<< SEARCH\nBLOCK_SIZE = 99\n=======\nBLOCK_SIZE = 64\n>>>>>>> REPLACE\n"
RNG_TUNABLES = 4  # random.Random(4).getrandbits(32) % 3 == 0
GOOD_EDIT = "Bigger blocks:\n<<<<<<< SEARCH\nBLOCK_SIZE = 16\n=======\nBLOCK_SIZE = 64\n>>>>>>> REPLACE\n"


def _llm(url: str) -> dict:
    return {"base_url": url, "model": "stub", "max_retries": 0, "connect_retries": 0, "timeout_s": 30}


def _search(srv: ChatServer, tmp_path: Path, cpu_evaluator, **kw):
    spec = kw.pop("spec", SPEC)
    args = dict(seeds=[FIX / "add_candidate.py"], llm="openai", llm_options=_llm(srv.url), offline_share=0.0,
                retrieval=False, budget=1, evaluator=cpu_evaluator, run_dir=tmp_path, progress=False, device="cpu",
                trials=1)  # fmt: skip
    args.update(kw)
    return workbench.optimize(spec, **args)


def test_rejected_proposals_are_recorded_and_spend_no_evaluation(tmp_path: Path, cpu_evaluator) -> None:
    with ChatServer([JIT_FORWARD, BAD_EDIT, GOOD_EDIT]) as srv:
        run = _search(srv, tmp_path, cpu_evaluator, llm_step={"samples": "off", "edits": "search_replace"})
    nodes = list(run.tree)
    assert [n.operator for n in nodes] == ["seed", "llm", "llm", "llm"]
    jit, bad, good = nodes[1:]
    assert jit.status == "generation_failed" and jit.error_class == "precheck" and jit.meta["rejected"]
    assert "precheck:no_triton_launch" in jit.diagnosis and jit.source is not None  # kept for audit
    assert "repaired: removed @triton.jit from the method ModelNew.forward (host code)" in jit.meta["repairs"]
    assert bad.error_class == "edit_not_applied" and "SEARCH text not found" in bad.diagnosis
    assert good.status == "passed", good.diagnosis
    assert "BLOCK_SIZE = 64" in good.source and good.meta["form"] == "edits"
    assert "<<<<<<< SEARCH" in srv.requests[0]["messages"][1]["content"]  # a passing parent: edits asked for
    assert run.stop.rule == "budget_evals"  # budget 1 = the one evaluated proposal; rejections are apart
    with Memory(tmp_path / "memory.sqlite") as mem:
        assert mem.failures_by_class(run.spec_key) == {"precheck": 1, "edit_not_applied": 1}


def test_rejection_budget_stops_a_model_that_never_passes_the_checks(tmp_path: Path, cpu_evaluator) -> None:
    with ChatServer([JIT_FORWARD]) as srv:
        run = _search(srv, tmp_path, cpu_evaluator, budget=5, max_rejected=3, llm_step={"samples": "off"})
    assert run.stop.rule == "budget_rejected"
    rejected = [n for n in run.tree if n.meta.get("rejected")]
    assert len(rejected) == 3 and all(n.error_class == "precheck" for n in rejected)
    assert sum(1 for n in run.tree if n.result is not None) == 1  # only the seed was evaluated


def test_best_of_n_records_every_reply_with_its_scheduled_temperature(tmp_path: Path, cpu_evaluator) -> None:
    with ChatServer([JIT_FORWARD, BAD_EDIT, GOOD_EDIT]) as srv:
        run = _search(srv, tmp_path, cpu_evaluator,
                      llm_step={"samples": "off", "best_of": 3, "temperatures": [0.1, 0.9]})  # fmt: skip
    assert "Change only this part of the parent kernel" in srv.requests[0]["messages"][1]["content"]
    assert [r["temperature"] for r in srv.requests] == [0.1, 0.9, 0.1]
    kids = [n for n in run.tree if n.operator != "seed"]
    assert [n.meta["sample"] for n in kids] == [0, 1, 2]
    assert [n.error_class for n in kids] == ["precheck", "edit_not_applied", None]
    assert kids[2].status == "passed" and len(srv.requests) == 3
    # each reply is a saved call linked to its node: the rejected ones with their reason, the evaluated
    # one with the harness's verdict
    calls = load_calls(run.run_dir)
    assert [c.node for c in calls] == [n.id for n in kids] and [c.temperature for c in calls] == [0.1, 0.9, 0.1]
    assert [c.outcome for c in calls] == ["rejected", "rejected", "candidate"]
    assert [c.verdict["status"] for c in calls] == ["generation_failed", "generation_failed", "passed"]
    assert [c.verdict["error_class"] for c in calls] == ["precheck", "edit_not_applied", None]
    assert [n.meta["provenance"]["sample"] for n in kids] == [0, 1, 2]
    assert all(n.meta["provenance"]["model"] == "stub" for n in kids)


def test_a_passing_kernel_of_an_earlier_run_is_offered_to_a_spec_with_the_same_ops(
    tmp_path: Path, cpu_evaluator
) -> None:
    region_reply = "```python\nTUNABLES = {\"BLOCK_SIZE\": [16, 32, 64, 128], \"NUM_WARPS\": [1, 2]}\n" \
        "BLOCK_SIZE = 64\nNUM_WARPS = 1\n```\n"
    with ChatServer([region_reply]) as srv:
        # the engine's first proposal seed is random.Random(rng_seed).getrandbits(32): RNG_TUNABLES makes
        # it pick region 0 of the parent's three (tunables, kernel, forward)
        first = _search(srv, tmp_path, cpu_evaluator, budget=1, rng_seed=RNG_TUNABLES, llm_step={"samples": "off"})
    assert "(the tunable constants)" in srv.requests[0]["messages"][1]["content"]
    assert first.best.meta["form"] == "region", first.best.diagnosis
    assert first.best is not None and first.best.operator == "llm"
    other = tmp_path / "other_add.py"  # the same ops (add, mul) at another size: another spec key
    other.write_text(SPEC.read_text().replace("N = 127", "N = 255"))
    with ChatServer([JIT_FORWARD]) as srv:
        run = _search(srv, tmp_path, cpu_evaluator, spec=other, seeds=[], budget=1, max_rejected=1)
    prompt = srv.requests[0]["messages"][1]["content"]
    assert "## Code sample: a correct kernel for the same ops (aten.add.Tensor, aten.mul.Tensor)" in prompt
    assert f"From memory:{first.run_id}/{first.best.id}" in prompt and "BLOCK_SIZE = 64" in prompt
    assert run.stop.rule == "budget_rejected"
