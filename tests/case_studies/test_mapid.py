"""MapIdTransform on the CPU interpreter: the three kernel variants (bucket, hash, bsearch) and the
vectorized formulation agree bit for bit with the paper's four-operator chain, including unknown
ids, duplicated vocabulary entries, extreme int64 values and empty batches."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from case_studies.mapid import kernel, spec
from case_studies.mapid.dispatch import MapIdDispatch, MapIdDispatcher
from case_studies.mapid.reference import MapIdTransform, MapIdTransformVectorized
from tests.case_studies.sm90 import compile_for_sm90 as _compile_for_sm90

I64_MIN, I64_MAX = -(2**63), 2**63 - 1
VARIANTS = ["bucket", "hash", "bsearch"]


def _ids(vocab: torch.Tensor, n: int, unknown_rate: float, seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    known = vocab[torch.randint(0, vocab.numel(), (n,), generator=g)]
    unknown = torch.randint(-(2**62), 2**62, (n,), generator=g, dtype=torch.int64) * 2 + 1
    return torch.where(torch.rand(n, generator=g) < unknown_rate, unknown, known)


def _check_all(vocab: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
    ref = MapIdTransform(vocab)(ids)
    assert ref.dtype == torch.int64 and ref.shape == ids.shape
    assert torch.equal(MapIdTransformVectorized(vocab)(ids), ref)
    for v in VARIANTS:
        out = kernel.MapIdKernel(vocab, variant=v)(ids)
        assert out.dtype == ref.dtype and out.shape == ref.shape, v
        assert torch.equal(out, ref), f"{v}: {int((out != ref).sum())} of {ref.numel()} differ"
    return ref


@pytest.mark.parametrize("vocab_size,n,unknown", [
    (1, 5, 0.5), (2, 127, 0.5), (5, 123, 0.0), (1000, 257, 0.1), (3001, 513, 0.5),
    (777, 301, 1.0),                     # all unknown
    (1000, 0, 0.1),                      # empty batch
])
def test_bit_identical(vocab_size: int, n: int, unknown: float) -> None:
    vocab = spec.make_vocab(vocab_size)
    ref = _check_all(vocab, _ids(vocab, n, unknown, seed=vocab_size + n))
    if unknown == 1.0:
        assert not ref.any()
    if unknown == 0.0:
        assert bool((ref > 0).all())


def test_duplicates_negative_and_extreme_ids() -> None:
    """A repeated vocabulary value maps to its first position + 1 (searchsorted's left side);
    INT64_MIN / INT64_MAX and negative ids are ordinary ids."""
    vocab = torch.tensor([I64_MIN, -5, -5, 0, 3, 3, 3, 9, I64_MAX], dtype=torch.int64)
    ids = torch.tensor([I64_MIN, -5, 0, 3, 9, I64_MAX, 1, -6, I64_MAX - 1, I64_MIN + 1, 3, 4],
                       dtype=torch.int64)
    want = torch.tensor([1, 2, 4, 5, 8, 9, 0, 0, 0, 0, 5, 0])
    assert torch.equal(_check_all(vocab, ids), want)
    # without INT64_MAX in the table: the bsearch padding value must not count as a hit
    v2 = vocab[:-1].clone()
    assert torch.equal(_check_all(v2, ids), torch.where(ids == I64_MAX, 0, want))


def test_clustered_vocabulary() -> None:
    """Consecutive ids (a dense id space) stress the hash layouts' clustering."""
    vocab = torch.arange(-300, 1700, 2, dtype=torch.int64)
    ids = torch.arange(-310, 1720, 1, dtype=torch.int64)
    _check_all(vocab, ids)
    for spread in (1, 2):
        m = kernel.MapIdKernel(vocab, variant="bucket", spread=spread)
        assert torch.equal(m(ids), MapIdTransform(vocab)(ids))


def test_hash_structures_hold_every_key() -> None:
    vocab = spec.make_vocab(2000)
    table, log2m, _ = kernel.build_hash_table(vocab)
    t = table.view(-1, 2).numpy()
    assert (t[:, 1] != 0).sum() == vocab.numel() and vocab.numel() <= (1 << log2m) // 2
    directory, entries, log2b, width = kernel.build_buckets(vocab)
    counts = np.diff(directory.numpy())
    assert counts.sum() == vocab.numel() and counts.max() <= width
    e = entries.view(-1, 2).numpy()
    slots = kernel.hash_slots_np(e[:, 0], log2b)
    assert (np.repeat(np.arange(1 << log2b), counts) == slots).all()     # entries grouped by bucket


def test_constructor_rejects_bad_vocab() -> None:
    with pytest.raises(ValueError):
        MapIdTransform(torch.tensor([3, 1], dtype=torch.int64))
    with pytest.raises(ValueError):
        MapIdTransform(torch.empty(0, dtype=torch.int64))
    with pytest.raises(ValueError):
        kernel.ModelNew(torch.empty(0, dtype=torch.int64))


@pytest.mark.parametrize("shape", ["default", "all_unknown", "all_known"])
def test_spec_shapes(shape: str) -> None:
    saved = {k: getattr(spec, k) for k in ("NUM_SAMPLES", "IDS_PER_SAMPLE", "VOCAB_SIZE", "UNKNOWN_RATE")}
    try:
        for k, v in spec.SHAPES.get(shape, {}).items():
            setattr(spec, k, v)
        torch.manual_seed(3)
        init = spec.get_init_inputs()
        torch.manual_seed(4)
        inputs = spec.get_inputs()
        assert torch.equal(kernel.ModelNew(*init)(*inputs), spec.Model(*init)(*inputs))
    finally:
        for k, v in saved.items():
            setattr(spec, k, v)
    assert spec.EXACT is True and "production" in spec.SHAPES


def test_tunables_are_data() -> None:
    for name, allowed in kernel.TUNABLES.items():
        assert getattr(kernel, name) in allowed, name
    assert kernel.tunables_valid({"BLOCK": kernel.BLOCK, "NUM_WARPS": kernel.NUM_WARPS})


def test_dispatcher_merges_unknown_rates_conservatively(tmp_path) -> None:
    def rows(rate_us: list[tuple[float, float]]) -> list[dict]:
        out = []
        for i, (k_us, b_us) in enumerate(rate_us):
            params = f'{{"NUM_IDS": 200000, "UNKNOWN_RATE": 0.{i}, "VOCAB_SIZE": 1000000}}'
            for c, us in (("triton_bucket", k_us), ("eager", b_us)):
                for m in ("plain", "graph"):
                    out.append({"status": "ok", "contender": c, "mode": m, "dtype": "int64", "params": params,
                                "median_us": us})
        return out
    key = {"VOCAB_SIZE": 1_000_000, "NUM_IDS": 200_000}
    assert MapIdDispatcher(rows=rows([(8.0, 30.0), (9.0, 31.0)])).decide(key, "int64").use_kernel
    # one rate where the kernel loses: the slowest kernel vs the fastest baseline decides
    assert not MapIdDispatcher(rows=rows([(8.0, 30.0), (31.0, 32.0)])).decide(key, "int64").use_kernel
    vocab = spec.make_vocab(100)
    m = MapIdDispatch(vocab, results_csv=tmp_path / "none.csv")
    ids = _ids(vocab, 50, 0.3, seed=1)
    assert not m.decide(ids).use_kernel           # CPU tensors: PyTorch
    assert torch.equal(m(ids), MapIdTransform(vocab)(ids))





# the kernels with the constexpr values the H200 runs use (signatures as Triton's compiler takes them)
_SM90_CASES = """[
    (k._mapid_bsearch_kernel, {"ids_ptr": "*i64", "vocab_ptr": "*i64", "out_ptr": "*i64", "n": "i32",
                               "V": "i32",
                               "LOG2P": "constexpr", "BLOCK": "constexpr", "PROBES": "constexpr"},
     {"LOG2P": 17, "BLOCK": 256, "PROBES": False}),
    (k._mapid_bucket_kernel, {"ids_ptr": "*i64", "dir_ptr": "*i32", "entries_ptr": "*i64", "out_ptr": "*i64",
                              "n": "i32", "LOG2B": "constexpr", "W": "constexpr", "BLOCK": "constexpr",
                              "PROBES": "constexpr"}, {"LOG2B": 21, "W": 8, "BLOCK": 256, "PROBES": False}),
    (k._mapid_hash_kernel, {"ids_ptr": "*i64", "table_ptr": "*i64", "out_ptr": "*i64", "n": "i32",
                            "LOG2M": "constexpr", "W": "constexpr", "BLOCK": "constexpr",
                            "PROBES": "constexpr"},
     {"LOG2M": 21, "W": 2, "BLOCK": 256, "PROBES": False}),
]"""


def test_kernels_compile_for_sm90() -> None:
    _compile_for_sm90("from case_studies.mapid import kernel as k", _SM90_CASES)
