"""MapIdTransform, paper section 5.4.1: sparse categorical ids to dense indices, 0 for unknown ids.

The ids are the values of a jagged batch (samples of about 20 ids, flattened; the offsets are not
changed by the transform, so only the values pass through). The vocabulary is module state: a sorted
int64 table `vocab[V]`, V >= 1. The dense index of an id is its position in the table plus one
(the first position when the table repeats a value, as `searchsorted` finds it); index 0 is
reserved for ids not in the table. Negative ids and the whole int64 range are allowed.

- `MapIdTransform`: the paper's baseline, the four-operator chain a preprocessing module uses
  (lookup position, bound, compare, select), each materializing an intermediate.
- `MapIdTransformVectorized`: the careful user's three-operator version (a sentinel copy of the
  last entry replaces the bound); `torch.compile` of the baseline is the other strong contender.
"""
from __future__ import annotations

import torch
from torch import nn


def check_vocab(vocab: torch.Tensor) -> None:
    if vocab.dim() != 1 or vocab.numel() < 1 or vocab.dtype != torch.int64:
        raise ValueError("vocab must be a non-empty 1-D int64 tensor")
    v = vocab.detach().cpu()
    if v.numel() > 1 and bool((v[1:] < v[:-1]).any()):
        raise ValueError("vocab must be sorted ascending")


class MapIdTransform(nn.Module):
    """The paper's four-operator chain."""

    def __init__(self, vocab: torch.Tensor):
        super().__init__()
        check_vocab(vocab)
        self.register_buffer("vocab", vocab.detach().contiguous())

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        pos = torch.searchsorted(self.vocab, ids)                    # 1. lookup position
        pos = pos.clamp(max=self.vocab.numel() - 1)                  # 2. bound
        hit = self.vocab[pos] == ids                                 # 3. compare
        return torch.where(hit, pos + 1, torch.zeros_like(pos))     # 4. select


class MapIdTransformVectorized(nn.Module):
    """Three operators: a sentinel copy of the last entry at position V makes the bound unnecessary
    (`searchsorted` returns V only for ids above every entry, and the sentinel is below those)."""

    def __init__(self, vocab: torch.Tensor):
        super().__init__()
        check_vocab(vocab)
        self.register_buffer("vocab", vocab.detach().contiguous())
        self.register_buffer("vocab_ext", torch.cat([vocab.detach(), vocab.detach()[-1:]]))

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        pos = torch.searchsorted(self.vocab, ids)
        return torch.where(self.vocab_ext[pos] == ids, pos + 1, 0)
