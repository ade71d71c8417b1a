"""PFFN with shape-aware dispatch: the fused Triton kernel where the recorded H200 benchmark
(`results/case_studies/pffn/bench.csv`) shows it beating PyTorch in the launch mode of the call (graph
replay while a CUDA graph is being captured, plain launches otherwise), PyTorch elsewhere."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from case_studies.common.dispatch import CachedDecisions, Decision, ShapeDispatcher
from case_studies.pffn.reference import EPS, pffn_reference

# The recorded rows it decides from, shipped with the package (tools/dispatch_tables.py writes them from
# results/case_studies/pffn/bench.csv), so an installed case study keeps its dispatch.
DISPATCH_CSV = Path(__file__).with_name("dispatch.csv")
SUPPORTED_DTYPES = ("float16", "bfloat16", "float32")


class PFFNDispatcher(ShapeDispatcher):
    key_params = ("N", "B", "D", "K")
    exact_params = ("K",)
    kernel_contender = "triton"
    baseline_contender = "eager"

    def supports(self, params: dict[str, Any], dtype: str) -> bool:
        # the [BLOCK_B, K] activation tile lives in registers
        return dtype in SUPPORTED_DTYPES and params["K"] <= 256


_cache = CachedDecisions(lambda: PFFNDispatcher(DISPATCH_CSV))


def dispatcher() -> PFFNDispatcher:
    return _cache.dispatcher  # type: ignore[return-value]


def decide(x: torch.Tensor, w1: torch.Tensor) -> Decision:
    key = (tuple(x.shape), tuple(w1.shape))
    return _cache.decide(x, key, lambda: {"N": x.shape[0], "B": x.shape[1], "D": x.shape[2], "K": w1.shape[2]})


_kernel_fn = None     # imported on the first kernel call (importing Triton is not free)


def pffn(x: torch.Tensor, w1: torch.Tensor, w2: torch.Tensor, g1: torch.Tensor, g2: torch.Tensor,
         eps: float = EPS) -> torch.Tensor:
    """The PFFN chain; the fused kernel only where it was measured to win."""
    global _kernel_fn
    if decide(x, w1).use_kernel:
        if _kernel_fn is None:
            from case_studies.pffn.kernel import triton_pffn as _kernel_fn
        return _kernel_fn(x, w1, w2, g1, g2, eps)
    return pffn_reference(x, w1, w2, g1, g2, eps)
