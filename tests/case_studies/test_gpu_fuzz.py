"""The GPU fuzzer's CPU-side parts: its random shapes are valid problems, its configs are the kernels'
own lists, and its judge blames the kernel only beyond eager's own distance from the fp32 reference."""
from __future__ import annotations

import random

import torch

from benchmarks.case_studies import gpu_fuzz as gf


def test_random_shapes_are_valid_problems():
    r = random.Random(0)
    for _ in range(200):
        p = gf.conv1d_shape(r)
        assert (p["L"] + 2 * p["padding"] - p["K"]) // p["stride"] + 1 >= 1 and p["padding"] <= p["K"]
        assert all(v >= 1 for v in gf.fm_shape(r).values()) and all(v >= 1 for v in gf.pffn_shape(r).values())


def test_configs_cover_the_kernels_lists():
    p = {"B": 2, "C_in": 32, "C_out": 24, "L": 29, "K": 3, "stride": 1, "padding": 0}
    names = gf.conv1d_configs(p, "float32")
    assert {"auto", "gather0", "gather_loop", "cl0"} <= set(names) and names["auto"] is None
    assert not any(n.startswith("cl") for n in gf.conv1d_configs(dict(p, stride=2), "float32"))
    assert "splitk2" in gf.pffn_configs({"N": 2, "B": 5, "D": 24, "K": 20}, "float16")
    assert "splitk2" not in gf.pffn_configs({"N": 2, "B": 5, "D": 300, "K": 20}, "float16")
    assert len(gf.fm_configs({"B": 3, "N": 5, "D": 20, "K": 7}, "float16")) >= 2


def test_judge_blames_the_kernel_only_beyond_eager():
    exact = torch.zeros(4, 4)
    eager = exact + 0.5                 # the dtype itself is this far off
    assert gf.judge(exact + 0.9, eager, exact, 1e-2, 1e-2)["ok"]          # within twice eager's error
    assert not gf.judge(exact + 1.5, eager, exact, 1e-2, 1e-2)["ok"]
    assert not gf.judge(exact.clone().fill_(float("nan")), exact, exact, 1e-2, 1e-2)["ok"]
    assert not gf.judge(torch.zeros(3), exact, exact, 1e-2, 1e-2)["ok"]   # wrong shape


def test_exact_cases_use_their_benchmarks_kernel_lists():
    for name in ("mapid", "mbdt", "event_truncate"):
        spec = gf.CASES[name]
        p = spec["shape"](random.Random(1))
        assert spec["dtypes"] == ["exact"] and list(spec["configs"](p, "exact"))
