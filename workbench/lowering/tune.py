"""The GPU config space of each primitive, for the offline tuner of a lowered draft.

A draft's kernels read module-level TUNABLES (block sizes, warps, stages, the fp32 dot precision); each
primitive family owns a short list of points of its tunables, best guess first, for an H200 (`SPACE`).
`configs(source, n)` returns up to n configs of one draft: config k takes the k-th point of every family
the draft uses (families are independent kernels, so one timing tries a point of each), skipping points
whose values the draft's TUNABLES do not allow and the draft's current values. `fitting(source, launches,
configs)` drops the configs that cannot run on an H200 (`sm90_check.check_config`: shared memory,
registers), from launches recorded on the CPU.

`benchmarks/lowering_gpu.py run --tune N` times up to N configs of each correct draft on the GPU, keeps
only configs whose outputs still match eager (so "tf32x3" stays only where the tolerance holds) and
records the fastest as tuned_draft_us.
"""
from __future__ import annotations

from typing import Any

from workbench.search.tunables import parse_tunables

# family -> (tunable names, points): best guess first
SPACE: dict[str, tuple[tuple[str, ...], list[tuple[Any, ...]]]] = {
    "matmul": (("MM_BLOCK_M", "MM_BLOCK_N", "MM_BLOCK_K", "MM_NUM_WARPS", "MM_NUM_STAGES", "MM_PRECISION"),
               [(128, 128, 32, 8, 3, "tf32x3"), (128, 64, 32, 4, 3, "tf32x3"), (128, 128, 16, 8, 3, "ieee"),
                (64, 128, 32, 4, 3, "ieee"), (64, 64, 32, 4, 3, "tf32x3"), (128, 64, 16, 4, 4, "ieee"),
                (64, 64, 64, 4, 2, "ieee"), (32, 64, 32, 2, 3, "ieee")]),
    # an fp32 implicit GEMM is 3-5x faster in tf32x3 than in "ieee" FMA (the conv probe on the H200): seven of
    # eight points try it; positions >= 64 keep the tile on wgmma (64 rows a warpgroup)
    "conv": (("CONV_BLOCK_P", "CONV_BLOCK_CO", "CONV_BLOCK_R", "CONV_NUM_WARPS", "MM_PRECISION"),
             [(128, 64, 32, 4, "tf32x3"), (128, 128, 32, 8, "tf32x3"), (64, 64, 32, 4, "tf32x3"),
              (128, 32, 32, 4, "tf32x3"), (128, 64, 16, 4, "tf32x3"), (64, 128, 32, 4, "tf32x3"),
              (128, 64, 64, 8, "tf32x3"), (128, 64, 32, 8, "ieee")]),
    "reduction": (("RED_BLOCK_M", "RED_BLOCK_N", "NUM_WARPS"),
                  [(1, 1024, 4), (2, 512, 4), (1, 512, 2), (8, 128, 4), (4, 512, 8), (16, 64, 4), (1, 1024, 8),
                   (2, 256, 2)]),
    "pointwise": (("BLOCK", "NUM_WARPS"),
                  [(2048, 8), (4096, 8), (1024, 8), (512, 4), (2048, 4), (4096, 4), (256, 2), (1024, 2)]),
    "scan": (("SCAN_BLOCK_M", "SCAN_BLOCK_N"), [(1, 1024), (2, 512), (8, 128), (1, 512), (4, 512), (2, 1024)]),
    "pool": (("POOL_BLOCK",), [(512,), (1024,), (128,)]),
    # the depthwise convolution's tile, next best on the H200 after the default 4 x 256 (experiments/depthwise_tiles)
    "depthwise": (("DW_BLOCK_C", "DW_BLOCK_P"), [(2, 512), (1, 1024), (4, 512), (8, 256)]),
}
# the order families are merged in: a later family's value of a shared name (NUM_WARPS, MM_PRECISION) wins
ORDER = ("pointwise", "pool", "scan", "reduction", "conv", "depthwise", "matmul")
# names more than one family's kernels read: they do not make a family apply to a draft
SHARED = {"NUM_WARPS", "MM_PRECISION"}


def configs(source: str, n: int) -> list[dict[str, Any]]:
    """Up to n distinct configs of the draft `source`, none equal to its current values."""
    space = parse_tunables(source)
    allowed, current = space.choices, dict(space.current)
    fams = [f for f in ORDER if (set(SPACE[f][0]) - SHARED) & allowed.keys()]
    out: list[dict[str, Any]] = []
    longest = max((len(SPACE[f][1]) for f in fams), default=0)
    for k in range(longest):
        cfg: dict[str, Any] = {}
        for f in fams:
            names, points = SPACE[f]
            point = dict(zip(names, points[k % len(points)]))
            if all(name not in allowed or v in allowed[name] for name, v in point.items()):
                cfg.update({name: v for name, v in point.items() if name in allowed})
        if cfg and any(current.get(name) != v for name, v in cfg.items()) and cfg not in out:
            out.append(cfg)
        if len(out) >= n:
            break
    return out


def fitting(source: str, launches: list, cfgs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The configs whose recorded launches compile for sm_90 and fit an H200 block."""
    from workbench.lowering import sm90_check as sc

    return [c for c in cfgs if all(f.ok for f in sc.check_config(source, launches, c))]
