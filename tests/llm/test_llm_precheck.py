"""Pre-harness checks (workbench.llm.precheck): each check on a small module and on real replies
recorded from the local models; a clean candidate passes them all."""

from __future__ import annotations

from pathlib import Path

from workbench.llm.parse import extract_code
from workbench.llm.precheck import precheck, same_program
from workbench.llm.repair import repair_source

ROOT = Path(__file__).resolve().parents[2]
REPLIES = Path(__file__).parent / "fixtures" / "replies"
SPEC = (ROOT / "examples/vector_add/spec.py").read_text()
GOOD = (ROOT / "examples/vector_add/candidate.py").read_text()


def _kinds(problems: list[str]) -> list[str]:
    return [p.split(":")[0] + ":" + p.split(":")[1] for p in problems]


def test_a_correct_candidate_passes_every_check() -> None:
    assert precheck(GOOD, spec_source=SPEC) == []
    assert precheck(GOOD, spec_source=SPEC, parent_source=GOOD.replace("BLOCK_SIZE = 64", "BLOCK_SIZE = 128")) == []


def test_syntax_error_is_one_diagnosis() -> None:
    assert precheck("def f(:\n", spec_source=SPEC) == ["precheck:syntax: line 1: invalid syntax"]


def test_missing_model_new_and_missing_launch() -> None:
    src = "import triton\nimport triton.language as tl\n\n\n@triton.jit\ndef k(x_ptr):\n    pass\n"
    assert _kinds(precheck(src, spec_source=SPEC)) == ["precheck:no_model_new", "precheck:no_triton_launch"]
    assert "k are never launched" in precheck(src, spec_source=SPEC)[1]


def test_constructor_and_forward_signatures_follow_model() -> None:
    wrong_init = GOOD.replace("def __init__(self, scale: float) -> None:", "def __init__(self) -> None:").replace(
        "self.scale = scale", "self.scale = 0.5"
    )
    assert precheck(wrong_init, spec_source=SPEC) == [
        "precheck:signature: ModelNew.__init__ takes [], Model.__init__ takes ['scale']"
    ]
    wrong_fwd = GOOD.replace("def forward(self, a: torch.Tensor, b: torch.Tensor)", "def forward(self, a)")
    assert _kinds(precheck(wrong_fwd, spec_source=SPEC)) == ["precheck:signature"]
    star = GOOD.replace("def forward(self, a: torch.Tensor, b: torch.Tensor)", "def forward(self, *args)")
    assert "precheck:signature" not in " ".join(precheck(star, spec_source=SPEC))


def test_torch_compute_in_forward_uses_the_harness_policy() -> None:
    src = GOOD.replace("        return out\n", "        return torch.matmul(out, out)\n")
    problems = precheck(src, spec_source=SPEC)
    assert problems and all(p.startswith("forbidden_torch_op:") for p in problems)
    assert "torch.matmul" in problems[0]


def test_identical_to_parent_modulo_comments_layout_and_docstrings() -> None:
    same = "# a new comment\n" + GOOD.replace('"""Triton candidate', '"""Faster candidate').replace(
        "    pid = tl.program_id(0)\n", "    pid = tl.program_id(0)  # which block\n\n"
    )
    assert same_program(same, GOOD)
    assert precheck(same, spec_source=SPEC, parent_source=GOOD)[-1].startswith("precheck:identical_to_parent")
    assert not same_program(GOOD.replace("BLOCK_SIZE = 64", "BLOCK_SIZE = 256"), GOOD)


def test_real_0_5b_draft_is_rejected_for_the_reasons_issue_19_saw() -> None:
    """@triton.jit on forward, forward computing in torch, no kernel at all."""
    code = extract_code((REPLIES / "code05b_vector_add_draft.txt").read_text()).code
    raw = precheck(code, spec_source=SPEC)
    assert "precheck:no_triton_launch: no top-level @triton.jit kernel is defined" in raw
    assert any(p.startswith("forbidden_torch_op:randn") for p in raw)  # the copied get_inputs
    fixed = precheck(repair_source(code).source, spec_source=SPEC)
    assert fixed == ["precheck:no_triton_launch: no top-level @triton.jit kernel is defined"]


def test_real_smollm2_draft_wrong_constructor() -> None:
    code = repair_source(extract_code((REPLIES / "smollm2_vector_add_draft_kb.txt").read_text()).code).source
    kinds = _kinds(precheck(code, spec_source=SPEC))
    # its forward(self, a) reads a `b` nothing binds: the harness's policy refuses unbound names too
    assert kinds == ["import:unbound name b [policy]", "precheck:signature", "precheck:no_triton_launch"]
