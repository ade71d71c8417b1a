"""Code samples keyed by the spec's aten ops (retrieval.samples + workbench's op capture): a prompt
shows a kernel for the same ops, or none; never a kernel for another op."""

from __future__ import annotations

from pathlib import Path

import pytest

from retrieval.samples import CodeSample, OpSampleIndex, op_overlap
from workbench.llm.prompt import PromptBuilder
from workbench.llm.spec_ops import compute_ops, spec_ops
from workbench.search.node import Node
from workbench.search.operators import OperatorContext

ROOT = Path(__file__).resolve().parents[2]
KB1 = Path("/work/shared/kernelbench/level1")


def test_overlap() -> None:
    assert op_overlap(["a", "b"], ["a", "b"]) == 1.0
    assert op_overlap(["a", "b"], ["a"]) == 0.5
    assert op_overlap([], []) == 0.0


SOFTMAX = spec_ops(ROOT / "examples/row_softmax/spec.py")  # the lowering's core-ATen form, or aten._softmax


def test_spec_ops_drop_glue_and_need_no_real_inputs() -> None:
    assert spec_ops(ROOT / "examples/vector_add/spec.py") == ("aten.add.Tensor", "aten.mul.Tensor")
    assert "aten.exp.default" in SOFTMAX or SOFTMAX == ("aten._softmax.default",)
    assert compute_ops(["aten.view.default", "aten.mm.default", "prim.device.default"]) == ("aten.mm.default",)


@pytest.fixture(scope="module")
def index() -> OpSampleIndex:
    # the examples only: each case-study spec costs a torch.export of its own (seconds on a busy CPU)
    return OpSampleIndex(spec_ops, globs=("examples/*/candidate.py",))


def test_the_repository_kernels_are_keyed_by_their_specs_ops(index: OpSampleIndex) -> None:
    by_path = {s.path: s.ops for s in index.samples()}
    assert by_path["examples/row_softmax/candidate.py"] == set(SOFTMAX)
    assert by_path["examples/matmul/candidate.py"] == {"aten.mm.default", "aten.add.Tensor", "aten.relu.default"}


def test_match_same_ops_only_and_never_the_spec_itself(index: OpSampleIndex) -> None:
    found = index.match(SOFTMAX)
    assert [(score, s.path) for score, s in found] == [(1.0, "examples/row_softmax/candidate.py")]
    own = ROOT / "examples/row_softmax/spec.py"
    assert index.match(SOFTMAX, exclude_specs=[own]) == []
    # relu alone shares one op with the matmul example (mm + add + relu): not offered as the answer
    assert index.match(["aten.relu.default"]) == []
    assert index.match(["aten.relu.default"], min_overlap=0.3)[0][1].path == "examples/matmul/candidate.py"


def test_passing_kernels_of_earlier_runs_join_the_samples(index: OpSampleIndex) -> None:
    past = CodeSample("memory:run1/n1", "# a relu kernel from an earlier run\n", frozenset({"aten.relu.default"}),
                      spec="/somewhere/relu_spec.py", fitness=1.8)  # fmt: skip
    found = index.match(["aten.relu.default"], extra=[past])
    assert [s.path for _, s in found] == ["memory:run1/n1"]


def _ctx(spec: Path, related=()) -> OperatorContext:
    overrides = {"batch_size": 4, "dim": 33} if spec.parent == KB1 else {}
    return OperatorContext(spec_path=str(spec), spec_source=spec.read_text(), spec_key="k", platform="cpu",
                           arch="cpu-interpreter", overrides=overrides, related=list(related))  # fmt: skip


@pytest.mark.skipif(not KB1.is_dir(), reason="KernelBench is not at /work/shared/kernelbench")
def test_prompt_shows_a_same_op_sample_and_nothing_for_an_unmatched_op(index: OpSampleIndex, tmp_path: Path) -> None:
    builder = PromptBuilder(retriever=None, op_samples=index)
    softmax = builder.assemble(_ctx(KB1 / "23_Softmax.py"))
    assert f"## Code sample: a correct kernel for the same ops ({', '.join(SOFTMAX)})" in softmax.text
    assert "From examples/row_softmax/candidate.py." in softmax.text
    assert softmax.info["samples"] == [{"path": "examples/row_softmax/candidate.py", "overlap": 1.0}]
    relu = builder.assemble(_ctx(KB1 / "19_ReLU.py"))
    assert "## Code sample" not in relu.text and relu.info["samples"] == []
    assert relu.info["spec_ops"] == ["aten.relu.default"]
    # a passing relu kernel of an earlier run (another spec with the same ops) is offered
    other = Node(run_id="old", spec_key="relu@1", operator="llm", source="# earlier relu kernel\n", status="passed",
                 fitness=2.0)  # fmt: skip
    relu_spec = tmp_path / "my_relu.py"
    relu_spec.write_text(
        "import torch\nimport torch.nn as nn\n\n\nclass Model(nn.Module):\n    def forward(self, x):\n"
        "        return torch.relu(x)\n\n\ndef get_inputs():\n    return [torch.randn(8, 8)]\n\n\n"
        "def get_init_inputs():\n    return []\n"
    )
    with_memory = builder.assemble(_ctx(KB1 / "19_ReLU.py", related=[(str(relu_spec), other)]))
    assert "# earlier relu kernel" in with_memory.text and "speedup 2x" in with_memory.text


def test_similarity_code_samples_are_left_out_of_the_knowledge_when_op_keyed(index: OpSampleIndex) -> None:
    class Hit:
        def __init__(self, level: str, text: str) -> None:
            self.level, self.text = level, text

        def render(self) -> str:
            return self.text

    class Retriever:
        def retrieve(self, diagnosis, *, platform, arch, budget_tokens):
            class R:
                hits = [Hit("general", "Mask the tail."), Hit("code_sample", "def some_other_op_kernel(): ...")]
                text = "Mask the tail.\ndef some_other_op_kernel(): ..."

            return R()

    ctx = _ctx(ROOT / "examples/vector_add/spec.py")
    keyed = PromptBuilder(retriever=Retriever(), op_samples=index).assemble(ctx)
    assert "Mask the tail." in keyed.text and "some_other_op_kernel" not in keyed.text
    plain = PromptBuilder(retriever=Retriever(), op_samples=None).assemble(ctx)
    assert "some_other_op_kernel" in plain.text
