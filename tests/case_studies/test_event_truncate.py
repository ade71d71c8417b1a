"""Batch Event Truncate on the CPU interpreter: the two-launch kernel (exact and sync-free outputs) and
the vectorized formulation agree bit for bit with the per-feature baseline on empty segments, empty
batches, T = 0, no truncation, several scan blocks and several copy chunks; plus the exact-output
runner's plumbing on tuple outputs."""
from __future__ import annotations

import pytest
import torch

from case_studies.common.preprocessing import ExactCase, outputs_identical, run_exact_benchmark
from case_studies.common.runner import BenchmarkDecl
from case_studies.event_truncate import kernel, spec
from case_studies.event_truncate.dispatch import (
    BatchEventTruncateDispatch,
    EventTruncateDispatcher,
)
from case_studies.event_truncate.reference import BatchEventTruncate, BatchEventTruncateVectorized
from tests.case_studies.sm90 import compile_for_sm90 as _compile_for_sm90


def _batch(f: int, b: int, max_events: int, seed: int, dtype: torch.dtype = torch.int64):
    g = torch.Generator().manual_seed(seed)
    lengths = torch.randint(0, max_events + 1, (f * b,), generator=g)
    offsets = torch.zeros(f * b + 1, dtype=torch.int64)
    torch.cumsum(lengths, 0, out=offsets[1:])
    n = int(offsets[-1])
    if dtype == torch.int64:
        values = torch.randint(-(2**62), 2**62, (n,), generator=g, dtype=torch.int64)
    else:
        values = torch.randn(n, generator=g).to(dtype)
    return values, offsets


def _bits(t: torch.Tensor) -> torch.Tensor:
    return t.view(torch.int32) if t.dtype == torch.float32 else t


# (F, B, max events, T, launch config): small SCAN_BLOCK / SEGS / COLS exercise several scan blocks
# and several copy chunks per segment on interpreter-sized data
CASES = [
    (3, 5, 9, 4, {}),
    (5, 13, 20, 7, {"scan_block": 8, "segs": 4, "cols": 4}),
    (2, 31, 40, 17, {"scan_block": 16, "segs": 8, "cols": 8}),
    (4, 7, 9, 9, {}),                     # T = max events: no truncation
    (4, 7, 9, 1000, {"scan_block": 8, "segs": 8, "cols": 4}),
    (2, 7, 9, 0, {}),                     # T = 0: keep nothing
    (3, 6, 0, 3, {}),                     # every segment empty
    (4, 0, 9, 3, {}),                     # empty batch: no segments
    (1, 127, 5, 2, {"scan_block": 32, "segs": 16, "cols": 2}),
]


@pytest.mark.parametrize("f,b,max_events,t,cfg", CASES)
def test_bit_identical(f: int, b: int, max_events: int, t: int, cfg: dict) -> None:
    values, offsets = _batch(f, b, max_events, seed=f * 100 + b + t)
    ref_v, ref_o = BatchEventTruncate(t, f)(values, offsets)
    vec_v, vec_o = BatchEventTruncateVectorized(t, f)(values, offsets)
    assert torch.equal(vec_v, ref_v) and torch.equal(vec_o, ref_o)
    got_v, got_o = kernel.batch_event_truncate(values, offsets, t, **cfg)
    assert outputs_identical((got_v, got_o), (ref_v, ref_o)) == (True, "")
    # sync-free variant: upper-bound-sized values, exact device offsets, exact prefix
    ns_v, ns_o = kernel.batch_event_truncate(values, offsets, t, exact=False, **cfg)
    assert ns_v.numel() == min(values.numel(), f * b * t)
    assert torch.equal(ns_o, ref_o)
    assert torch.equal(ns_v[:int(ns_o[-1])], ref_v)
    assert torch.equal(kernel.ModelNew(t, f)(values, offsets)[0], ref_v)


def test_reference_semantics_by_hand() -> None:
    """Keep the LAST min(len, T) events of each segment (the most recent ones)."""
    values = torch.arange(10, 20, dtype=torch.int64)
    offsets = torch.tensor([0, 4, 4, 5, 10])        # lengths 4, 0, 1, 5; F = 2, B = 2
    v, o = BatchEventTruncate(2, 2)(values, offsets)
    assert v.tolist() == [12, 13, 14, 18, 19] and o.tolist() == [0, 2, 2, 3, 5]
    kv, ko = kernel.batch_event_truncate(values, offsets, 2)
    assert kv.tolist() == v.tolist() and ko.tolist() == o.tolist()


def test_copy_is_bitwise_for_floats() -> None:
    values, offsets = _batch(3, 9, 12, seed=9, dtype=torch.float32)
    values[::7] = float("nan")
    values[1::11] = -0.0
    ref_v, ref_o = BatchEventTruncate(5, 3)(values, offsets)
    got_v, got_o = kernel.batch_event_truncate(values, offsets, 5, scan_block=8, segs=4, cols=4)
    assert torch.equal(_bits(got_v), _bits(ref_v)) and torch.equal(got_o, ref_o)


def test_rejects_bad_arguments() -> None:
    values, offsets = _batch(2, 3, 4, seed=1)
    with pytest.raises(ValueError):
        BatchEventTruncate(3, 4)(values, offsets)          # 6 segments do not split into 4 features
    with pytest.raises(ValueError):
        kernel.ModelNew(3, 4)(values, offsets)
    with pytest.raises(ValueError):
        kernel.batch_event_truncate(values, offsets, 3, scan_block=12, segs=8)
    with pytest.raises(ValueError):
        kernel.ModelNew(-1, 2)


@pytest.mark.parametrize("shape", ["default", "keep_nothing", "empty_batch"])
def test_spec_shapes(shape: str) -> None:
    saved = {k: getattr(spec, k) for k in ("NUM_FEATURES", "BATCH", "MAX_EVENTS", "MAX_LEN")}
    try:
        for k, v in spec.SHAPES.get(shape, {}).items():
            setattr(spec, k, v)
        torch.manual_seed(5)
        init, inputs = spec.get_init_inputs(), spec.get_inputs()
        same, why = outputs_identical(kernel.ModelNew(*init)(*inputs), spec.Model(*init)(*inputs))
        assert same, why
    finally:
        for k, v in saved.items():
            setattr(spec, k, v)
    assert spec.EXACT is True and "production" in spec.SHAPES


def test_tunables_are_data() -> None:
    cfg = {name: getattr(kernel, name) for name in kernel.TUNABLES}
    for name, allowed in kernel.TUNABLES.items():
        assert cfg[name] in allowed, name
    assert kernel.tunables_valid(cfg)
    assert not kernel.tunables_valid({**cfg, "SCAN_BLOCK": 512, "SEGS": 64 * 3})


def test_dispatch_falls_back_on_cpu(tmp_path) -> None:
    values, offsets = _batch(3, 4, 6, seed=2)
    m = BatchEventTruncateDispatch(2, 3, results_csv=tmp_path / "none.csv")
    assert not m.decide(offsets).use_kernel
    assert outputs_identical(m(values, offsets), BatchEventTruncate(2, 3)(values, offsets))[0]
    params = '{"BATCH": 1024, "MAX_EVENTS": 200, "MAX_LEN": 50, "NUM_FEATURES": 32}'
    rows = [{"status": "ok", "contender": c, "mode": "plain", "dtype": "int64", "params": params,
             "median_us": us}
            for c, us in (("triton_exact", 30.0), ("vectorized_eager", 400.0))]
    d = EventTruncateDispatcher(rows=rows).decide({"NUM_FEATURES": 32, "BATCH": 1024, "MAX_LEN": 50}, "int64")
    assert d.use_kernel and d.kernel_us == 30.0


def test_outputs_identical_reports_the_difference() -> None:
    a = torch.tensor([1, 2, 3])
    assert outputs_identical((a, a), (a, a)) == (True, "")
    same, why = outputs_identical((a, a + 0), (a, torch.tensor([1, 2, 4])))
    assert not same and "output[1]" in why and "1 of 3" in why
    assert not outputs_identical(a, a.float())[0]
    assert not outputs_identical((a,), (a, a))[0]


def test_exact_runner_plumbing_on_cpu() -> None:
    """The runner checks tuple outputs bit for bit, marks a wrong contender, skips graphs on the CPU."""
    decl = BenchmarkDecl.from_dict({"name": "t", "warmup_ms": 0.1, "rep_ms": 0.5, "sweeps": [
        {"name": "s", "shapes": [{"name": "tiny", "F": 2, "B": 3, "T": 2}], "dtypes": ["int64"],
         "contenders": ["eager", "kernel", "wrong"], "modes": ["plain", "graph"]}]})

    def make_inputs(p: dict, device: str) -> tuple:
        return _batch(p["F"], p["B"], 5, seed=0)

    def factory(fn):
        return lambda p, inputs: (lambda: fn(p, *inputs))

    case = ExactCase(make_inputs=make_inputs, nbytes=lambda p, i: 1.0, reference="eager", contenders={
        "eager": factory(lambda p, v, o: BatchEventTruncate(p["T"], p["F"])(v, o)),
        "kernel": factory(lambda p, v, o: kernel.batch_event_truncate(v, o, p["T"])),
        "wrong": factory(lambda p, v, o: kernel.batch_event_truncate(v, o, p["T"] + 1)),
    })
    rows = {(r.contender, r.mode): r for r in run_exact_benchmark(decl, case, device="cpu")}
    assert rows[("kernel", "plain")].status == "ok" and rows[("kernel", "plain")].median_us > 0
    assert rows[("wrong", "plain")].status == "incorrect" and rows[("wrong", "plain")].error
    assert rows[("eager", "graph")].status == "skipped"





# the kernels with the constexpr values the H200 runs use (signatures as Triton's compiler takes them)
_SM90_CASES = """[
    (k._keep_scan_kernel, {"offsets_ptr": "*i64", "scratch_ptr": "*i64", "block_sums_ptr": "*i64", "S": "i32",
                           "T": "i32", "SCAN_BLOCK": "constexpr", "PROBES": "constexpr"},
     {"SCAN_BLOCK": 1024, "PROBES": False}),
    (k._fixup_copy_kernel, {"values_ptr": "*i64", "offsets_ptr": "*i64", "scratch_ptr": "*i64",
                            "block_sums_ptr": "*i64", "new_offsets_ptr": "*i64", "out_ptr": "*i64",
                            "S": "i32",
                            "T": "i32", "SCAN_BLOCK": "constexpr", "NB_P2": "constexpr", "SEGS": "constexpr",
                            "COLS": "constexpr", "PROBES": "constexpr"},
     {"SCAN_BLOCK": 1024, "NB_P2": 128, "SEGS": 16, "COLS": 64, "PROBES": False}),
]"""


def test_kernels_compile_for_sm90() -> None:
    _compile_for_sm90("from case_studies.event_truncate import kernel as k", _SM90_CASES)
