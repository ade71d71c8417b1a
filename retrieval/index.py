"""Vector index over chunk embeddings: faiss exact inner product for small corpora, IVF above a
size threshold, NumPy exact search when faiss is absent (the GPU machine has no faiss). Persisted
with a manifest; `load` refuses (raises IndexInvalid with the reason) anything stale or corrupt.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

log = logging.getLogger(__name__)

FORMAT_VERSION = 1
ANN_THRESHOLD = 20_000  # below: exact search (a few ms at most); above: IVF
MANIFEST = "manifest.json"


class IndexInvalid(RuntimeError):
    """A persisted index cannot be used (missing, stale, corrupt); the message says why."""


def _faiss():
    try:
        import faiss
    except ImportError:
        return None
    return faiss


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


@dataclass
class VectorIndex:
    """Inner-product search over L2-normalized vectors (so scores are cosine similarities)."""

    kind: str  # "flat" | "ivf"
    backend: str  # "faiss" | "numpy"
    dim: int
    ntotal: int
    _impl: Any = None
    nprobe: int = 0

    @classmethod
    def build(
        cls,
        vectors: np.ndarray,
        *,
        kind: str = "auto",
        ann_threshold: int = ANN_THRESHOLD,
        backend: str = "auto",
        nlist: int | None = None,
        nprobe: int | None = None,
    ) -> "VectorIndex":
        vectors = np.ascontiguousarray(vectors, dtype=np.float32)
        n, d = vectors.shape
        faiss = _faiss() if backend in ("auto", "faiss") else None
        if backend == "faiss" and faiss is None:
            raise ImportError("faiss-cpu is not installed (pip install 'kernel-workbench[retrieval]')")
        if kind == "auto":
            kind = "ivf" if (n >= ann_threshold and faiss is not None) else "flat"
        if faiss is None:
            if kind != "flat":
                raise ImportError("approximate (IVF) search needs faiss-cpu")
            log.info("faiss not installed: exact NumPy search over %d vectors", n)
            return cls(kind="flat", backend="numpy", dim=d, ntotal=n, _impl=vectors)
        if kind == "flat":
            idx = faiss.IndexFlatIP(d)
            idx.add(vectors)
            return cls(kind="flat", backend="faiss", dim=d, ntotal=n, _impl=idx)
        if kind != "ivf":
            raise ValueError(f"unknown index kind {kind!r}")
        # ~4 sqrt(n) lists is the usual IVF rule; nprobe 16 measured > 0.95 recall@10 vs exact
        # on the synthetic 100k corpus (benchmarks/retrieval_latency.py).
        nlist = nlist or max(16, int(4 * math.sqrt(n)))
        quant = faiss.IndexFlatIP(d)
        idx = faiss.IndexIVFFlat(quant, d, nlist, faiss.METRIC_INNER_PRODUCT)
        train = vectors if n <= 64 * nlist else vectors[np.random.default_rng(0).choice(n, 64 * nlist, replace=False)]
        idx.train(train)
        idx.add(vectors)
        idx.nprobe = nprobe or 16
        return cls(kind="ivf", backend="faiss", dim=d, ntotal=n, _impl=idx, nprobe=idx.nprobe)

    def search(self, queries: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        q = np.ascontiguousarray(queries.reshape(-1, self.dim), dtype=np.float32)
        k = max(1, min(k, self.ntotal))
        if self.backend == "numpy":
            scores = q @ self._impl.T
            part = np.argpartition(-scores, kth=min(k, scores.shape[1]) - 1, axis=1)[:, :k]
            top = np.take_along_axis(scores, part, axis=1)
            order = np.argsort(-top, axis=1)
            return np.take_along_axis(top, order, axis=1), np.take_along_axis(part, order, axis=1)
        faiss = _faiss()
        if q.shape[0] > 4:
            return self._impl.search(q, k)
        # Single queries run on one OpenMP thread: on the loaded 2-core machines a 2-thread flat
        # search over 100k vectors measured ~170 ms against ~15 ms single-threaded.
        threads = faiss.omp_get_max_threads()
        faiss.omp_set_num_threads(1)
        try:
            return self._impl.search(q, k)
        finally:
            faiss.omp_set_num_threads(threads)

    def save(self, path: Path) -> None:
        if self.backend == "numpy":
            with open(path, "wb") as f:
                np.save(f, self._impl)
        else:
            _faiss().write_index(self._impl, str(path))

    @classmethod
    def load(cls, path: Path, *, backend: str, kind: str, dim: int) -> "VectorIndex":
        if backend == "numpy":
            arr = np.load(path, allow_pickle=False)
            if arr.ndim != 2 or arr.shape[1] != dim:
                raise IndexInvalid(f"vector file {path} has shape {arr.shape}, expected [n, {dim}]")
            return cls(kind="flat", backend="numpy", dim=dim, ntotal=arr.shape[0], _impl=arr)
        faiss = _faiss()
        if faiss is None:
            raise IndexInvalid("the saved index is a faiss index but faiss-cpu is not installed")
        try:
            idx = faiss.read_index(str(path))
        except RuntimeError as exc:
            raise IndexInvalid(f"faiss could not read {path}: {str(exc).splitlines()[0][:200]}") from exc
        if idx.d != dim:
            raise IndexInvalid(f"index dimension {idx.d} != manifest dimension {dim}")
        nprobe = getattr(idx, "nprobe", 0) if kind == "ivf" else 0
        return cls(kind=kind, backend="faiss", dim=dim, ntotal=idx.ntotal, _impl=idx, nprobe=nprobe)


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Write via a temporary file and rename, so a reader never sees half a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def read_manifest(directory: Path) -> dict[str, Any]:
    p = directory / MANIFEST
    if not p.is_file():
        raise IndexInvalid(f"no manifest in {directory} (index never built)")
    try:
        m = json.loads(p.read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise IndexInvalid(f"manifest {p} is unreadable: {exc}") from exc
    if not isinstance(m, dict) or m.get("format_version") != FORMAT_VERSION:
        raise IndexInvalid(
            f"manifest {p} has format {m.get('format_version') if isinstance(m, dict) else '?'}, "
            f"expected {FORMAT_VERSION}"
        )
    return m


def verify_files(directory: Path, manifest: dict[str, Any]) -> None:
    """Check every file the manifest lists against its recorded sha256."""
    for name, digest in manifest.get("files", {}).items():
        p = directory / name
        if not p.is_file():
            raise IndexInvalid(f"index file {p} is missing")
        actual = sha256_file(p)
        if actual != digest:
            raise IndexInvalid(f"index file {p} is corrupt (sha256 {actual[:12]} != manifest {digest[:12]})")
