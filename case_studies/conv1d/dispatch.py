"""conv1d with shape-aware dispatch: the Triton kernel where the recorded H200 benchmark
(`results/case_studies/conv1d/bench.csv`) shows it beating `F.conv1d` in the launch mode of the call
(graph replay while a CUDA graph is being captured, plain launches otherwise), `F.conv1d` everywhere else
(CPU tensors, unsupported dtypes, shapes far from anything measured, shapes it loses).
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F

from case_studies.common.dispatch import CachedDecisions, Decision, ShapeDispatcher

# The recorded rows it decides from, shipped with the package (tools/dispatch_tables.py writes them from
# results/case_studies/conv1d/bench.csv), so an installed case study keeps its dispatch.
DISPATCH_CSV = Path(__file__).with_name("dispatch.csv")
SUPPORTED_DTYPES = ("float16", "bfloat16", "float32")


class Conv1dDispatcher(ShapeDispatcher):
    key_params = ("B", "C_in", "C_out", "L", "K", "stride", "padding")
    exact_params = ("K", "stride", "padding")
    kernel_contender = "triton"
    baseline_contender = "eager"

    def supports(self, params: dict[str, Any], dtype: str) -> bool:
        return dtype in SUPPORTED_DTYPES and params.get("groups", 1) == 1 and params.get("dilation", 1) == 1


_cache = CachedDecisions(lambda: Conv1dDispatcher(DISPATCH_CSV))


def dispatcher() -> Conv1dDispatcher:
    return _cache.dispatcher  # type: ignore[return-value]


def decide(x: torch.Tensor, weight: torch.Tensor, stride: int = 1, padding: int = 0) -> Decision:
    key = (tuple(x.shape), tuple(weight.shape), stride, padding)
    return _cache.decide(x, key, lambda: {"B": x.shape[0], "C_in": x.shape[1], "L": x.shape[2],
                                          "C_out": weight.shape[0], "K": weight.shape[2], "stride": stride,
                                          "padding": padding})


def conv1d(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None, stride: int = 1,
           padding: int = 0) -> torch.Tensor:
    """`F.conv1d` semantics (groups 1, dilation 1); the Triton kernel only where it was measured to win."""
    if decide(x, weight, stride, padding).use_kernel:
        from case_studies.conv1d.kernel import triton_conv1d

        return triton_conv1d(x, weight, bias, stride, padding)
    return F.conv1d(x, weight, bias, stride=stride, padding=padding)
