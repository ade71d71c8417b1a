"""Fresh timed inputs for a spec whose `get_inputs()` ignores the seed (trusted, in the reference process).

The ATen suite's specs load OpInfo's fixed samples (their value domains matter: log, acos, indices), and a
user's spec may return constants too. Every timed set would then hold the same values, and a candidate that
skips its work when its inputs have not changed (a replay of the captured graph, a cache keyed on a value it
reads) would time nothing and still be judged right. So when two seeds give the same values, each timed set
is the spec's set with every floating tensor scaled by a factor of its own drawn from the set's secret seed:
in [0.5, 1) (toward zero: signs, zeros, orderings, positive definiteness and symmetric bounds such as acos's
[-1, 1] are kept), or in [1, 1.5) for a tensor whose every value is at least 1 (domains bounded below by 1,
such as acosh's or mvlgamma's). Outputs then differ from one set to the next by far more than any tolerance,
and the reference computes on the same scaled sets, so the verdict stays exact. Trials keep the spec's own
values. Integer and bool tensors (indices, masks) are never changed: a spec whose inputs are all integer or
bool still times identical sets (docs/harness.md, still not covered).
"""
from __future__ import annotations

import random
from typing import Any

import torch

# Values of each tensor compared to tell whether two seeds gave the same set: a seeded generator changes
# essentially every value, so the first few thousand tell as well as all of them, for GB inputs in microseconds.
FINGERPRINT_VALUES = 4096


def fingerprint(inputs: list[Any]) -> tuple[Any, ...]:
    """What tells one input set from another made under another seed: each tensor's dtype, shape and first
    `FINGERPRINT_VALUES` values (their bytes, NaN bit patterns included), each other input's repr."""
    out: list[Any] = []
    for x in inputs:
        if isinstance(x, torch.Tensor):
            head = x.detach().reshape(-1)[:FINGERPRINT_VALUES].to("cpu").contiguous()
            raw = head.view(torch.uint8) if head.numel() and head.dtype != torch.bool else head.to(torch.uint8)
            out.append((str(x.dtype), tuple(x.shape), bytes(raw.numpy().tobytes())))
        else:
            out.append(repr(x))
    return tuple(out)


def directions(inputs: list[Any]) -> list[int]:
    """Per input: 0 (left as it is: not a floating tensor, or empty), -1 (scaled toward zero) or +1 (away from
    it: every value at least 1). A NaN anywhere makes the minimum NaN: toward zero."""
    dirs = []
    for x in inputs:
        if isinstance(x, torch.Tensor) and x.dtype.is_floating_point and x.numel():
            dirs.append(1 if bool(x.detach().min() >= 1) else -1)
        else:
            dirs.append(0)
    return dirs


def vary(inputs: list[Any], seed: int, dirs: list[int]) -> list[Any]:
    """`inputs` with each floating tensor scaled as `dirs` says, by factors drawn from `seed` (the same seed,
    the same set: the judge makes it again); new tensors, the inputs themselves untouched."""
    rng = random.Random(seed)
    out = []
    for x, d in zip(inputs, dirs):
        if d:
            u = rng.random()
            x = x * (0.5 + 0.5 * u if d < 0 else 1.0 + 0.5 * u)
        out.append(x)
    return out
