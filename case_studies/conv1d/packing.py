"""The conv1d weights, packed for the kernels and cached, and the host TMA descriptors over the packed
weight (cached with it): what the launch path reuses from call to call."""
from __future__ import annotations

import os
import weakref
from collections import OrderedDict

import torch
from triton.tools.tensor_descriptor import TensorDescriptor


class _OwnedLRU:
    """A bounded LRU of values derived from a tensor (its packing, a descriptor over it): keyed by cheap
    properties, and a hit only while the key's tensor is still the very object it was made from (a weak
    reference): a freed tensor's memory reused by a new one of the same shape is a miss."""

    def __init__(self, size: int):
        self.size = size
        self.entries: OrderedDict[tuple, tuple[weakref.ref, object]] = OrderedDict()

    def get(self, key: tuple, owner: torch.Tensor) -> object | None:
        hit = self.entries.get(key)
        if hit is not None:
            if hit[0]() is owner:
                self.entries.move_to_end(key)
                return hit[1]
            del self.entries[key]
        return None

    def put(self, key: tuple, owner: torch.Tensor, value: object) -> None:
        self.entries[key] = (weakref.ref(owner), value)
        while len(self.entries) > self.size:
            self.entries.popitem(last=False)


_PACK_CACHE = _OwnedLRU(32)


def pack_weight(weight: torch.Tensor, use_cache: bool = True, layout: str = "gather") -> torch.Tensor:
    """`[C_out, C_in, K]` -> `[K, C_in, C_out]`, contiguous (the paper's `[C_in*K, C_out]` packing,
    k-major: one tap's `[C_in, C_out]` matrix is the dot's B operand, contiguous along C_out), or with
    `layout="kmajor"` `[K, C_out, C_in]` (C_in-contiguous: the K-major B operand TF32 wgmma reads).

    Cached by pointer, shape, strides, dtype, device and version counter (an in-place update, e.g. an
    optimizer step, repacks), as the paper does, and also by the weight tensor itself (a weak reference):
    a key of pointer and shape alone returned stale weights on the H200 when a freed weight's memory was
    reused by a new weight of the same shape (results/case_studies/conv1d/gpu_run2_checks.json,
    the "gather" check of B4 Cin32 Cout17).
    """
    key = (layout, weight.data_ptr(), tuple(weight.shape), weight.stride(), weight.dtype, weight.device,
           weight._version)
    hit = _PACK_CACHE.get(key, weight) if use_cache else None
    if hit is not None:
        return hit
    packed = weight.detach().permute(2, 0, 1) if layout == "kmajor" else weight.detach().permute(2, 1, 0)
    packed = packed.contiguous()
    if use_cache:
        _PACK_CACHE.put(key, weight, packed)
    return packed


# -- weight tiles by TMA: host-side descriptors over the packed weight, cached with it --------------------
_DESC_CACHE = _OwnedLRU(32)


def tma_block(kw: dict) -> tuple[int, tuple[int, int]]:
    """(W_TMA, the descriptor's block shape) a fitted config needs."""
    if kw["W_TMA"] == 2:
        return 2, (kw["BLOCK_CO"], kw["BLOCK_CI"])
    return kw["W_TMA"], (kw["BLOCK_CI"], kw["BLOCK_CO"])


def desc_spec(desc: TensorDescriptor | None) -> tuple[int, tuple[int, int]] | None:
    """What `weight_desc` built a descriptor for (tagged on it), or None."""
    return None if desc is None else desc.conv1d_spec


def weight_desc(wp: torch.Tensor, kw: dict, use_cache: bool = True) -> TensorDescriptor | None:
    """A host TMA descriptor over the packed weight for a fitted config with W_TMA (`[K, C_in, C_out]` as
    `[K * C_in, C_out]` for 1, `[K, C_out, C_in]` as `[K * C_out, C_in]` for 2), or None where TMA does not
    apply: rows not a multiple of 16 bytes or a misaligned base, or neither a GPU nor the interpreter
    (Triton 3.6's interpreter takes host descriptors). Host descriptors avoid the in-kernel
    `tl.make_tensor_descriptor` (0.83 us of each warp's time in another kernel here); Triton still encodes
    the CUtensorMap at every launch, from `base` as it is then.

    Cached like `pack_weight`: by pointer, shape, dtype, device and block, checked against the packed
    tensor itself (a weak reference), so a repacked weight never meets a stale descriptor."""
    spec = tma_block(kw)
    if not spec[0] or not (wp.is_cuda or os.environ.get("TRITON_INTERPRET") == "1"):
        return None
    view = wp.view(-1, wp.shape[-1])
    if view.shape[1] * wp.element_size() % 16 or view.data_ptr() % 16 or not wp.is_contiguous():
        return None
    key = (wp.data_ptr(), tuple(wp.shape), wp.dtype, wp.device, spec)
    hit = _DESC_CACHE.get(key, wp) if use_cache else None
    if hit is not None:
        return hit
    desc = TensorDescriptor.from_tensor(view, list(spec[1]))
    desc.conv1d_spec = spec
    if use_cache:
        _DESC_CACHE.put(key, wp, desc)
    return desc


def _spec_kw(spec: tuple[int, tuple[int, int]]) -> dict:
    """`tma_block`'s inverse: the config entries a descriptor was built for."""
    w_tma, (a, b) = spec
    return {"W_TMA": w_tma, "BLOCK_CI": b if w_tma == 2 else a, "BLOCK_CO": a if w_tma == 2 else b}


def _pack_and_desc(weight: torch.Tensor, kw: dict, use_cache: bool) -> tuple[torch.Tensor, dict,
                                                                             TensorDescriptor | None]:
    """The gather packing (always `w_ptr`, whatever W_TMA: the autotuner's other configs read it), the
    config with W_TMA cleared where TMA does not apply, and the descriptor (None without W_TMA; for W_TMA 2
    over the K-major packing, which the descriptor keeps alive)."""
    wp = pack_weight(weight, use_cache)
    if not kw.get("W_TMA", 0):
        return wp, kw, None
    wt = pack_weight(weight, use_cache, "kmajor") if kw["W_TMA"] == 2 else wp
    desc = weight_desc(wt, kw, use_cache)
    return wp, (kw if desc is not None else {**kw, "W_TMA": 0}), desc
