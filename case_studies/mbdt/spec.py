"""KernelBench spec: MergeBucketizedDense (paper section 5.4.2), `[B, F]` float32 -> `[B, F]` int64.

`Model` is the paper's baseline (`reference.MergeBucketizedDense`, a bucketize loop over features).
Shapes are named Batch x Features x Borders as in the paper's Figure 17; borders are ragged (every
fourth feature has half the borders) and quantized, so duplicated borders occur. With `SPECIALS`
the input holds NaN, +inf, -inf and -0.0 at fixed positions.
"""
from __future__ import annotations

import torch

from case_studies.mbdt.reference import MergeBucketizedDense

# The case-study kernel imports its own package's helpers (the harness's static policy allows these).
ALLOWED_IMPORTS = ["case_studies"]

BATCH = 37
FEATURES = 5
BORDERS = 6
SPECIALS = True

SHAPES = {
    "production": {"BATCH": 2048, "FEATURES": 64, "BORDERS": 16, "SPECIALS": False},
    "paper_64x2x2": {"BATCH": 64, "FEATURES": 2, "BORDERS": 2, "SPECIALS": False},
    "paper_2048x2x4": {"BATCH": 2048, "FEATURES": 2, "BORDERS": 4, "SPECIALS": False},
    "large_8192x256x32": {"BATCH": 8192, "FEATURES": 256, "BORDERS": 32, "SPECIALS": False},
    "edge_odd": {"BATCH": 123, "FEATURES": 7, "BORDERS": 5, "SPECIALS": True},
}
EXACT = True


def border_lengths(features: int, borders: int) -> list[int]:
    """Ragged border counts: every fourth feature has half the borders (at least one)."""
    return [max(borders // 2, 1) if f % 4 == 3 else borders for f in range(features)]


def make_borders(lengths: list[int]) -> torch.Tensor:
    """Sorted borders per feature, quantized to quarters so duplicates occur (quantile borders repeat)."""
    parts = [torch.sort(torch.round(torch.randn(n) * 4) / 4).values for n in lengths]
    return torch.cat(parts) if parts else torch.empty(0)


def make_x(batch: int, features: int, specials: bool) -> torch.Tensor:
    x = torch.randn(batch, features)
    if specials and x.numel():
        flat = x.view(-1)
        for i, v in enumerate((float("nan"), float("inf"), float("-inf"), -0.0, 0.0)):
            flat[(i * 7919) % flat.numel()] = v
    return x


class Model(MergeBucketizedDense):
    pass


def get_init_inputs() -> list:
    lengths = border_lengths(FEATURES, BORDERS)
    return [make_borders(lengths), torch.tensor(lengths, dtype=torch.int64)]


def get_inputs() -> list:
    return [make_x(BATCH, FEATURES, SPECIALS)]
