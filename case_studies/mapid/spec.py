"""KernelBench spec: MapIdTransform (paper section 5.4.1), int64 ids -> int64 dense indices.

`Model` is the paper's four-operator chain (`reference.MapIdTransform`). The vocabulary (module
state, an init input) holds VOCAB_SIZE sorted distinct even int64 values spread over most of
the range (negative ids too); unknown ids are odd, so UNKNOWN_RATE is exact. The ids are the
flattened values of a jagged batch of NUM_SAMPLES samples with IDS_PER_SAMPLE ids each (the
offsets pass through the transform unchanged, so only the values are inputs; the total is fixed by
the shape, as the harness's buffer refill needs).
"""
from __future__ import annotations

import functools

import torch

from case_studies.mapid.reference import MapIdTransform

# The case-study kernel imports its own package's helpers (the harness's static policy allows these).
ALLOWED_IMPORTS = ["case_studies", "numpy"]  # the kernel builds its hash tables with NumPy in __init__

NUM_SAMPLES = 57
IDS_PER_SAMPLE = 20
VOCAB_SIZE = 1000
UNKNOWN_RATE = 0.1

SHAPES = {
    "production": {"NUM_SAMPLES": 10_000, "VOCAB_SIZE": 1_000_000, "UNKNOWN_RATE": 0.1},
    "v100k_b10000": {"NUM_SAMPLES": 10_000, "VOCAB_SIZE": 100_000, "UNKNOWN_RATE": 0.1},
    "v1m_b2000": {"NUM_SAMPLES": 2_000, "VOCAB_SIZE": 1_000_000, "UNKNOWN_RATE": 0.1},
    "all_unknown": {"NUM_SAMPLES": 31, "VOCAB_SIZE": 777, "UNKNOWN_RATE": 1.0},
    "all_known": {"NUM_SAMPLES": 31, "VOCAB_SIZE": 5, "UNKNOWN_RATE": 0.0},
}
EXACT = True


@functools.lru_cache(maxsize=4)
def make_vocab(size: int, seed: int = 20251) -> torch.Tensor:
    """Sorted distinct even int64 values over the whole range, from a private generator: the same
    vocabulary for a given size whatever the harness seeded, so `get_inputs` can draw known ids."""
    g = torch.Generator().manual_seed(seed)
    v = torch.unique(torch.randint(-(2**61), 2**61, (size,), dtype=torch.int64, generator=g) * 2)
    while v.numel() < size:    # a repeated draw (about 1e-7 at a million) is drawn again
        extra = torch.randint(-(2**61), 2**61, (size - v.numel(),), dtype=torch.int64, generator=g) * 2
        v = torch.unique(torch.cat([v, extra]))
    return v


def make_ids(vocab: torch.Tensor, n: int, unknown_rate: float) -> torch.Tensor:
    """n ids from the global generator: known ones drawn from the vocabulary, a fraction
    `unknown_rate` odd (never in it)."""
    known = vocab[torch.randint(0, vocab.numel(), (n,))]
    unknown = torch.randint(-(2**62), 2**62, (n,), dtype=torch.int64) * 2 + 1
    return torch.where(torch.rand(n) < unknown_rate, unknown, known)


class Model(MapIdTransform):
    pass


def get_init_inputs() -> list:
    return [make_vocab(VOCAB_SIZE).clone()]


def get_inputs() -> list:
    return [make_ids(make_vocab(VOCAB_SIZE), NUM_SAMPLES * IDS_PER_SAMPLE, UNKNOWN_RATE)]
