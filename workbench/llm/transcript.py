"""Every LLM call of a run, saved in the run folder: `runs/<run>/llm_calls/<call>.json`, one file a call.

A file is written as soon as the reply has been turned into a candidate (or not), so a run that dies
keeps every prompt and reply it paid for, the ones whose candidate never reached a node included. It
holds the chat messages, the reply, the sampling settings, the tokens and what the LLM step made of
the reply (`outcome`: candidate, rejected before evaluation, or failed, with the reason). When the
search records the candidate's node, its id and its verdict (the harness's status and fitness, or the
rejection) are added to the same file (`link_verdict`).

    from workbench.llm.transcript import calls_table
    calls_table("runs/vector_add-20261204-181500-ab12")   # a pandas DataFrame, one row a call
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
import uuid
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

CALLS_DIR = "llm_calls"  # inside the run folder
_counter = 0
_counter_lock = threading.Lock()


@dataclass
class CallRecord:
    call: str  # the file's stem
    started_at: float  # epoch seconds
    kind: str  # llm-draft | llm | llm-crossover
    parents: list[str]  # the parent nodes' ids
    sample: int  # the i-th reply of a best-of-n expansion
    temperature: float
    max_tokens: int
    messages: list[dict[str, str]]
    reply: str | None  # None: the call failed (see error_class)
    outcome: str  # what the LLM step made of the reply: candidate | rejected | failed
    error_class: str | None = None  # the reason when not a candidate (precheck, parse_error, llm_timeout ...)
    diagnosis: str = ""
    form: str | None = None  # module | region | edits
    region: str | None = None  # the parent's part the prompt asked for
    candidate: str | None = None  # the source the step made of the reply
    model: str | None = None
    finish_reason: str | None = None
    prompt_tokens: int = 0
    completion_tokens: int = 0
    latency_s: float | None = None
    node: str | None = None  # the node the search recorded for this call (link_verdict)
    verdict: dict[str, Any] = field(default_factory=dict)  # its status, fitness, speedup, error class


def new_call_id(kind: str, sample: int) -> str:
    """Sortable within a process (time, then a counter), unique across processes (a random tail)."""
    global _counter
    with _counter_lock:
        _counter += 1
        n = _counter
    return f"{time.strftime('%Y%m%d-%H%M%S')}-{n:04d}-{kind}-{sample}-{uuid.uuid4().hex[:4]}"


def write_call(calls_dir: str | Path, record: CallRecord) -> Path | None:
    """Save one call; None (logged) when the folder cannot be written: the search goes on without it."""
    d = Path(calls_dir)
    path = d / f"{record.call}.json"
    try:
        d.mkdir(parents=True, exist_ok=True)
        _write_json(path, asdict(record))
    except OSError as exc:
        log.warning("could not save LLM call %s: %s", path, exc)
        return None
    return path


def link_verdict(path: str | Path, *, node: str, status: str, fitness: float | None = None,
                 speedup: float | None = None, error_class: str | None = None, summary: str = "") -> None:  # fmt: skip
    """Add the node's id and verdict to a saved call (rewritten whole: a reader never sees half a file)."""
    p = Path(path)
    try:
        doc = json.loads(p.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        log.warning("could not link node %s to LLM call %s: %s", node, p, exc)
        return
    doc["node"] = node
    doc["verdict"] = {"status": status, "fitness": fitness, "speedup": speedup, "error_class": error_class,
                      "summary": summary[:500]}  # fmt: skip
    try:
        _write_json(p, doc)
    except OSError as exc:
        log.warning("could not link node %s to LLM call %s: %s", node, p, exc)


def load_calls(run_folder: str | Path | Any) -> list[CallRecord]:
    """The saved calls of a run (its folder `runs/<run>`, or a `Run`), in the order they were made."""
    d = Path(getattr(run_folder, "run_dir", run_folder)) / CALLS_DIR
    if not d.is_dir():
        return []
    names = {f.name for f in CallRecord.__dataclass_fields__.values()}
    out = []
    for p in sorted(d.glob("*.json")):
        try:
            doc = json.loads(p.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            log.warning("skipping unreadable LLM call %s: %s", p, exc)
            continue
        out.append(CallRecord(**{k: v for k, v in doc.items() if k in names}))
    out.sort(key=lambda r: (r.started_at, r.call))
    return out


def calls_table(run_folder: str | Path | Any) -> Any:
    """A run's prompts, replies and verdicts as a pandas DataFrame, one row a call in call order (the run's
    folder `runs/<run>`, or a `Run`): call, node, kind, sample, temperature, outcome (before the harness),
    status and fitness (the harness's verdict, empty for a rejected or failed one), error_class,
    diagnosis, prompt (the chat as one text), reply, candidate, tokens and seconds."""
    import pandas as pd

    from workbench.llm.prompt import chat_text

    rows = []
    for r in load_calls(run_folder):
        v = r.verdict or {}
        rows.append({
            "call": r.call, "node": r.node, "kind": r.kind, "parents": ",".join(r.parents), "sample": r.sample,
            "temperature": r.temperature, "outcome": r.outcome, "status": v.get("status"),
            "fitness": v.get("fitness"), "error_class": v.get("error_class") or r.error_class,
            "diagnosis": v.get("summary") or r.diagnosis, "form": r.form, "region": r.region,
            "prompt": chat_text(r.messages), "reply": r.reply, "candidate": r.candidate,
            "prompt_tokens": r.prompt_tokens, "completion_tokens": r.completion_tokens, "latency_s": r.latency_s,
            "model": r.model,
        })  # fmt: skip
    columns = ["call", "node", "kind", "parents", "sample", "temperature", "outcome", "status", "fitness",
               "error_class", "diagnosis", "form", "region", "prompt", "reply", "candidate", "prompt_tokens",
               "completion_tokens", "latency_s", "model"]  # fmt: skip
    return pd.DataFrame(rows, columns=columns)


def _write_json(path: Path, doc: dict[str, Any]) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    tmp.write_text(json.dumps(doc, indent=1, default=str), encoding="utf-8")
    os.replace(tmp, path)
