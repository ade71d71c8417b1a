"""The dispatchers' cost model: a shape far from every recorded one is decided by `t = a + b * work`
fitted to the recorded shapes, not by a blanket fallback to PyTorch, and only where the fit can be trusted."""
from __future__ import annotations

import json

from case_studies.common.dispatch import ShapeDispatcher, _fit_line
from case_studies.mapid.dispatch import DISPATCH_CSV, MapIdDispatcher
from case_studies.mapid.spec import IDS_PER_SAMPLE, SHAPES


class _Toy(ShapeDispatcher):
    key_params = ("N",)
    kernel_contender = "k"
    baseline_contender = "b"


def _rows(points: dict[int, tuple[float, float]], modes=("plain", "graph")) -> list[dict]:
    return [{"status": "ok", "contender": c, "mode": m, "dtype": "float16", "params": json.dumps({"N": n}),
             "median_us": us} for n, (k_us, b_us) in points.items() for c, us in (("k", k_us), ("b", b_us))
            for m in modes]


def test_far_small_shape_takes_the_kernel_when_the_fit_says_launch_cost_dominates():
    d = _Toy(rows=_rows({1000: (6.0, 30.0), 2000: (7.0, 32.0), 4000: (9.0, 36.0)}))
    got = d.decide({"N": 10}, "float16")
    assert got.use_kernel and "cost model" in got.reason and abs(got.kernel_us - 5.01) < 0.01
    assert d.decide({"N": 3000}, "float16").reason.startswith("nearest recorded")      # near: unchanged


def test_cost_model_refuses_what_it_cannot_back():
    few = _Toy(rows=_rows({1000: (6.0, 30.0), 4000: (9.0, 36.0)}))                    # two points only
    assert not few.decide({"N": 10}, "float16").use_kernel
    assert "too few" in few.decide({"N": 10}, "float16").reason
    shrinking = _Toy(rows=_rows({1000: (9.0, 30.0), 2000: (7.0, 32.0), 4000: (6.0, 36.0)}))  # b < 0
    assert not shrinking.decide({"N": 10}, "float16").use_kernel
    close = _Toy(rows=_rows({1000: (25.0, 30.0), 2000: (26.0, 32.0), 4000: (28.0, 36.0)}))   # < 1.25x
    assert not close.decide({"N": 10}, "float16").use_kernel
    d = _Toy(rows=_rows({1000: (6.0, 30.0), 2000: (7.0, 32.0), 4000: (9.0, 36.0)}))
    assert "outside" in d.decide({"N": 10**6}, "float16").reason and not d.decide({"N": 10**6}, "float16").use_kernel
    assert not d.decide({"N": 10}, "bfloat16").use_kernel                               # dtype never measured
    # a win in one launch mode only: no kernel without a mode, the kernel when that mode is asked for
    one = _Toy(rows=_rows({1000: (6.0, 30.0), 2000: (7.0, 32.0), 4000: (9.0, 36.0)}, ("plain",))
               + _rows({1000: (6.0, 6.5), 2000: (7.0, 7.5), 4000: (9.0, 9.5)}, ("graph",)))
    assert not one.decide({"N": 10}, "float16").use_kernel
    assert one.decide({"N": 10}, "float16", "plain").use_kernel


def test_fit_line_is_least_squares():
    assert _fit_line([(1.0, 3.0), (2.0, 5.0), (3.0, 7.0)], 3) == (1.0, 2.0)
    assert _fit_line([(1.0, 3.0), (1.0, 5.0), (2.0, 7.0)], 3) is None


def test_mapid_spec_edge_shapes_take_the_kernel_from_the_recorded_h200_table():
    """The issue's measurement: at the spec's all-known and all-unknown shapes (620 ids, far below the
    recorded 40,000-200,000) the blanket fallback ran the chain at 25.7 / 45.0 us against the kernel's 4.9 /
    5.9. The recorded table's launch costs decide them for the kernel now, in both launch modes."""
    d = MapIdDispatcher(DISPATCH_CSV)
    for name in ("all_known", "all_unknown"):
        s = SHAPES[name]
        params = {"VOCAB_SIZE": s["VOCAB_SIZE"], "NUM_IDS": s["NUM_SAMPLES"] * IDS_PER_SAMPLE}
        for mode in (None, "plain", "graph"):
            got = d.decide(params, "int64", mode)
            assert got.use_kernel and "cost model" in got.reason, (name, mode, got.reason)
