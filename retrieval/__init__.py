"""FAISS-backed knowledge base for prompt synthesis: a corpus we write (retrieval/corpus/*.md) plus
the project's own kernels, embedded with all-MiniLM-L6-v2 (or an explicit hashing fallback), queried
by diagnosis, platform and architecture. Heavy dependencies (faiss, sentence-transformers) load
lazily, on first use."""

from retrieval.code_search import CodeMatch, code_search
from retrieval.diagnosis import diagnosis_query
from retrieval.embedders import EmbedderUnavailable, get_embedder
from retrieval.retriever import Hit, RetrievalResult, Retriever
from retrieval.tags import TagError

__all__ = [
    "Retriever",
    "RetrievalResult",
    "Hit",
    "diagnosis_query",
    "code_search",
    "CodeMatch",
    "get_embedder",
    "EmbedderUnavailable",
    "TagError",
]
