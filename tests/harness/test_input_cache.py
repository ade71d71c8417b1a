"""The shared input cache: a hit is indistinguishable from generating, only the trusted process writes,
and anything odd in the cache is a miss."""
from __future__ import annotations

from pathlib import Path

import pytest
import torch

from workbench.harness import Harness
from workbench.harness import plan as _plan
from workbench.harness.input_cache import InputCache, entry_key
from workbench.result import Status
from workbench.spec import load_spec

ROOT = Path(__file__).resolve().parents[2]
SPEC = ROOT / "examples" / "row_softmax" / "spec.py"


def test_hit_equals_miss_and_restores_the_rng(tmp_path: Path) -> None:
    spec = load_spec(SPEC)
    writer, reader = InputCache(True, tmp_path), InputCache(False, tmp_path)
    miss = _plan.build_inputs(spec, 7, "cpu", writer)
    after_miss = torch.rand(3)
    assert writer.misses == 1 and len(list(tmp_path.glob("*.pt"))) == 1
    hit = _plan.build_inputs(spec, 7, "cpu", reader)
    after_hit = torch.rand(3)
    assert reader.hits == 1
    assert all(torch.equal(a, b) for a, b in zip(miss, hit, strict=True))
    assert torch.equal(after_miss, after_hit)  # the RNG is where get_inputs() left it
    plain = _plan.build_inputs(spec, 7, "cpu")
    assert all(torch.equal(a, b) for a, b in zip(miss, plain, strict=True))


def test_key_covers_seed_and_constants(tmp_path: Path) -> None:
    spec = load_spec(SPEC)
    k = entry_key(spec, 1)
    assert entry_key(spec, 2) != k
    spec.apply({"M": 3})
    assert entry_key(spec, 1) != k


def test_reader_never_writes_and_garbage_is_a_miss(tmp_path: Path) -> None:
    spec = load_spec(SPEC)
    reader = InputCache(False, tmp_path)
    _plan.build_inputs(spec, 3, "cpu", reader)
    assert list(tmp_path.iterdir()) == []
    (tmp_path / (entry_key(spec, 3) + ".pt")).write_bytes(b"not a tensor file")
    assert reader.get(spec, 3) is None and reader.misses == 2


def test_bounded(tmp_path: Path) -> None:
    spec = load_spec(SPEC)
    small = InputCache(True, tmp_path, max_mb=0.001)  # 1 KB: row_softmax's inputs do not fit
    _plan.build_inputs(spec, 3, "cpu", small)
    assert list(tmp_path.glob("*.pt")) == []


def test_harness_fills_the_cache_and_jobs_never_share_seeds(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every job draws fresh seeds (a second candidate must not answer from the first one's outputs), so
    two jobs in one server store disjoint entries: the cache can only serve a job's own sets."""
    monkeypatch.setenv("WB_INPUT_CACHE", str(tmp_path))
    # sets of at least 1 MB: only those go through the cache (`job_pipeline.CACHE_MIN_SET_BYTES`; trials never)
    wide = {"N": 7100}  # 37 x 7100 fp32 = 1.05 MB
    with Harness(device="cpu") as h:
        first = h.evaluate(SPEC, ROOT / "examples" / "row_softmax" / "candidate.py", trials=2, overrides=wide)
        entries = {p.name for p in tmp_path.glob("*.pt")}
        second = h.evaluate(SPEC, ROOT / "examples" / "row_softmax" / "candidate.py", trials=2, overrides=wide)
    assert first.status == second.status == Status.PASSED, (first.error, second.error)
    assert entries, "the reference process stored the inputs"
    new = {p.name for p in tmp_path.glob("*.pt")} - entries
    assert new, "the second job's inputs came from the first job's seeds"
