"""MergeBucketizedDense (MBDT), paper section 5.4.2: dense float features to globally unique bin ids.

Input `x: [B, F]` float32. Feature `f` has `n_f` sorted borders (ragged: the counts differ between
features, a count may be 0). Its bin index is `torch.bucketize(x[:, f], borders_f)` (right=False:
the number of borders strictly below x), and bins are made globally unique by adding
`offset_f = sum_{g < f} (n_g + 1)`. Output: `[B, F]` int64.

Behaviour at the edges, defined by `torch.bucketize` (its binary search moves right while
`!(border >= x)`), and tested:
- NaN: bin `n_f` (the last bin of the feature), because every comparison with NaN is false;
- +inf: the number of borders below +inf (`n_f` unless a border is +inf); -inf: 0 unless a border is -inf;
- -0.0 equals 0.0; duplicated borders: the bin is the count of borders strictly below x.
Borders must be sorted (non-decreasing) and free of NaN; the constructor checks both.

Two PyTorch formulations live here:
- `MergeBucketizedDense`: the paper's baseline, one `torch.bucketize` per feature plus the offset;
- `MergeBucketizedDenseVectorized`: what a careful PyTorch user writes, one `torch.searchsorted`
  over all features (borders padded with +inf to `[F, max n_f]`), a clamp for NaN, one add.
"""
from __future__ import annotations

import torch
from torch import nn


def bucket_offsets(lengths: list[int]) -> list[int]:
    """offset_f = sum_{g < f} (n_g + 1): feature f owns bins offset_f .. offset_f + n_f."""
    out, acc = [], 0
    for n in lengths:
        out.append(acc)
        acc += n + 1
    return out


def check_borders(borders: torch.Tensor, lengths: list[int]) -> None:
    """Borders of each feature must be sorted and NaN-free (the bucketize contract)."""
    if borders.dim() != 1 or borders.numel() != sum(lengths) or min(lengths, default=0) < 0:
        raise ValueError(f"borders [{borders.numel()}] do not match lengths summing to {sum(lengths)}")
    b = borders.detach().cpu()
    if torch.isnan(b).any():
        raise ValueError("borders contain NaN")
    start = 0
    for f, n in enumerate(lengths):
        seg = b[start:start + n]
        if n > 1 and bool((seg[1:] < seg[:-1]).any()):
            raise ValueError(f"borders of feature {f} are not sorted")
        start += n


class MergeBucketizedDense(nn.Module):
    """The paper's baseline: a Python loop of `torch.bucketize` over features."""

    def __init__(self, borders: torch.Tensor, border_lengths: torch.Tensor | list[int]):
        super().__init__()
        lengths = [int(n) for n in border_lengths]
        check_borders(borders, lengths)
        self.register_buffer("borders", borders.detach().float().contiguous())
        self.lengths = lengths
        self.starts = [sum(lengths[:f]) for f in range(len(lengths))]   # host ints: no sync in forward
        self.offsets = bucket_offsets(lengths)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        B, F = x.shape
        if F != len(self.lengths):
            raise ValueError(f"x has {F} features, the module {len(self.lengths)}")
        if F == 0:
            return torch.empty((B, 0), dtype=torch.int64, device=x.device)
        cols = []
        for f in range(F):
            b = self.borders[self.starts[f]:self.starts[f] + self.lengths[f]]
            cols.append(torch.bucketize(x[:, f], b) + self.offsets[f])
        return torch.stack(cols, dim=1)


class MergeBucketizedDenseVectorized(nn.Module):
    """The careful PyTorch user: one `torch.searchsorted` over all features at once.

    Borders are padded with +inf to `[F, max n_f]`; padding never counts for a finite x or +inf (+inf
    >= x), but NaN walks past it, so the result is clamped to `n_f`. The output is the transposed view
    (no extra copy), which `torch.equal` compares by value with the baseline's contiguous output.
    """

    def __init__(self, borders: torch.Tensor, border_lengths: torch.Tensor | list[int]):
        super().__init__()
        lengths = [int(n) for n in border_lengths]
        check_borders(borders, lengths)
        F, maxn = len(lengths), max(lengths, default=0)
        padded = torch.full((F, max(maxn, 1)), float("inf"))
        start = 0
        for f, n in enumerate(lengths):
            padded[f, :n] = borders.detach().cpu().float()[start:start + n]
            start += n
        self.register_buffer("padded", padded.to(borders.device))
        self.register_buffer("counts", torch.tensor(lengths, dtype=torch.int64,
                                                    device=borders.device).view(F, 1))
        self.register_buffer("offsets", torch.tensor(bucket_offsets(lengths), dtype=torch.int64,
                                                     device=borders.device).view(F, 1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        B, F = x.shape
        if F == 0:
            return torch.empty((B, 0), dtype=torch.int64, device=x.device)
        idx = torch.searchsorted(self.padded, x.t().contiguous())   # [F, B]
        return (torch.minimum(idx, self.counts) + self.offsets).t()
