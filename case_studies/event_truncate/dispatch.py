"""Batch Event Truncate with shape-aware dispatch: the two-launch Triton path where the recorded H200
benchmark (`results/case_studies/event_truncate/bench.csv`) shows it beating the vectorized
all-features formulation for the nearest (features, batch, T); the vectorized formulation elsewhere
(it beats the paper's per-feature loop on every recorded shape). Both return exact-size outputs and
synchronize with the host, so they are compared as plain launches.
"""
from __future__ import annotations

from pathlib import Path

import torch

from case_studies.common.dispatch import Decision, ShapeDispatcher
from case_studies.event_truncate.reference import BatchEventTruncateVectorized

# The recorded rows it decides from, shipped with the package (tools/dispatch_tables.py writes them from
# results/case_studies/event_truncate/bench.csv), so an installed case study keeps its dispatch.
DISPATCH_CSV = Path(__file__).with_name("dispatch.csv")


class EventTruncateDispatcher(ShapeDispatcher):
    key_params = ("NUM_FEATURES", "BATCH", "MAX_LEN")
    kernel_contender = "triton_exact"
    baseline_contender = "vectorized_eager"
    modes = ("plain",)


class BatchEventTruncateDispatch(torch.nn.Module):
    """`reference.BatchEventTruncate`'s constructor and forward; routes each call by its recorded decision."""

    def __init__(self, max_len: int, num_features: int, results_csv: str | Path | None = None):
        super().__init__()
        from case_studies.event_truncate.kernel import ModelNew

        self.pytorch = BatchEventTruncateVectorized(max_len, num_features)
        self.kernel = ModelNew(max_len, num_features)
        self.dispatcher = EventTruncateDispatcher(results_csv or DISPATCH_CSV)
        self.decisions: dict[tuple, Decision] = {}

    def decide(self, offsets: torch.Tensor) -> Decision:
        key = (offsets.numel(), offsets.device.type)
        d = self.decisions.get(key)
        if d is None:
            if not offsets.is_cuda:
                d = Decision(False, "not a CUDA tensor")
            else:
                f = self.kernel.num_features
                d = self.dispatcher.decide({"NUM_FEATURES": f, "BATCH": (offsets.numel() - 1) // f,
                                            "MAX_LEN": self.kernel.max_len}, "int64")
            self.decisions[key] = d
        return d

    def forward(self, values: torch.Tensor, offsets: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        mod = self.kernel if self.decide(offsets).use_kernel else self.pytorch
        return mod(values, offsets)
