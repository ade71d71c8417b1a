"""Query API of the knowledge base (the search engine's universal operator consumes it).

    from retrieval import Retriever
    r = Retriever.default()
    res = r.retrieve("compile_error: arange's range must be a power of 2", platform="cuda", arch="sm_90")
    prompt += res.text

`retrieve` returns knowledge ordered general -> platform -> architecture -> code samples, filtered by
the (platform, arch) tags, one hit per section, within a token budget.
"""

from __future__ import annotations

import logging
import math
import os
import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from retrieval.corpus import CODE_SAMPLE_GLOBS, CORPUS_DIR, REPO_ROOT
from retrieval.embedders import Embedder, get_embedder
from retrieval.index import ANN_THRESHOLD
from retrieval.store import KnowledgeBase, default_cache_dir
from retrieval.tags import LEVELS, TagFilter

log = logging.getLogger(__name__)

# Selection of `retrieve`: at most this many sections per level, ...
LEVEL_QUOTA = {"general": 2, "platform": 2, "architecture": 2, "code_sample": 1}
# ... and only sections scoring at least REL_FLOOR x the best score (keeps weak matches out of the
# prompt). Swept on the labelled set: 0.6 put an expected section into the prompt for 96.6% of
# queries (MiniLM) / 91.4% (hashing) at ~750 / ~300 tokens; 0.75 gave 93.1% / 86.2%.
REL_FLOOR = 0.6
CHARS_PER_TOKEN = 4  # the usual estimate for English and code with BPE tokenizers


def estimate_tokens(text: str) -> int:
    return math.ceil(len(text) / CHARS_PER_TOKEN)


@dataclass
class Hit:
    title: str
    tags: dict[str, Any]
    score: float
    text: str
    path: str
    section_id: str = ""
    level: str = ""

    def render(self) -> str:
        t = self.tags
        where = f"{t['level']}, platform {t['platform']}, arch {'/'.join(t['arch'])}"
        return f"### {self.title}\n[{where}; source {self.path}]\n{self.text.strip()}\n"


@dataclass
class RetrievalResult:
    hits: list[Hit]
    text: str
    query: str = ""
    platform: str | None = None
    arch: str | None = None
    tokens: int = 0
    embedder: str = ""
    dropped: list[str] = field(default_factory=list)  # section ids left out by the budget


class Retriever:
    """Knowledge-base queries. Builds or loads the index on first use; re-indexes when the corpus or
    the project's kernels change on disk (checked with a stat per query)."""

    _default: "Retriever | None" = None
    _default_lock = threading.Lock()

    def __init__(
        self,
        embedder: str | Embedder = "auto",
        *,
        cache_dir: Path | str | None = None,
        corpus_dir: Path = CORPUS_DIR,
        root: Path = REPO_ROOT,
        code_globs: tuple[str, ...] = CODE_SAMPLE_GLOBS,
        ann_threshold: int = ANN_THRESHOLD,
        auto_refresh: bool = True,
        query_cache_size: int = 256,
    ) -> None:
        self.embedder = get_embedder(embedder) if isinstance(embedder, str) else embedder
        self.kb = KnowledgeBase(
            self.embedder,
            Path(cache_dir) if cache_dir else default_cache_dir(),
            Path(corpus_dir),
            Path(root),
            tuple(code_globs),
            ann_threshold,
        )
        self.auto_refresh = auto_refresh
        self._lock = threading.RLock()
        self._ready = False
        # Query vectors by text: a search repeats the same diagnosis (one compile error, many
        # candidates), and the embedding is most of a query's cost (~40 ms MiniLM vs ~0.1 ms search).
        self._qcache: OrderedDict[str, Any] = OrderedDict()
        self._qcache_size = query_cache_size

    @classmethod
    def default(cls) -> "Retriever":
        """The process-wide retriever (embedder from $WORKBENCH_KB_EMBEDDER: minilm, hashing or auto)."""
        with cls._default_lock:
            if cls._default is None:
                cls._default = cls(os.environ.get("WORKBENCH_KB_EMBEDDER", "auto"))
            return cls._default

    # -- index lifecycle ---------------------------------------------------------------------------
    def build(self, force: bool = False) -> dict[str, Any]:
        with self._lock:
            self.kb.ensure(force=force)
            self._qcache.clear()  # a refitted embedder (hashing IDF) makes old query vectors wrong
            self._ready = True
            return self.info()

    def _ensure(self) -> None:
        with self._lock:
            if not self._ready:
                self.kb.ensure()
                self._ready = True
                self._qcache.clear()
            elif self.auto_refresh and self.kb.changed_on_disk():
                log.info("knowledge base sources changed on disk: re-indexing")
                self.kb.ensure()
                self._qcache.clear()

    def info(self) -> dict[str, Any]:
        m = self.kb.manifest
        return {
            "embedder": self.embedder.name,
            "fallback_reason": self.embedder.fallback_reason,
            "dim": self.embedder.dim,
            "backend": m.get("backend"),
            "index_kind": m.get("index_kind"),
            "n_sections": m.get("n_sections"),
            "n_chunks": m.get("n_chunks"),
            "corpus_hash": m.get("corpus_hash"),
            "directory": str(self.kb.directory),
            "last_rebuild_reason": self.kb.last_rebuild_reason,
        }

    # -- queries -----------------------------------------------------------------------------------
    def query(
        self,
        text: str,
        top_k: int = 5,
        platform: str | None = None,
        arch: str | None = None,
        level: str | None = None,
    ) -> list[Hit]:
        """The `top_k` best sections for `text` among those the (platform, arch) tags allow."""
        if not isinstance(text, str) or not text.strip():
            raise ValueError("empty query: describe the failure or the bottleneck in words")
        if level is not None and level not in LEVELS:
            raise ValueError(f"unknown level {level!r}: expected one of {LEVELS}")
        filt = TagFilter.make(platform, arch)
        self._ensure()
        qv = self._embed_query(text)
        with self._lock:  # a re-index swaps index and chunks together; never search half-swapped
            return self._search_vec(qv, top_k, filt, level)

    def _embed_query(self, text: str) -> Any:
        with self._lock:
            if text in self._qcache:
                self._qcache.move_to_end(text)
                return self._qcache[text]
        qv = self.embedder.embed([text])
        if self._qcache_size > 0:
            with self._lock:
                self._qcache[text] = qv
                if len(self._qcache) > self._qcache_size:
                    self._qcache.popitem(last=False)
        return qv

    def _search_vec(self, qv, top_k: int, filt: TagFilter, level: str | None = None) -> list[Hit]:
        kb = self.kb
        n = kb.index.ntotal
        k = min(n, max(8 * top_k, 64))
        while True:
            scores, ids = kb.index.search(qv, k)
            best: dict[str, Hit] = {}
            for s, i in zip(scores[0], ids[0], strict=False):
                if i < 0:
                    continue
                ch = kb.chunks[i]
                sec = kb.sections[ch.section_id]
                if (level and sec.level != level) or not filt.accepts(sec.platform, sec.archs):
                    continue
                if sec.id in best:
                    continue  # scores arrive sorted: the first chunk of a section is its best
                text = ch.text if sec.kind == "code" else sec.text
                best[sec.id] = Hit(sec.title, sec.tags, float(s), text, sec.path, sec.id, sec.level)
            if len(best) >= top_k or k >= n:
                return sorted(best.values(), key=lambda h: -h.score)[:top_k]
            k = min(n, k * 4)

    def retrieve(self, diagnosis: str, *, platform: str, arch: str, budget_tokens: int = 1200) -> RetrievalResult:
        """Knowledge for a prompt: the best sections for `diagnosis` on (platform, arch), at most
        LEVEL_QUOTA per level and REL_FLOOR x the best score, fitted greedily (best first) into
        `budget_tokens`, then ordered general -> platform -> architecture -> code samples."""
        if budget_tokens <= 0:
            raise ValueError(f"budget_tokens must be positive, got {budget_tokens}")
        cands = self.query(diagnosis, top_k=24, platform=platform, arch=arch)
        filt = TagFilter.make(platform, arch)
        chosen: list[Hit] = []
        dropped: list[str] = []
        used = 0
        per_level = dict.fromkeys(LEVELS, 0)
        seen_text: set[int] = set()
        top = cands[0].score if cands else 0.0
        for h in cands:
            if h.score < REL_FLOOR * top or per_level[h.level] >= LEVEL_QUOTA[h.level]:
                continue
            key = hash(h.text.strip())
            if key in seen_text:
                continue  # the same text reachable from two sections (a kernel copied into examples/)
            cost = estimate_tokens(h.render())
            sec = self.kb.sections.get(h.section_id)
            if h.level == "code_sample" and sec is not None and sec.text != h.text:
                # A whole example file (kernel + launch wrapper) teaches more than the matched
                # function alone; use it when it fits what is left of the budget.
                whole = Hit(h.title, h.tags, h.score, sec.text, h.path, h.section_id, h.level)
                if used + estimate_tokens(whole.render()) <= budget_tokens:
                    h, cost = whole, estimate_tokens(whole.render())
            if used + cost > budget_tokens:
                if chosen:
                    dropped.append(h.section_id)
                    continue
                # The single best hit is always given, cut to the budget, rather than nothing.
                room = max(0, budget_tokens - estimate_tokens(h.render()) + estimate_tokens(h.text) - 4)
                h = Hit(
                    h.title,
                    h.tags,
                    h.score,
                    h.text[: room * CHARS_PER_TOKEN].rstrip() + "\n[...]",
                    h.path,
                    h.section_id,
                    h.level,
                )
                cost = estimate_tokens(h.render())
            chosen.append(h)
            seen_text.add(key)
            per_level[h.level] += 1
            used += cost
        order = {lv: i for i, lv in enumerate(LEVELS)}
        chosen.sort(key=lambda h: (order[h.level], -h.score))
        text = "\n".join(h.render() for h in chosen)
        return RetrievalResult(
            hits=chosen,
            text=text,
            query=diagnosis,
            platform=filt.platform,
            arch=filt.arch,
            tokens=estimate_tokens(text) if text else 0,
            embedder=self.embedder.name,
            dropped=dropped,
        )
