"""The persisted knowledge base: parse the corpus, chunk, embed, index, and keep it in a cache
directory with a manifest (embedder, dimension, corpus hash, file checksums).

Loading re-reads the corpus (a few files) and compares its hash with the manifest; any mismatch,
missing file or checksum failure is logged with its reason and triggers a rebuild. A stale or
corrupt index is never used.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import io
import json
import logging
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

import numpy as np

from retrieval import corpus as corpus_mod
from retrieval.chunking import CHUNKER_VERSION, Chunk, chunk_all
from retrieval.corpus import Section
from retrieval.embedders import Embedder
from retrieval.index import (
    ANN_THRESHOLD,
    FORMAT_VERSION,
    MANIFEST,
    IndexInvalid,
    VectorIndex,
    atomic_write_bytes,
    read_manifest,
    sha256_file,
    verify_files,
)

log = logging.getLogger(__name__)

INDEX_FILE = "index.bin"
VECTORS_FILE = "vectors.npy"
STATE_FILE = "embedder_state.npz"


def default_cache_dir() -> Path:
    """`$WORKBENCH_CACHE/kb`, else `<repo>/.wbcache/kb` (git-ignored)."""
    base = os.environ.get("WORKBENCH_CACHE")
    return (Path(base) if base else corpus_mod.REPO_ROOT / ".wbcache") / "kb"


def _text_key(t: str) -> str:
    return hashlib.sha1(t.encode()).hexdigest()[:16]


@dataclass
class KnowledgeBase:
    embedder: Embedder
    cache_dir: Path = field(default_factory=default_cache_dir)
    corpus_dir: Path = corpus_mod.CORPUS_DIR
    root: Path = corpus_mod.REPO_ROOT
    code_globs: tuple[str, ...] = corpus_mod.CODE_SAMPLE_GLOBS
    ann_threshold: int = ANN_THRESHOLD

    sections: dict[str, Section] = field(default_factory=dict, init=False)
    chunks: list[Chunk] = field(default_factory=list, init=False)
    index: VectorIndex | None = field(default=None, init=False)
    manifest: dict[str, Any] = field(default_factory=dict, init=False)
    last_rebuild_reason: str | None = field(default=None, init=False)
    _fingerprint: tuple = field(default=(), init=False)

    @property
    def directory(self) -> Path:
        return Path(self.cache_dir) / self.embedder.name

    def _salt(self) -> str:
        return f"chunker={CHUNKER_VERSION};embedder={self.embedder.name};dim={self.embedder.dim}"

    def _read_corpus(self) -> tuple[list[Section], list[Chunk], str, tuple]:
        files = corpus_mod.source_files(self.corpus_dir, self.root, self.code_globs)
        fp = corpus_mod.fingerprint(files)
        secs = corpus_mod.load_all(self.corpus_dir, self.root, self.code_globs)
        chunks = chunk_all(secs)
        return secs, chunks, corpus_mod.corpus_hash(secs, self._salt()), fp

    @contextlib.contextmanager
    def _lock(self) -> Iterator[None]:
        self.directory.mkdir(parents=True, exist_ok=True)
        with open(self.directory / ".lock", "w") as f:
            fcntl.flock(f, fcntl.LOCK_EX)  # concurrent workers build once, the others wait and load
            try:
                yield
            finally:
                fcntl.flock(f, fcntl.LOCK_UN)

    # -- loading ---------------------------------------------------------------------------------
    def ensure(self, force: bool = False) -> str | None:
        """Load the persisted index if it is valid for the current corpus, else rebuild it.
        Returns the rebuild reason (None when the saved index was used)."""
        secs, chunks, chash, fp = self._read_corpus()
        with self._lock():
            reason = "forced rebuild" if force else None
            if reason is None:
                try:
                    self._load(chunks, chash)
                except IndexInvalid as exc:
                    reason = str(exc)
            if reason is not None:
                log.warning("knowledge base %s: rebuilding (%s)", self.directory, reason)
                self._build(secs, chunks, chash)
        self.sections = {s.id: s for s in secs}
        self.chunks = chunks
        self._fingerprint = fp
        self.last_rebuild_reason = reason
        return reason

    def changed_on_disk(self) -> bool:
        """Cheap check (stat only) whether corpus or code-sample files changed since loading."""
        files = corpus_mod.source_files(self.corpus_dir, self.root, self.code_globs)
        return corpus_mod.fingerprint(files) != self._fingerprint

    def _load(self, chunks: list[Chunk], chash: str) -> None:
        d = self.directory
        m = read_manifest(d)
        if m.get("embedder") != self.embedder.name or m.get("dim") != self.embedder.dim:
            raise IndexInvalid(
                f"index built with {m.get('embedder')}/{m.get('dim')}, not {self.embedder.name}/{self.embedder.dim}"
            )
        if m.get("corpus_hash") != chash:
            raise IndexInvalid("corpus changed since the index was built (stale index)")
        if m.get("n_chunks") != len(chunks):
            raise IndexInvalid(f"manifest lists {m.get('n_chunks')} chunks, corpus has {len(chunks)}")
        verify_files(d, m)
        idx = VectorIndex.load(d / INDEX_FILE, backend=m["backend"], kind=m["index_kind"], dim=m["dim"])
        if idx.ntotal != len(chunks):
            raise IndexInvalid(f"index holds {idx.ntotal} vectors, corpus has {len(chunks)} chunks")
        if not self.embedder.stateless:
            try:
                with np.load(d / STATE_FILE, allow_pickle=False) as z:
                    self.embedder.load_state({k: z[k] for k in z.files})
            except (OSError, ValueError) as exc:
                raise IndexInvalid(f"embedder state unreadable: {exc}") from exc
        self.index = idx
        self.manifest = m

    # -- building --------------------------------------------------------------------------------
    def _cached_vectors(self) -> dict[str, np.ndarray]:
        """Vectors of unchanged chunk texts from the previous build (stateless embedders only)."""
        if not self.embedder.stateless:
            return {}
        try:
            m = read_manifest(self.directory)
            if m.get("embedder") != self.embedder.name:
                return {}
            verify_files(self.directory, {"files": {VECTORS_FILE: m["files"][VECTORS_FILE]}})
            vecs = np.load(self.directory / VECTORS_FILE, allow_pickle=False)
            keys = m.get("embed_keys", [])
            if len(keys) != len(vecs):
                return {}
            return dict(zip(keys, vecs, strict=False))
        except (IndexInvalid, KeyError, OSError, ValueError):
            return {}

    def _build(self, secs: list[Section], chunks: list[Chunk], chash: str) -> None:
        t0 = time.perf_counter()
        if not chunks:
            raise IndexInvalid(f"the corpus under {self.corpus_dir} is empty")
        texts = [c.embed_text for c in chunks]
        keys = [_text_key(t) for t in texts]
        self.embedder.fit(texts)
        cache = self._cached_vectors()
        todo = [i for i, k in enumerate(keys) if k not in cache]
        vecs = np.zeros((len(chunks), self.embedder.dim), dtype=np.float32)
        if todo:
            new = self.embedder.embed([texts[i] for i in todo])
            for j, i in enumerate(todo):
                vecs[i] = new[j]
        for i, k in enumerate(keys):
            if k in cache:
                vecs[i] = cache[k]
        idx = VectorIndex.build(vecs, ann_threshold=self.ann_threshold)
        d = self.directory
        d.mkdir(parents=True, exist_ok=True)
        (d / MANIFEST).unlink(missing_ok=True)  # the manifest is the commit point: written last
        tmp = d / f".{INDEX_FILE}.tmp"
        idx.save(tmp)
        os.replace(tmp, d / INDEX_FILE)
        buf = io.BytesIO()
        np.save(buf, vecs)
        atomic_write_bytes(d / VECTORS_FILE, buf.getvalue())
        files = {INDEX_FILE: sha256_file(d / INDEX_FILE), VECTORS_FILE: sha256_file(d / VECTORS_FILE)}
        state = self.embedder.state()
        if state:
            buf = io.BytesIO()
            np.savez(buf, **state)
            atomic_write_bytes(d / STATE_FILE, buf.getvalue())
            files[STATE_FILE] = sha256_file(d / STATE_FILE)
        m = {
            "format_version": FORMAT_VERSION,
            "embedder": self.embedder.name,
            "dim": self.embedder.dim,
            "corpus_hash": chash,
            "n_sections": len(secs),
            "n_chunks": len(chunks),
            "index_kind": idx.kind,
            "backend": idx.backend,
            "nprobe": idx.nprobe,
            "ann_threshold": self.ann_threshold,
            "chunker_version": CHUNKER_VERSION,
            "built_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "build_s": round(time.perf_counter() - t0, 3),
            "reused_vectors": len(chunks) - len(todo),
            "sources": sorted({s.path for s in secs}),
            "files": files,
            "embed_keys": keys,
        }
        atomic_write_bytes(d / MANIFEST, json.dumps(m, indent=1).encode())
        self.index = idx
        self.manifest = m
        log.info(
            "knowledge base built: %d sections, %d chunks, %s/%s index, %.1f s (%d vectors reused)",
            len(secs),
            len(chunks),
            idx.backend,
            idx.kind,
            m["build_s"],
            m["reused_vectors"],
        )
