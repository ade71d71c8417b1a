"""Large models: capture traces only the batch dimension dynamic above ALL_DIMS_MAX_MODULES modules
(symbolic sizes were most of DenseNet201's 63 s), and kernels that differ only in their docstring are one
kernel (DenseNet201's 416 kernels were 14 texts: one GPU compile each, its first call past 45 s)."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.lowering.helpers import check_candidate, lowers_within_a_minute
from workbench.lowering import lower_spec
from workbench.lowering.capture import ALL_DIMS_MAX_MODULES, capture, spec_module

SPECS = Path(__file__).parent / "specs"
KB3 = Path(__file__).resolve().parents[3] / "shared" / "kernelbench" / "level3"


def _kernels(source: str) -> int:
    return source.count("@triton.jit\ndef ")


def test_a_large_model_traces_the_batch_dimension_only() -> None:
    mod = spec_module(SPECS / "deep_stack.py", None)
    assert sum(1 for _ in mod.Model(*mod.get_init_inputs()).modules()) > ALL_DIMS_MAX_MODULES
    assert capture(mod).dynamic_dims == "batch"
    small = spec_module(SPECS / "kb_linear_relu.py", None)
    assert capture(small).dynamic_dims == "all"


def test_a_large_model_is_correct_at_its_size_and_at_another_batch(tmp_path: Path) -> None:
    res = lower_spec(SPECS / "deep_stack.py")
    assert res.source is not None, res.diagnosis
    check_candidate(SPECS / "deep_stack.py", res.source, tmp_path, seed=3)
    other = tmp_path / "deep_stack_b3.py"  # the same spec at batch 9: the draft reads the batch at run time
    other.write_text((SPECS / "deep_stack.py").read_text().replace("batch_size = 16", "batch_size = 9"))
    check_candidate(other, res.source, tmp_path, seed=4)


def test_kernels_that_differ_only_in_their_docstring_are_emitted_once() -> None:
    res = lower_spec(SPECS / "deep_stack.py")
    assert res.source is not None, res.diagnosis
    # 8 blocks, each a GEMM, the batch statistics and one normalize+ReLU chain: one text per kind
    assert _kernels(res.source) <= 8, _kernels(res.source)
    launches = len(re.findall(r"_kernel_\d+\[", res.source))
    assert launches >= 8 * 3, launches


@pytest.mark.skipif(not KB3.is_dir(), reason="KernelBench level 3 is not beside this checkout")
def test_published_size_densenet201_lowers_within_a_minute() -> None:
    res = lowers_within_a_minute(KB3 / "16_DenseNet201.py")
    assert _kernels(res.source) <= 32, _kernels(res.source)
