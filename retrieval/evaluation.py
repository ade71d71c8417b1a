"""Retrieval quality on the labelled set retrieval/data/labelled_queries.jsonl: each line is a
(diagnosis, platform, arch) with the section ids a good answer contains. Metrics: recall@k (some
expected section among the first k hits of `Retriever.query`), MRR (reciprocal rank of the first
expected section, 0 beyond `depth`), and whether `retrieve` (the prompt text) includes one."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

LABELLED_SET = Path(__file__).resolve().parent / "data" / "labelled_queries.jsonl"


@dataclass
class LabelledQuery:
    id: str
    diagnosis: str
    platform: str
    arch: str
    expected: list[str]


@dataclass
class QueryOutcome:
    id: str
    rank: int | None  # 1-based rank of the first expected section, None if not in depth
    top3: list[str]
    in_prompt: bool


def load_labelled(path: Path = LABELLED_SET) -> list[LabelledQuery]:
    out = []
    for n, line in enumerate(path.read_text().splitlines(), 1):
        if line.strip():
            try:
                out.append(LabelledQuery(**json.loads(line)))
            except (TypeError, json.JSONDecodeError) as exc:
                raise ValueError(f"{path}:{n}: bad labelled query: {exc}") from exc
    return out


def evaluate(retriever: Any, queries: list[LabelledQuery] | None = None, depth: int = 10) -> dict[str, Any]:
    queries = queries if queries is not None else load_labelled()
    retriever.build()
    known = set(retriever.kb.sections)
    missing = sorted({e for q in queries for e in q.expected} - known)
    if missing:
        raise ValueError(f"labelled set names sections absent from the corpus: {missing}")
    outcomes: list[QueryOutcome] = []
    for q in queries:
        hits = retriever.query(q.diagnosis, top_k=depth, platform=q.platform, arch=q.arch)
        ids = [h.section_id for h in hits]
        rank = next((i + 1 for i, s in enumerate(ids) if s in q.expected), None)
        res = retriever.retrieve(q.diagnosis, platform=q.platform, arch=q.arch)
        in_prompt = any(h.section_id in q.expected for h in res.hits)
        outcomes.append(QueryOutcome(q.id, rank, ids[:3], in_prompt))
    n = len(outcomes)
    return {
        "n_queries": n,
        "recall_at_1": sum(o.rank is not None and o.rank <= 1 for o in outcomes) / n,
        "recall_at_3": sum(o.rank is not None and o.rank <= 3 for o in outcomes) / n,
        "recall_at_5": sum(o.rank is not None and o.rank <= 5 for o in outcomes) / n,
        "mrr": sum(1.0 / o.rank for o in outcomes if o.rank) / n,
        "prompt_coverage": sum(o.in_prompt for o in outcomes) / n,
        "depth": depth,
        "outcomes": [asdict(o) for o in outcomes],
    }
