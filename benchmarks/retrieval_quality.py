"""Retrieval quality on the labelled set for MiniLM and the hashing fallback.

    .venv/bin/python benchmarks/retrieval_quality.py [--embedders minilm hashing]

Writes results/retrieval/quality.json (per-embedder recall@1/3/5, MRR, prompt coverage, with
provenance and corpus hash) and results/retrieval/quality_per_query.csv (rank of the first expected
section per query and embedder). The index is built in a temporary cache so the run is independent
of .wbcache.
"""

from __future__ import annotations

import csv
import logging
import os
import sys
import tempfile
import time
from pathlib import Path

if __package__ in (None, ""):   # run as a script: the repository root on the path, as with PYTHONPATH=.
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from benchmarks import common  # noqa: E402
from retrieval import Retriever  # noqa: E402
from retrieval.evaluation import LABELLED_SET, evaluate, load_labelled  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    ap = common.parser(__doc__, out_default="results/retrieval")
    ap.add_argument("--embedders", nargs="+", default=["minilm", "hashing"])
    args = ap.parse_args(argv)
    common.setup_logging(logging.WARNING)
    queries = load_labelled()
    summary: dict = {
        "provenance": common.provenance(args.commit),
        "labelled_set": str(LABELLED_SET.relative_to(common.REPO)),
        "n_queries": len(queries),
        "metric_notes": (
            "recall@k: an expected section among the first k sections of Retriever.query "
            "(platform/arch filtered); mrr: mean 1/rank of the first expected section within "
            "depth 10 (0 if absent); prompt_coverage: retrieve() text (1200-token budget) "
            "contains an expected section"
        ),
        "embedders": {},
    }
    rows: dict[str, dict] = {
        q.id: {"id": q.id, "platform": q.platform, "arch": q.arch, "expected": " ".join(q.expected)} for q in queries
    }
    with tempfile.TemporaryDirectory() as cache:
        for name in args.embedders:
            t0 = time.perf_counter()
            r = Retriever(name, cache_dir=cache)
            m = evaluate(r, queries)
            info = r.info()  # after the run: the corpus may have been re-indexed while kernels changed
            outcomes = m.pop("outcomes")
            m.update(
                embedder=info["embedder"],
                dim=info["dim"],
                n_sections=info["n_sections"],
                n_chunks=info["n_chunks"],
                corpus_hash=info["corpus_hash"],
                index=f"{info['backend']}/{info['index_kind']}",
                wall_s=round(time.perf_counter() - t0, 1),
            )
            summary["embedders"][name] = m
            for o in outcomes:
                rows[o["id"]][f"rank_{name}"] = o["rank"] if o["rank"] else ""
                rows[o["id"]][f"top3_{name}"] = " ".join(o["top3"])
                rows[o["id"]][f"in_prompt_{name}"] = int(o["in_prompt"])
            print(
                f"{name}: recall@3 {m['recall_at_3']:.3f}  MRR {m['mrr']:.3f}  "
                f"prompt coverage {m['prompt_coverage']:.3f}  ({m['n_queries']} queries)"
            )
    common.write_json(args.out / "quality.json", summary)
    with open(args.out / "quality_per_query.csv", "w", newline="") as f:
        fields = list(next(iter(rows.values())).keys())
        w = csv.DictWriter(f, fieldnames=fields)
        w.writeheader()
        w.writerows(rows.values())
    return 0


if __name__ == "__main__":
    sys.exit(main())
