"""Batch Event Truncate, paper section 5.5: keep the T most recent events of every (feature, sample).

Layout (TorchRec's KeyedJaggedTensor): F event features over a batch of B samples give S = F * B
segments, feature-major (feature 0's B samples, then feature 1's, ...). `values: [N]` holds the
events of every segment in order, oldest first; `offsets: [S + 1]` int64 (offsets[0] = 0,
non-decreasing, offsets[S] = N) delimits them. Truncation keeps the last `min(len, T)` events of
each segment and returns `(new_values [sum min(len, T)], new_offsets [S + 1])`. Empty segments,
empty features (B = 0) and T = 0 are allowed; T >= 0.

- `BatchEventTruncate`: the paper's baseline, the sequential per-feature PyTorch implementation
  (one `repeat_interleave` per feature, each a host synchronization because its size is data).
- `BatchEventTruncateVectorized`: the careful user's all-features formulation: the same index
  arithmetic over all S segments at once (one host synchronization).
The output size is data (sum of the kept lengths), so any implementation that returns an exact-size
tensor must learn that number on the host once.
"""
from __future__ import annotations

import torch
from torch import nn


def _truncate_segments(values: torch.Tensor, offsets: torch.Tensor,
                       max_len: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Kept values and kept lengths of the segments delimited by `offsets` (indices into `values`)."""
    starts, ends = offsets[:-1], offsets[1:]
    keep = (ends - starts).clamp(max=max_len)
    n_seg = keep.numel()
    seg = torch.repeat_interleave(torch.arange(n_seg, device=values.device), keep)   # host sync: size is data
    out_start = torch.cumsum(keep, 0) - keep
    src = (ends - keep)[seg] + (torch.arange(seg.numel(), device=values.device) - out_start[seg])
    return values[src], keep


def _offsets_from_lengths(lengths: torch.Tensor) -> torch.Tensor:
    out = torch.zeros(lengths.numel() + 1, dtype=torch.int64, device=lengths.device)
    torch.cumsum(lengths, 0, out=out[1:])
    return out


class BatchEventTruncate(nn.Module):
    """The paper's baseline: truncate feature by feature."""

    def __init__(self, max_len: int, num_features: int):
        super().__init__()
        if max_len < 0 or num_features < 1:
            raise ValueError("max_len must be >= 0 and num_features >= 1")
        self.max_len = int(max_len)
        self.num_features = int(num_features)

    def forward(self, values: torch.Tensor, offsets: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        S = offsets.numel() - 1
        F = self.num_features
        if S % F:
            raise ValueError(f"{S} segments do not split into {F} features")
        B = S // F
        kept_values, kept_lengths = [], []
        for f in range(F):
            v, k = _truncate_segments(values, offsets[f * B:(f + 1) * B + 1], self.max_len)
            kept_values.append(v)
            kept_lengths.append(k)
        return torch.cat(kept_values), _offsets_from_lengths(torch.cat(kept_lengths))


class BatchEventTruncateVectorized(nn.Module):
    """The careful PyTorch user: all features' segments in one pass."""

    def __init__(self, max_len: int, num_features: int):
        super().__init__()
        if max_len < 0 or num_features < 1:
            raise ValueError("max_len must be >= 0 and num_features >= 1")
        self.max_len = int(max_len)
        self.num_features = int(num_features)

    def forward(self, values: torch.Tensor, offsets: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        v, k = _truncate_segments(values, offsets, self.max_len)
        return v, _offsets_from_lengths(k)
