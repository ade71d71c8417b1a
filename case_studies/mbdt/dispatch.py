"""MergeBucketizedDense with shape-aware dispatch: the Triton kernel where the recorded H200 benchmark
(`results/case_studies/mbdt/bench.csv`) shows it beating the vectorized `torch.searchsorted`
formulation in every launch mode recorded for the nearest (batch, features, borders); the vectorized
formulation elsewhere (it beats the paper's per-feature loop on every recorded shape, so the fallback
is never slower than the baseline either).
"""
from __future__ import annotations

from pathlib import Path

import torch

from case_studies.common.dispatch import Decision, ShapeDispatcher
from case_studies.mbdt.reference import MergeBucketizedDenseVectorized

# The recorded rows it decides from, shipped with the package (tools/dispatch_tables.py writes them from
# results/case_studies/mbdt/bench.csv), so an installed case study keeps its dispatch.
DISPATCH_CSV = Path(__file__).with_name("dispatch.csv")


class MBDTDispatcher(ShapeDispatcher):
    key_params = ("BATCH", "FEATURES", "BORDERS")
    kernel_contender = "triton"
    baseline_contender = "vectorized_eager"


class MBDTDispatch(torch.nn.Module):
    """`reference.MergeBucketizedDense`'s constructor and forward; routes each call by its recorded
    decision."""

    def __init__(self, borders: torch.Tensor, border_lengths: torch.Tensor | list[int],
                 results_csv: str | Path | None = None):
        super().__init__()
        from case_studies.mbdt.kernel import ModelNew

        self.lengths = [int(n) for n in border_lengths]
        self.pytorch = MergeBucketizedDenseVectorized(borders, self.lengths)
        self.kernel = ModelNew(borders, self.lengths)
        self.dispatcher = MBDTDispatcher(results_csv or DISPATCH_CSV)
        self.decisions: dict[tuple, Decision] = {}

    def decide(self, x: torch.Tensor) -> Decision:
        key = (tuple(x.shape), x.device.type)
        d = self.decisions.get(key)
        if d is None:
            if not x.is_cuda or x.dtype != torch.float32:
                d = Decision(False, "not a CUDA float32 tensor")
            else:
                d = self.dispatcher.decide({"BATCH": x.shape[0], "FEATURES": x.shape[1],
                                            "BORDERS": max(self.lengths, default=0)}, "float32")
            self.decisions[key] = d
        return d

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.kernel(x) if self.decide(x).use_kernel else self.pytorch(x)
