"""Query latency of the knowledge base at the real corpus size and at a synthetic 100,000-chunk
corpus, excluding and including the query embedding.

    .venv/bin/python benchmarks/retrieval_latency.py [--n-synthetic 100000] [--repeats 300]

"search" = Retriever._search_vec (faiss search + tag filter + per-section dedupe, the path every
query takes) with a precomputed query vector; "end_to_end" = MiniLM query embedding + search.
The synthetic corpus perturbs the real MiniLM chunk vectors (clustered like real text, unlike
uniform random vectors) and gives every synthetic chunk its own section with tags drawn from the
real corpus, so filtering and dedupe cost what they would. Above 20,000 chunks the index is IVF
(nprobe 16); its recall@10 against exact search on the same queries is reported.
Writes results/retrieval/latency.json and latency.csv.
"""

from __future__ import annotations

import csv
import dataclasses
import logging
import os
import sys
import tempfile
import time
from pathlib import Path

if __package__ in (None, ""):   # run as a script: the repository root on the path, as with PYTHONPATH=.
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import numpy as np  # noqa: E402

from benchmarks import common  # noqa: E402
from retrieval import Retriever  # noqa: E402
from retrieval.chunking import Chunk  # noqa: E402
from retrieval.evaluation import load_labelled  # noqa: E402
from retrieval.index import VectorIndex  # noqa: E402
from retrieval.tags import TagFilter  # noqa: E402


def pct(xs: list[float]) -> dict[str, float]:
    a = np.asarray(xs) * 1e3
    return {
        "p50_ms": round(float(np.percentile(a, 50)), 4),
        "p99_ms": round(float(np.percentile(a, 99)), 4),
        "mean_ms": round(float(a.mean()), 4),
        "n": len(xs),
    }


def time_search(r: Retriever, qvecs: np.ndarray, filters: list[TagFilter], repeats: int) -> list[float]:
    ts = []
    for i in range(repeats):
        qv, f = qvecs[i % len(qvecs)][None, :], filters[i % len(filters)]
        t = time.perf_counter()
        r._search_vec(qv, 5, f)
        ts.append(time.perf_counter() - t)
    return ts


def synthetic(r: Retriever, n: int, seed: int = 0) -> tuple[np.ndarray, list, list]:
    """n vectors around the real chunk vectors (cosine ~0.8 to their source) with 1:1 sections."""
    rng = np.random.default_rng(seed)
    base = np.load(r.kb.directory / "vectors.npy")
    src = rng.integers(0, len(base), n)
    v = base[src] + rng.normal(scale=0.75 / np.sqrt(base.shape[1]), size=(n, base.shape[1])).astype(np.float32)
    v /= np.linalg.norm(v, axis=1, keepdims=True)
    real = list(r.kb.sections.values())
    sections, chunks = {}, []
    for i in range(n):
        s = real[rng.integers(0, len(real))]
        sid = f"syn{i}"
        sections[sid] = dataclasses.replace(s, id=sid, kind="doc")
        chunks.append(Chunk(f"{sid}#0", sid, s.text, ""))
    return v.astype(np.float32), list(sections.items()), chunks


def main(argv: list[str] | None = None) -> int:
    ap = common.parser(__doc__, out_default="results/retrieval")
    ap.add_argument("--n-synthetic", type=int, default=100_000)
    ap.add_argument("--repeats", type=int, default=300)
    args = ap.parse_args(argv)
    common.setup_logging(logging.WARNING)
    prov = common.provenance(args.commit)
    prov["loadavg_start"] = os.getloadavg()
    prov["cpu_count"] = os.cpu_count()
    queries = load_labelled()
    texts = [q.diagnosis for q in queries]
    filters = [TagFilter.make(q.platform, q.arch) for q in queries]
    rows: list[dict] = []
    with tempfile.TemporaryDirectory() as cache:
        r = Retriever("minilm", cache_dir=cache, auto_refresh=False, query_cache_size=0)  # uncached
        info = r.build()
        r.embedder.embed(texts[:2])  # warm-up
        emb_ts, emb_cpu, qvecs = [], [], []
        for i in range(args.repeats):
            t, c = time.perf_counter(), time.process_time()
            v = r.embedder.embed([texts[i % len(texts)]])
            emb_ts.append(time.perf_counter() - t)
            emb_cpu.append(time.process_time() - c)
            if i < len(texts):
                qvecs.append(v[0])
        qvecs = np.stack(qvecs)
        s_real = time_search(r, qvecs, filters, args.repeats)
        e2e = []
        for i in range(args.repeats):
            q = queries[i % len(queries)]
            t = time.perf_counter()
            r.query(q.diagnosis, 5, platform=q.platform, arch=q.arch)
            e2e.append(time.perf_counter() - t)
        rows.append(
            {
                "corpus": "real",
                "n_chunks": info["n_chunks"],
                "index": f"{info['backend']}/{info['index_kind']}",
                "what": "search",
                **pct(s_real),
            }
        )
        rows.append(
            {
                "corpus": "real",
                "n_chunks": info["n_chunks"],
                "index": f"{info['backend']}/{info['index_kind']}",
                "what": "end_to_end",
                **pct(e2e),
            }
        )
        rows.append({"corpus": "-", "n_chunks": 1, "index": "-", "what": "query_embedding_minilm", **pct(emb_ts)})
        # CPU time of the (single-threaded) embedding: what it costs on an idle core, whatever the load
        rows.append(
            {
                "corpus": "-",
                "n_chunks": 1,
                "index": "-",
                "what": "query_embedding_minilm_cpu_time",
                **pct(emb_cpu),
            }
        )

        # synthetic corpus: swap the retriever's knowledge base contents in place
        t0 = time.perf_counter()
        vecs, secs, chunks = synthetic(r, args.n_synthetic)
        gen_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        ivf = VectorIndex.build(vecs)  # the same auto rule as a real build: IVF above 20k
        ivf_build_s = time.perf_counter() - t0
        flat = VectorIndex.build(vecs, kind="flat")
        r.kb.sections, r.kb.chunks = dict(secs), chunks
        recall = []
        for qv in qvecs:
            _, ie = flat.search(qv[None, :], 10)
            _, ia = ivf.search(qv[None, :], 10)
            recall.append(len(set(ie[0]) & set(ia[0])) / 10)
        for name, idx in (("ivf", ivf), ("flat", flat)):
            r.kb.index = idx
            s = time_search(r, qvecs, filters, args.repeats)
            rows.append(
                {
                    "corpus": "synthetic",
                    "n_chunks": args.n_synthetic,
                    "index": f"faiss/{name}",
                    "what": "search",
                    **pct(s),
                }
            )
            # search time + the measured embedding time of the same query index
            e2e = [a + b for a, b in zip(s, emb_ts, strict=False)]
            rows.append(
                {
                    "corpus": "synthetic",
                    "n_chunks": args.n_synthetic,
                    "index": f"faiss/{name}",
                    "what": "end_to_end",
                    **pct(e2e),
                }
            )
    prov["loadavg_end"] = os.getloadavg()
    out = {
        "provenance": prov,
        "embedder": info["embedder"],
        "real_corpus": info,
        "synthetic": {
            "n_chunks": args.n_synthetic,
            "generation_s": round(gen_s, 1),
            "ivf_build_s": round(ivf_build_s, 1),
            "ivf_nprobe": ivf.nprobe,
            "ivf_recall_at_10_vs_exact": round(float(np.mean(recall)), 4),
        },
        "targets": {"search_p50_ms": 5.0, "end_to_end_p50_ms": 25.0},
        "notes": (
            "synthetic end_to_end = measured search time + measured MiniLM query-embedding time "
            "of the same query index (embedding cost does not depend on corpus size)"
        ),
        "rows": rows,
    }
    common.write_json(args.out / "latency.json", out)
    with open(args.out / "latency.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0].keys()))
        w.writeheader()
        w.writerows(rows)
    print("load average at start/end:", prov["loadavg_start"], prov["loadavg_end"])
    for row in rows:
        print(row)
    print("IVF recall@10 vs exact:", out["synthetic"]["ivf_recall_at_10_vs_exact"], "load", prov["loadavg_end"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
