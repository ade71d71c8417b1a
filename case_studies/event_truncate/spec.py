"""KernelBench spec: Batch Event Truncate (paper section 5.5), keep the last MAX_LEN events of every
(feature, sample) segment of a KeyedJaggedTensor-style batch.

`Model` is the paper's sequential per-feature baseline (`reference.BatchEventTruncate`). Every
segment has a length uniform on 0..MAX_EVENTS (so empty segments occur), drawn in complementary pairs
so the total is fixed by the shape; values are random int64 event ids. MAX_LEN < MAX_EVENTS needs
truncation; MAX_LEN = MAX_EVENTS needs none.
Outputs: (new_values, new_offsets).
"""
from __future__ import annotations

import torch

from case_studies.event_truncate.reference import BatchEventTruncate

# The case-study kernel imports its own package's helpers (the harness's static policy allows these).
ALLOWED_IMPORTS = ["case_studies"]

NUM_FEATURES = 5
BATCH = 13
MAX_EVENTS = 20
MAX_LEN = 7

SHAPES = {
    "production": {"NUM_FEATURES": 32, "BATCH": 1024, "MAX_EVENTS": 200, "MAX_LEN": 50},
    "f5_b1024": {"NUM_FEATURES": 5, "BATCH": 1024, "MAX_EVENTS": 200, "MAX_LEN": 50},
    "f32_b4096": {"NUM_FEATURES": 32, "BATCH": 4096, "MAX_EVENTS": 200, "MAX_LEN": 50},
    "no_truncation": {"NUM_FEATURES": 32, "BATCH": 1024, "MAX_EVENTS": 200, "MAX_LEN": 200},
    "keep_nothing": {"NUM_FEATURES": 3, "BATCH": 7, "MAX_EVENTS": 9, "MAX_LEN": 0},
    "empty_batch": {"NUM_FEATURES": 4, "BATCH": 0, "MAX_EVENTS": 9, "MAX_LEN": 3},
}
EXACT = True


def make_lengths(segments: int, max_events: int) -> torch.Tensor:
    """Lengths uniform on 0..max_events, drawn in pairs (l, max_events - l) and shuffled, so that the
    total (the values tensor's size) depends on the shape only: the harness refills the same input
    buffers with new draws, which needs fixed shapes."""
    half = torch.randint(0, max_events + 1, (segments // 2,), dtype=torch.int64)
    parts = [half, max_events - half]
    if segments % 2:
        parts.append(torch.tensor([max_events // 2], dtype=torch.int64))
    lengths = torch.cat(parts)
    return lengths[torch.randperm(segments)]


def make_batch(num_features: int, batch: int, max_events: int) -> tuple[torch.Tensor, torch.Tensor]:
    lengths = make_lengths(num_features * batch, max_events)
    offsets = torch.zeros(lengths.numel() + 1, dtype=torch.int64)
    torch.cumsum(lengths, 0, out=offsets[1:])
    values = torch.randint(-(2**62), 2**62, (int(offsets[-1]),), dtype=torch.int64)
    return values, offsets


class Model(BatchEventTruncate):
    pass


def get_init_inputs() -> list:
    return [MAX_LEN, NUM_FEATURES]


def get_inputs() -> list:
    return list(make_batch(NUM_FEATURES, BATCH, MAX_EVENTS))
