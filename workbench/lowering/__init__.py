"""Lowering: a correct Triton candidate for a PyTorch spec without an LLM (docs/lowering.md).

`lower_spec(spec_path, overrides)` captures `Model.forward` into core ATen on fake tensors,
fuses pointwise chains (and the epilogues of reductions and matmuls) into kernels, maps every
other op onto a primitive, and emits one standalone candidate module.
"""
from workbench.lowering.lower import LoweringResult, lower_spec

__all__ = ["LoweringResult", "lower_spec"]
