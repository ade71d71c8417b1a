"""MBDT on the CPU interpreter: the kernel (both search variants), the vectorized formulation and the
paper's baseline agree bit for bit; the baseline's edge behaviour (NaN, inf, -0.0, duplicates, empty
features) is pinned by hand-computed values."""
from __future__ import annotations

import math

import pytest
import torch

from case_studies.common.dispatch import ShapeDispatcher
from case_studies.mbdt import kernel, spec
from case_studies.mbdt.dispatch import MBDTDispatch, MBDTDispatcher
from case_studies.mbdt.reference import MergeBucketizedDense, MergeBucketizedDenseVectorized
from tests.case_studies.sm90 import compile_for_sm90 as _compile_for_sm90

NAN, INF = float("nan"), float("inf")


def _case(batch: int, lengths: list[int], seed: int, specials: bool = True):
    g = torch.Generator().manual_seed(seed)
    parts = [torch.sort(torch.round(torch.randn(n, generator=g) * 2) / 2).values for n in lengths]
    borders = torch.cat(parts) if parts else torch.empty(0)
    x = torch.round(torch.randn(batch, len(lengths), generator=g) * 4) / 4   # hits borders exactly
    if specials and x.numel():
        flat = x.view(-1)
        for i, v in enumerate((NAN, INF, -INF, -0.0, NAN)):
            flat[(i * 31) % flat.numel()] = v
    return borders, torch.tensor(lengths, dtype=torch.int64), x


def _all_formulations(borders, lengths, x):
    ref = MergeBucketizedDense(borders, lengths)(x)
    outs = {"vectorized": MergeBucketizedDenseVectorized(borders, lengths)(x)}
    m = kernel.ModelNew(borders, lengths)
    outs["kernel_linear"] = kernel.mbdt(x, m.padded, m.counts, m.offsets, search="linear", block=64,
                                        num_warps=2)
    outs["kernel_binary"] = kernel.mbdt(x, m.padded, m.counts, m.offsets, search="binary", block=128)
    outs["model_new"] = m(x)
    return ref, outs


@pytest.mark.parametrize("batch,lengths", [
    (5, [4, 4, 2]),
    (123, [5, 5, 5, 2, 5, 5, 5]),       # odd batch, ragged
    (127, [2, 2]),
    (1, [1]),
    (7, [0, 3, 0]),                      # features without borders: always bin 0 of their range
    (33, [16, 1, 9, 32]),                # MAXN 32, ragged up to it
    (0, [3, 4]),                         # empty batch
    (4, []),                             # no features at all
])
def test_bit_identical(batch: int, lengths: list[int]) -> None:
    borders, lens, x = _case(batch, lengths, seed=batch * 7 + len(lengths))
    ref, outs = _all_formulations(borders, lens, x)
    assert ref.dtype == torch.int64 and ref.shape == (batch, len(lengths))
    for name, out in outs.items():
        assert out.dtype == ref.dtype and out.shape == ref.shape, name
        assert torch.equal(out, ref), f"{name}: {int((out != ref).sum())} mismatches"


def test_reference_edge_behaviour() -> None:
    """bucketize right=False counts borders strictly below x; NaN goes to the last bin; -0.0 == 0.0;
    infinite borders are ordinary values; offsets make bins unique per feature."""
    borders = torch.tensor([0.0, 1.0, 1.0, 2.0, -INF, 0.0, INF])
    lengths = [4, 0, 3]
    x = torch.tensor([[NAN, 5.0, NAN], [1.0, 0.0, INF], [-0.0, 0.0, -INF], [INF, 0.0, 0.0], [-INF, 0.0, 7.0]])
    # feature 0 bins 0..4, feature 1 bin 5, feature 2 bins 6..9
    want = torch.tensor([[4, 5, 9], [1, 5, 8], [0, 5, 6], [4, 5, 7], [0, 5, 8]])
    ref, outs = _all_formulations(borders, torch.tensor(lengths), x)
    assert torch.equal(ref, want)
    for name, out in outs.items():
        assert torch.equal(out, want), name


def test_non_contiguous_input() -> None:
    borders, lens, x = _case(37, [3, 5, 2, 6], seed=3)
    xt = x.t().contiguous().t()          # same values, column-major strides
    ref = MergeBucketizedDense(borders, lens)(x)
    assert torch.equal(kernel.ModelNew(borders, lens)(xt), ref)


def test_constructor_rejects_bad_borders() -> None:
    with pytest.raises(ValueError):
        MergeBucketizedDense(torch.tensor([1.0, 0.0]), [2])         # not sorted
    with pytest.raises(ValueError):
        MergeBucketizedDense(torch.tensor([0.0, NAN]), [2])         # NaN border
    with pytest.raises(ValueError):
        kernel.ModelNew(torch.tensor([0.0, NAN]), [2])


@pytest.mark.parametrize("shape", ["default", "paper_64x2x2", "edge_odd"])
def test_spec_shapes(shape: str) -> None:
    saved = {k: getattr(spec, k) for k in ("BATCH", "FEATURES", "BORDERS", "SPECIALS")}
    try:
        for k, v in (spec.SHAPES.get(shape, {})).items():
            setattr(spec, k, v)
        torch.manual_seed(11)
        init, inputs = spec.get_init_inputs(), spec.get_inputs()
        assert torch.equal(kernel.ModelNew(*init)(*inputs), spec.Model(*init)(*inputs))
    finally:
        for k, v in saved.items():
            setattr(spec, k, v)
    assert spec.EXACT is True and "production" in spec.SHAPES


def test_tunables_are_data() -> None:
    for name, allowed in kernel.TUNABLES.items():
        assert getattr(kernel, name) in allowed, name
    assert kernel.tunables_valid({"BLOCK": kernel.BLOCK, "NUM_WARPS": kernel.NUM_WARPS,
                                  "SEARCH": kernel.SEARCH})


def _rows(kernel_us: float, base_us: float, b: int = 2048, f: int = 64, n: int = 16) -> list[dict]:
    params = f'{{"BATCH": {b}, "BORDERS": {n}, "FEATURES": {f}}}'
    return [{"status": "ok", "contender": c, "mode": m, "dtype": "float32", "params": params, "median_us": us}
            for c, us in (("triton", kernel_us), ("vectorized_eager", base_us)) for m in ("plain", "graph")]


def test_dispatcher_reads_recorded_rows() -> None:
    assert issubclass(MBDTDispatcher, ShapeDispatcher)
    win = MBDTDispatcher(rows=_rows(5.0, 13.0))
    assert win.decide({"BATCH": 2048, "FEATURES": 64, "BORDERS": 16}, "float32").use_kernel
    assert win.decide({"BATCH": 2500, "FEATURES": 64, "BORDERS": 16}, "float32").use_kernel   # nearest
    assert not win.decide({"BATCH": 64, "FEATURES": 2, "BORDERS": 2}, "float32").use_kernel   # too far
    assert not MBDTDispatcher(rows=_rows(14.0, 13.0)).decide(
        {"BATCH": 2048, "FEATURES": 64, "BORDERS": 16}, "float32").use_kernel
    assert math.isfinite(win.decide({"BATCH": 2048, "FEATURES": 64, "BORDERS": 16}, "float32").kernel_us)


def test_dispatch_module_on_cpu_falls_back_and_matches(tmp_path) -> None:
    borders, lens, x = _case(19, [3, 3, 1], seed=5)
    m = MBDTDispatch(borders, lens, results_csv=tmp_path / "missing.csv")
    assert not m.decide(x).use_kernel
    assert torch.equal(m(x), MergeBucketizedDense(borders, lens)(x))





# the kernels with the constexpr values the H200 runs use (signatures as Triton's compiler takes them)
_SM90_CASES = """[
    (k._mbdt_kernel, {"x_ptr": "*fp32", "padded_ptr": "*fp32", "counts_ptr": "*i32", "offsets_ptr": "*i64",
                      "out_ptr": "*i64", "n_elem": "i32", "F": "i32", "x_stride_b": "i32",
                      "x_stride_f": "i32", "MAXN": "constexpr", "LOG2_MAXN": "constexpr",
                      "BINARY": "constexpr", "BLOCK": "constexpr",
                      "IDX64": "constexpr", "PROBES": "constexpr"},
     {"MAXN": 32, "LOG2_MAXN": 5, "BINARY": binary, "BLOCK": 1024, "IDX64": idx64, "PROBES": False})
    for binary in (False, True) for idx64 in (False, True)
]"""


def test_kernels_compile_for_sm90() -> None:
    _compile_for_sm90("from case_studies.mbdt import kernel as k", _SM90_CASES)
