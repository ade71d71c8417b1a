"""Lowering: a correct Triton candidate for a PyTorch spec without an LLM (docs/lowering.md).

`lower_spec(spec_path, overrides)` captures `Model.forward` into core ATen on fake tensors,
fuses pointwise chains (and the epilogues of reductions and matmuls) into kernels, maps every
other op onto a primitive, and emits one standalone candidate module.
"""
from typing import TYPE_CHECKING

from platforms.lazy import lazy_exports

if TYPE_CHECKING:
    from workbench.lowering.lower import LoweringResult, lower_spec

# imported on first use: `workbench.lowering.cli` (every command line's start) needs no torch
__getattr__, __dir__ = lazy_exports(__name__, {"LoweringResult": "workbench.lowering.lower",
                                               "lower_spec": "workbench.lowering.lower"})
__all__ = ["LoweringResult", "lower_spec"]
