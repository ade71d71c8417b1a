"""Persistence: manifest, reuse, stale and corrupt detection, re-indexing of new kernels, ANN."""

from __future__ import annotations

import json
import logging

import numpy as np
import pytest

from retrieval.index import VectorIndex
from tests.retrieval.conftest import make_retriever


def test_build_writes_manifest_and_second_load_reuses_it(project):
    r = make_retriever(project)
    info = r.build()
    assert "never built" in info["last_rebuild_reason"]
    m = json.loads((r.kb.directory / "manifest.json").read_text())
    assert m["embedder"] == "hashing-tfidf-2048" and m["dim"] == 2048
    assert m["n_sections"] == 6 and len(m["corpus_hash"]) == 64 and m["index_kind"] == "flat"
    r2 = make_retriever(project)
    assert r2.build()["last_rebuild_reason"] is None  # valid index: loaded, not rebuilt
    assert [h.section_id for h in r2.query("tensor memory accelerator tiles", 1)] == ["t-tma"]


def test_stale_index_is_rebuilt_never_used(project, caplog):
    make_retriever(project).build()
    with open(project / "corpus" / "small.md", "a") as f:
        f.write(
            "\n## Atomics need masks\n<!-- id: t-atomic | level: general | platform: any | arch: any "
            "| topic: atomics -->\ntl.atomic_add with a mask on tail lanes.\n"
        )
    r = make_retriever(project)
    with caplog.at_level(logging.WARNING):
        info = r.build()
    assert "stale" in info["last_rebuild_reason"] and "rebuilding" in caplog.text
    assert r.query("atomic_add tail lanes", 1)[0].section_id == "t-atomic"


@pytest.mark.parametrize("damage", ["index", "manifest", "state", "missing"])
def test_corrupt_index_is_detected_and_rebuilt(project, damage):
    r = make_retriever(project)
    r.build()
    d = r.kb.directory
    if damage == "index":
        raw = bytearray((d / "index.bin").read_bytes())
        raw[len(raw) // 2] ^= 0xFF
        (d / "index.bin").write_bytes(bytes(raw))
    elif damage == "manifest":
        (d / "manifest.json").write_text("{ not json")
    elif damage == "state":
        (d / "embedder_state.npz").write_bytes(b"garbage")
    else:
        (d / "index.bin").unlink()
    r2 = make_retriever(project)
    reason = r2.build()["last_rebuild_reason"]
    assert reason and any(w in reason for w in ("corrupt", "unreadable", "missing")), reason
    assert r2.query("mask offs tail block", 1)[0].section_id == "t-mask"
    assert make_retriever(project).build()["last_rebuild_reason"] is None  # repaired on disk


def test_manifest_from_another_embedder_is_refused(project):
    r = make_retriever(project)
    r.build()
    p = r.kb.directory / "manifest.json"
    m = json.loads(p.read_text())
    m["dim"] = 384
    p.write_text(json.dumps(m))
    assert "not hashing-tfidf-2048/2048" in make_retriever(project).build()["last_rebuild_reason"]


def test_new_kernel_is_indexed_on_next_query(project):
    r = make_retriever(project)
    r.build()
    assert all(not h.section_id.startswith("code:case_studies/hist") for h in r.query("histogram", 10))
    k = project / "case_studies" / "hist"
    k.mkdir()
    (k / "kernel.py").write_text(
        '"""Histogram with atomic adds."""\nimport triton\nimport triton.language as tl\n\n'
        "@triton.jit\ndef hist_kernel(x, h, n, B: tl.constexpr):\n"
        "    o = tl.arange(0, B)\n    tl.atomic_add(h + tl.load(x + o, mask=o < n), 1, mask=o < n)\n"
    )
    hits = r.query("histogram atomic add kernel", 2, level="code_sample")
    assert hits[0].section_id == "code:case_studies/hist/kernel.py"
    assert "stale" in r.info()["last_rebuild_reason"]


def test_ivf_above_threshold_matches_exact_search():
    rng = np.random.default_rng(0)
    centers = rng.normal(size=(50, 64)).astype(np.float32)
    x = centers[rng.integers(0, 50, 5000)] + 0.3 * rng.normal(size=(5000, 64)).astype(np.float32)
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    q = x[rng.choice(5000, 50, replace=False)] + 0.05 * rng.normal(size=(50, 64)).astype(np.float32)
    exact = VectorIndex.build(x, kind="flat")
    ann = VectorIndex.build(x, ann_threshold=1000)
    numpy_exact = VectorIndex.build(x, backend="numpy")
    assert (exact.kind, ann.kind, numpy_exact.backend) == ("flat", "ivf", "numpy")
    _, ie = exact.search(q, 10)
    _, ia = ann.search(q, 10)
    se, ine = numpy_exact.search(q, 10)
    assert np.array_equal(ie[:, 0], ine[:, 0])
    recall = np.mean([len(set(a) & set(b)) / 10 for a, b in zip(ia, ie, strict=False)])
    assert recall >= 0.9, recall
