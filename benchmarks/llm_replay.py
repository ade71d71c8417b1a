"""Replay the recorded local-model replies through today's LLM step: how many reach the harness.

Every reply `benchmarks/llm_local.py` recorded (results/llm/**/replies, with its spec, arm and region)
goes through `workbench.llm.candidate.candidate_from_reply` against the lowering's parent of today, and
the prompts of the benchmark's specs are built (draft, region edit, region edit with op-keyed samples).
No model runs, so the numbers are exact and a change to the LLM step can be compared before and after
on the same replies: run it on both trees and pass the other's file to `--compare`.

    .venv/bin/python benchmarks/llm_replay.py --out /tmp/after.json [--compare /tmp/before.json]

Prints the share of replies that reach the harness (a candidate, not rejected before evaluation) and,
with `--compare`, how many outcomes and prompts differ (sources and prompt texts are compared by
sha256; the file keeps the hashes, the outcomes and the prompts' fitting info).
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
from collections import Counter
from pathlib import Path
from typing import Any

os.environ.setdefault("TRITON_INTERPRET", "1")  # before triton is imported anywhere
ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks import common  # noqa: E402
from benchmarks.llm_local import default_specs  # noqa: E402

RESULTS = ROOT / "results/llm"
# (the run's records, its replies), as llm_local.py wrote them
RECORDED = [
    ("code05b.json", "replies/code05b.jsonl"),
    ("smollm2.json", "replies/smollm2.jsonl"),
    ("part2/code05b.json", "part2/replies/code05b.jsonl"),
    ("part3/code05b.json", "part3/replies/code05b.jsonl"),
    ("earlier/code05b_region_nohint.json", "earlier/code05b_region_nohint_replies.jsonl"),
    ("earlier/code05b_search_replace.json", "earlier/code05b_search_replace_replies.jsonl"),
]
EDIT_ARMS = ("lowered", "lowered+kb", "lowered_sr")


def replay() -> dict[str, Any]:
    from workbench.llm.candidate import candidate_from_reply
    from workbench.llm.edits import editable_regions
    from workbench.llm.prompt import PromptBuilder
    from workbench.llm.settings import LLMSettings
    from workbench.lowering import lower_spec
    from workbench.search.node import Node
    from workbench.search.operators import OperatorContext

    cases = {c.name: c for c in default_specs()}
    parents: dict[str, str | None] = {}

    def parent(name: str) -> str | None:
        if name not in parents:
            case = cases[name]
            res = lower_spec(case.path, case.overrides or None)
            fallback = case.fallback_parent.read_text() if case.fallback_parent else None
            parents[name] = res.source or fallback
        return parents[name]

    rows = []
    for doc_name, rep_name in RECORDED:
        doc = json.loads((RESULTS / doc_name).read_text())
        replies = [json.loads(line) for line in (RESULTS / rep_name).read_text().splitlines() if line.strip()]
        for rec, rep in zip(doc["proposals"], replies, strict=True):
            case = cases[rec["spec"]]
            src = parent(case.name) if rec["arm"].startswith("lowered") else None
            region = next((r for r in editable_regions(src) if r.name == rec.get("region")), None) if src else None
            fin = candidate_from_reply(rep["reply"], spec_source=case.path.read_text(), parent_source=src,
                                       settings=LLMSettings(), edit_prompt=rec["arm"] in EDIT_ARMS,
                                       finish_reason=rec.get("finish_reason"), region=region)  # fmt: skip
            rows.append({"file": doc_name, "spec": rec["spec"], "arm": rec["arm"], "error_class": fin.error_class,
                         "reaches_harness": fin.source is not None and not fin.rejected,
                         "source_sha256": _sha(fin.source), "diagnosis": fin.diagnosis})  # fmt: skip
    prompts = {}
    for name, case in cases.items():
        src = parent(name)
        for arm in ("blank", "lowered", "lowered+samples"):
            with_parent = arm != "blank" and src is not None
            node = Node(id="parent0", run_id="replay", spec_key=name, operator="seed", source=src, status="passed",
                        fitness=1.0, speedup=1.0, diagnosis="status: passed")  # fmt: skip
            ctx = OperatorContext(spec_path=str(case.path), spec_source=case.path.read_text(), spec_key=name,
                                  platform="cpu", arch="cpu-interpreter", overrides=dict(case.overrides),
                                  parents=[node] if with_parent else [])  # fmt: skip
            builder = PromptBuilder(retriever=None, op_samples="auto" if arm.endswith("samples") else None)
            regions = editable_regions(src) if with_parent else []
            p = builder.assemble(ctx, edit_prompt=bool(regions), budget_tokens=4096 - 384 - 48,
                                 region=regions[0] if regions else None)  # fmt: skip
            prompts[f"{name}/{arm}"] = {"text_sha256": _sha(p.text), "chars": len(p.text), "info": p.info}
    n = len(rows)
    reach = sum(r["reaches_harness"] for r in rows)
    summary = {"replies": n, "reach_harness": reach, "share": round(reach / n, 3) if n else 0.0,
               "outcomes": {f"{k[0]}|{k[1]}": v for k, v in
                            Counter((r["error_class"] or "candidate", r["arm"]) for r in rows).items()}}  # fmt: skip
    return {"summary": summary, "rows": rows, "prompts": prompts}


def _sha(text: str | None) -> str | None:
    return None if text is None else hashlib.sha256(text.encode()).hexdigest()


def _row_key(r: dict[str, Any]) -> tuple:
    return (r["file"], r["spec"], r["arm"], r["error_class"], r["reaches_harness"],
            r.get("source_sha256") or _sha(r.get("source")), r["diagnosis"])  # fmt: skip


def _prompt_key(p: dict[str, Any]) -> str | None:
    return p.get("text_sha256") or _sha(p.get("text"))


def main(argv: list[str] | None = None) -> int:
    ap = common.parser(__doc__, out_file=True, out_default="results/llm/replay.json")
    ap.add_argument("--compare", type=Path, default=None, help="another tree's output of this script")
    args = ap.parse_args(argv)
    doc = replay()
    doc["provenance"] = common.provenance(args.commit)
    common.write_json(args.out, doc)
    s = doc["summary"]
    print(f"{s['replies']} recorded replies, {s['reach_harness']} reach the harness ({s['share']:.1%})")
    if args.compare:
        other = json.loads(args.compare.read_text())
        rows = sum(_row_key(a) != _row_key(b) for a, b in zip(other["rows"], doc["rows"], strict=True))
        theirs = other["prompts"]
        texts = [k for k, p in doc["prompts"].items() if _prompt_key(theirs.get(k, {})) != _prompt_key(p)]
        print(f"against {args.compare}: {other['summary']['reach_harness']} of {other['summary']['replies']} "
              f"reached the harness there; {rows} outcomes differ; {len(texts)} of {len(doc['prompts'])} prompts "
              f"differ {texts}")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
