"""The gather kernel's tile configs as data: the autotune space, the keys of a config, and how a config is
fitted to a problem and pruned for a launch (the autotuner itself is built in kernel.py, next to the
tunables its predicate reads)."""
from __future__ import annotations

from collections.abc import Callable

import torch
import triton
from triton.tools.tensor_descriptor import TensorDescriptor

from case_studies.conv1d.packing import _pack_and_desc, desc_spec, tma_block

# A short list, not the TUNABLES product: the device lease pays for every compiled config
# (about a second each), and the offline search explores the full TUNABLES space instead.
AUTOTUNE_SPACE = [
    # BLOCK_N, BLOCK_CO, CO_SUB, BLOCK_CI, UNROLL_CI, PERSISTENT, EVICT, SHIFT_T, W_TMA, num_warps, num_stages
    # H200, production shape, L2 flushed (results/case_studies/conv1d/gpu_run4_tuning.json): the first
    # row won everywhere it was tuned (K = 1, 3, 5; fp16 and fp32): fp16 126 us (168 with SHIFT_T = 0),
    # 64-position tiles 139-142, 256: 159, 32: 239; fp32 300 us (502 with SHIFT_T = 0), 256: 313. The
    # list keeps the runners-up only (each config timed costs lease time); dropped: 32-position tiles
    # (239 us), eviction hints (142), operands loaded a step ahead (140-143), 64 x 2 accumulators (191),
    # one 128-wide accumulator (164 fp16, 690 fp32: gpu_run6_sweep2.json), and before that the
    # software-pipelined C_in loop (201 us fp16, 887 fp32) and persistent variants (212-283 us fp16).
    # Weights by TMA (W_TMA) lost or tied in every variant measured (see W_TMA above): no W_TMA row.
    (128, 32, 4, 32, 1, 0, 0, 1, 0, 4, 1),
    (64, 32, 4, 32, 1, 0, 0, 1, 0, 4, 1),
    (128, 32, 4, 32, 1, 0, 0, 1, 0, 8, 1),
    (256, 32, 4, 32, 1, 0, 0, 1, 0, 8, 1),
]
CONFIG_KEYS = ("BLOCK_N", "BLOCK_CO", "CO_SUB", "BLOCK_CI", "UNROLL_CI", "PERSISTENT", "EVICT", "SHIFT_T",
               "W_TMA")



def space_configs(valid: Callable[[dict], bool]) -> list[triton.Config]:
    """The autotune space as triton configs, kept where `valid` (the kernel's `tunables_valid`) says so."""
    out = []
    for *tiles, nw, ns in AUTOTUNE_SPACE:
        kw = dict(zip(CONFIG_KEYS, tiles))
        if valid({**kw, "NUM_WARPS": nw}):
            out.append(triton.Config(kw, num_warps=nw, num_stages=ns))
    return out


def fit_config(kw: dict, c_in: int, c_out: int) -> dict:
    """A config's tiles shrunk to the problem: no more accumulators than C_out needs, no C_in step much
    wider than C_in (`tl.dot` needs every side >= 16)."""
    kw = dict(kw)
    bco = min(kw["BLOCK_CO"], max(16, triton.next_power_of_2(c_out)))
    kw["BLOCK_CO"] = bco
    kw["CO_SUB"] = max(1, min(kw["CO_SUB"], triton.cdiv(c_out, bco)))
    kw["BLOCK_CI"] = min(kw["BLOCK_CI"], max(16, triton.next_power_of_2(c_in)))
    return kw


def prune_configs(configs: list[triton.Config], named_args: dict, **kwargs) -> list[triton.Config]:
    """Fit every config to the problem (`fit_config`), dropping the duplicates that makes, and the weight-TMA
    configs that the launch's descriptor (`w_desc`, one per launch) does not serve."""
    args = {**named_args, **kwargs}
    spec = desc_spec(args.get("w_desc"))
    out, seen = [], set()
    for c in configs:
        kw = fit_config(c.kwargs, args["C_IN"], args["C_OUT"])
        if kw.get("W_TMA", 0) and tma_block(kw) != spec:
            continue
        key = (tuple(sorted(kw.items())), c.num_warps, c.num_stages)
        if key not in seen:
            seen.add(key)
            out.append(triton.Config(kw, num_warps=c.num_warps, num_stages=c.num_stages))
    return out


def autotune_desc(weight: torch.Tensor, c_in: int, c_out: int, use_cache: bool) -> TensorDescriptor | None:
    """The one descriptor an autotuned launch passes: for the weight-TMA rows of `AUTOTUNE_SPACE` (all of
    one W_TMA and block once fitted; `prune_configs` drops the others), None when the space has none."""
    rows = [dict(zip(CONFIG_KEYS, r[:len(CONFIG_KEYS)])) for r in AUTOTUNE_SPACE]
    tma_rows = [fit_config(r, c_in, c_out) for r in rows if r["W_TMA"]]
    if not tma_rows:
        return None
    return _pack_and_desc(weight, tma_rows[0], use_cache)[2]
