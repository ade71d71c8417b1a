"""A suite run's report: `report.json` (schema in docs/suites.md), `report.md`, `problems.csv`, plots."""
from __future__ import annotations

import json
import logging
import time
from pathlib import Path
from typing import Any

from workbench.suites.evidence import annotate, as_good_as_eager, by_family, level_evidence
from workbench.suites.scoring import EXCESSIVE_SPEEDUP, P_VALUES, by_level
from workbench.suites.store import SuiteStore

log = logging.getLogger(__name__)

SCHEMA = "workbench.suites.report/1"
CSV_COLUMNS = ("problem_id", "level", "name", "status", "verdict", "correct", "fitness", "speedup",
               "runtime_us", "baseline_us", "compile_baseline_us", "speedup_vs_compile", "best_kernel",
               "sizes_overrides", "input_shapes", "seed_mode", "evaluations", "wall_s", "kernels", "schedule",
               "ceiling_share",
               "bound", "eager_fp64_err", "candidate_fp64_err", "matches_fp64_as_eager", "diagnosis")


def build_report(path: Path, store: SuiteStore) -> dict[str, Any]:
    """The report of the run in `path` from its store (works on a stopped run: unfinished rows count as
    not correct, and `complete` is false)."""
    records = []
    rows = store.problems()
    starts = [r.started_at for r in rows if r.started_at]
    ends = [r.finished_at for r in rows if r.finished_at]
    # a run written before its sessions' wall time was kept: first start to last finish
    span = (max(ends) - min(starts)) if starts and ends else None
    for row in rows:
        # a pending row may keep the record of an attempt that was reset (a retried failure): not a result
        rec = dict(row.record) if row.record and row.status not in ("pending", "running") else {
            "problem_id": row.problem_id, "level": row.level, "name": row.name, "spec_path": row.spec_path,
            "verdict": "not_run", "correct": False, "fitness": 0.0, "speedup": 0.0,
            "diagnosis": "not finished (resume the run)"}
        rec["status"] = row.status
        rec["attempts"] = row.attempts
        records.append(rec)
    counts = store.counts()
    config = store.meta("config") or {}
    prov = store.meta("provenance") or {}
    device = (config.get("search") or {}).get("device") or config.get("device")
    annotate(records, prov.get("sm") if device == "cuda" else None)  # a CPU run's times meet no GPU ceiling
    levels = by_level(records)
    for lvl, summary in levels.items():
        summary.update(level_evidence([r for r in records if lvl == "all" or str(r.get("level")) == lvl]))
    return {
        "schema": SCHEMA,
        "run_id": path.name,
        "suite": (store.meta("config") or {}).get("suite"),
        "config": store.meta("config"),
        "provenance": store.meta("provenance"),
        "created_at": store.meta("created_at"),
        "reported_at": time.time(),
        "complete": counts.get("pending", 0) + counts.get("running", 0) == 0,
        "counts": counts,
        "p_values": list(P_VALUES),
        "excessive_speedup_threshold": EXCESSIVE_SPEEDUP,
        "levels": levels,
        "throughput": throughput(records, store.meta("wall_s") or span),
        "precision": precision(config),
        "ran": sum(1 for r in records if int(r.get("evaluations") or 0) > 0),
        "headline": headline(records),
        "families": by_family(records, _families(path)) if config.get("suite") == "aten" else None,
        "problems": records,
    }


def _families(path: Path) -> dict[str, str]:
    """OpInfo label -> op family, as the ATen suite wrote it beside its specs (older runs: none)."""
    try:
        return dict(json.loads((path / "specs" / "scope.json").read_text(encoding="utf-8")).get("families") or {})
    except (OSError, ValueError):
        return {}


def ran(report: dict[str, Any]) -> int:
    """Problems whose candidate reached the harness (a verdict of the harness, right or wrong)."""
    return sum(1 for r in report["problems"] if int(r.get("evaluations") or 0) > 0)


def headline(records: list[dict[str, Any]]) -> str:
    """The report's first line: how many problems ran and were correct, or, when none ran, why."""
    n = len(records)
    reached = [r for r in records if int(r.get("evaluations") or 0) > 0]
    if n and not reached:
        reasons: dict[str, int] = {}
        for r in records:
            key = str(r.get("diagnosis") or r.get("verdict") or "?").splitlines()[0][:160]
            reasons[key] = reasons.get(key, 0) + 1
        why, k = max(reasons.items(), key=lambda kv: kv[1])
        return f"NOTHING RAN: none of the {n} problems reached the harness; most common reason ({k} of {n}): {why}"
    correct = sum(1 for r in records if r.get("correct"))
    close = sum(1 for r in records if as_good_as_eager(r))
    more = f" ({close} more match fp64 as well as eager does)" if close else ""
    return f"{len(reached)} of {n} problems reached the harness, {correct} correct{more}"


def precision(config: dict[str, Any]) -> str:
    """The precision the run's verdicts and times are taken at, in words."""
    from workbench.tolerances import DEFAULT_TOLERANCES

    def tol(name: str) -> str:
        atol, rtol = DEFAULT_TOLERANCES[name]
        return f"{name} atol {atol:g} rtol {rtol:g}"

    if config.get("suite") == "aten":
        dtypes = config.get("dtypes") or ["float32"]
        return (f"OpInfo samples in {', '.join(dtypes)}; "
                + ", ".join(tol(d) for d in dtypes if d in DEFAULT_TOLERANCES))
    return (f"fp32 as published (TF32 off unless a spec sets ALLOW_TF32); {tol('float32')} "
            f"(KernelBench: 1e-4), {tol('float16')}, {tol('bfloat16')} (KernelBench: 1e-2)")


def throughput(records: list[dict[str, Any]], wall_s: float | None) -> dict[str, Any]:
    """Candidates evaluated per hour of the run's wall time, and the harness's own times per candidate."""
    import statistics

    evals = sum(int(r.get("evaluations") or 0) for r in records)
    per = [r.get("timings_s") or {} for r in records if r.get("timings_s")]

    def median(key: str) -> float | None:
        xs = [float(t[key]) for t in per if isinstance(t.get(key), (int, float))]
        return statistics.median(xs) if xs else None

    # each problem's wall split into its phases, added over the run (overlapping problems add up to more
    # than the run's wall: these say where the work went, not when)
    phases: dict[str, float] = {}
    for r in records:
        for k, v in (r.get("phases_s") or {}).items():
            if isinstance(v, (int, float)):
                phases[k] = phases.get(k, 0.0) + float(v)
        harness = (r.get("search") or {}).get("harness_s")
        if isinstance(harness, (int, float)):
            phases["harness"] = phases.get("harness", 0.0) + float(harness)
    return {"evaluations": evals, "wall_s": wall_s,
            "candidates_per_hour": evals / wall_s * 3600 if wall_s else None,
            "median_eval_wall_s": median("client_wall"), "median_harness_overhead_s": median("harness_overhead"),
            "median_compile_and_first_call_s": median("compile_and_first_call"),
            "phases_s": {k: round(v, 1) for k, v in sorted(phases.items())}}


def _csv_rows(report: dict[str, Any]) -> list[dict[str, Any]]:
    rows = []
    for r in report["problems"]:
        sizes = r.get("sizes") or {}
        ceiling, referee = r.get("ceiling") or {}, r.get("referee") or {}
        rows.append({**{k: r.get(k) for k in CSV_COLUMNS},
                     "ceiling_share": ceiling.get("share"), "bound": ceiling.get("bound"),
                     "eager_fp64_err": referee.get("eager_fp64_err"),
                     "candidate_fp64_err": referee.get("candidate_fp64_err"),
                     "matches_fp64_as_eager": as_good_as_eager(r) if referee else None,
                     "sizes_overrides": json.dumps(sizes.get("overrides", {}), sort_keys=True),
                     "input_shapes": json.dumps(sizes.get("input_shapes")),
                     "seed_mode": (r.get("seed") or {}).get("mode"),
                     "schedule": json.dumps(r["schedule"], sort_keys=True) if r.get("schedule") else None})
    return rows


def _fmt(x: Any, spec: str = ".3g") -> str:
    return "-" if x is None else format(x, spec)


def summary_table(report: dict[str, Any]) -> str:
    """Per level: n, correct, fast_p at each p (eager; compile when measured), geomean speedup."""
    ps = [f"{p:g}" for p in report["p_values"]]
    head = f"{'level':>8} {'n':>4} {'correct':>7} " + " ".join(f"{'fast_' + p:>8}" for p in ps) + f" {'geomean':>8}"
    lines = [head, "-" * len(head)]
    for lvl, s in report["levels"].items():
        lines.append(f"{lvl:>8} {s['n']:>4} {s['correct']:>7} "
                     + " ".join(f"{_fmt(s['fast_p'][p], '.3f'):>8}" for p in ps)
                     + f" {_fmt(s['geomean_speedup']):>8}")
        if s.get("fast_p_vs_compile"):
            lines.append(f"{'':>8} {'':>4} {'compile':>7} "
                         + " ".join(f"{_fmt(s['fast_p_vs_compile'][p], '.3f'):>8}" for p in ps)
                         + f" {_fmt(s['geomean_speedup_vs_compile']):>8}")
    return "\n".join(lines)


def markdown(report: dict[str, Any]) -> str:
    stored = report.get("config") or {}
    # the suite's fields and its search settings (runs stored before the nesting: one flat dict, `seed`)
    cfg = {**(stored.get("search") or {}), **stored}  # the suite's budget, not its search template's
    cfg.setdefault("draft", stored.get("seed"))
    prov = report.get("provenance") or {}
    tp = report.get("throughput") or {}
    lines = [f"# Suite run `{report['run_id']}` ({report.get('suite')})", "",
             f"**{report.get('headline') or headline(report['problems'])}**", "",
             f"- device {cfg.get('device')} ({prov.get('gpu') or prov.get('cpu')}), torch {prov.get('torch')}, "
             f"triton {prov.get('triton')}, commit {prov.get('commit')}, {prov.get('date')}",
             f"- draft {cfg.get('draft')}, budget {cfg.get('budget')}, llm {cfg.get('llm')}, "
             f"max_elems {cfg.get('max_elems') or 'published sizes'}, workers {cfg.get('workers')} "
             f"({cfg.get('evaluator')})",
             f"- problems: {report['counts']}" + ("" if report["complete"] else " (INCOMPLETE: resume the run)"),
             f"- throughput: {tp['evaluations']} evaluations in {_fmt(tp['wall_s'], '.0f')} s = "
             f"{_fmt(tp['candidates_per_hour'], '.0f')} candidates/hour; median evaluation "
             f"{_fmt(tp['median_eval_wall_s'], '.2f')} s, harness overhead "
             f"{_fmt(tp['median_harness_overhead_s'], '.2f')} s, compile and first call "
             f"{_fmt(tp.get('median_compile_and_first_call_s'), '.2f')} s"
             + ("; problems' time by phase (s, added over problems): "
                + ", ".join(f"{k} {v:.0f}" for k, v in tp["phases_s"].items()) if tp.get("phases_s") else ""),
             f"- precision: {report.get('precision') or precision(stored)}",
             "", "fast_p = correct and speedup > p, over all problems of the level (KernelBench's definition).", "",
             "```", summary_table(report), "```", ""]
    flagged = report["levels"]["all"]["excessive_speedup"]
    if flagged:
        lines += [f"Speedups above {report['excessive_speedup_threshold']:g}x, to review by hand: "
                  + ", ".join(f"`{f}`" for f in flagged), ""]
    unsized = [r["problem_id"] for r in report["problems"] if (r.get("sizes") or {}).get("reached") is False]
    if unsized:
        lines += [f"{len(unsized)} problems kept tensors above the size bound (sizes hard-coded in the model, not "
                  f"module constants): " + ", ".join(f"`{u}`" for u in unsized[:20])
                  + (" ..." if len(unsized) > 20 else ""), ""]
    reasons: dict[str, int] = {}
    for r in report["problems"]:
        if not r.get("correct"):
            key = (r.get("diagnosis") or r.get("verdict") or "?").split(":")[0][:60]
            reasons[key] = reasons.get(key, 0) + 1
    if reasons:
        lines += ["Not correct, by first word of the reason: "
                  + ", ".join(f"{k} {v}" for k, v in sorted(reasons.items(), key=lambda kv: -kv[1])), ""]
    lines += _evidence_lines(report) + _family_lines(report)
    lines += ["![fast_p over p](fast_p.png)", "", "![speedups per level](speedups.png)", "",
              "| problem | status | verdict | speedup | vs compile | runtime us | eager us | kernels | of ceiling | "
              "fp64 err: eager / candidate | sizes | diagnosis |",
              "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in report["problems"]:
        sizes = (r.get("sizes") or {}).get("overrides") or {}
        diag = (r.get("diagnosis") or "").replace("|", "/").replace("\n", " ")[:120]
        ceiling, referee = r.get("ceiling") or {}, r.get("referee") or {}
        share = f"{ceiling['share']:.0%} {ceiling['bound']}" if ceiling.get("share") is not None else "-"
        fp64 = (f"{_fmt(referee.get('eager_fp64_err'))} / {_fmt(referee.get('candidate_fp64_err'))}"
                if "eager_fp64_err" in referee else "-")
        lines.append(f"| {r['problem_id']} | {r['status']} | {r.get('verdict')} | {_fmt(r.get('speedup'))} | "
                     f"{_fmt(r.get('speedup_vs_compile'))} | "
                     f"{_fmt(r.get('runtime_us'), '.1f')} | {_fmt(r.get('baseline_us'), '.1f')} | "
                     f"{_fmt(r.get('kernels'), 'g')} | {share} | {fp64} | "
                     f"{' '.join(f'{k}={v}' for k, v in sizes.items()) or '-'} | {diag} |")
    return "\n".join(lines) + "\n"


def _evidence_lines(report: dict[str, Any]) -> list[str]:
    """Per level: mismatches that match fp64 as well as eager does, and the median share of the ceilings."""
    rows = [(lvl, s) for lvl, s in report["levels"].items()
            if s.get("refereed") or s.get("median_ceiling_share") is not None]
    if not rows:
        return []
    out = ["| level | correct | mismatches refereed in fp64 | of them as close to fp64 as eager | "
           "median share of the GPU's ceiling (correct) |", "|---|---|---|---|---|"]
    for lvl, s in rows:
        med = s.get("median_ceiling_share")
        out.append(f"| {lvl} | {s['correct']} | {s.get('refereed', 0)} | {s.get('matches_fp64_as_eager', 0)} | "
                   f"{'-' if med is None else format(med, '.0%')} |")
    return out + ["", "A mismatch at the harness's tolerances stays incorrect; the fp64 referee only says whether "
                  "eager's own fp32 output is as far from the exact result (harness/referee.py).", ""]


def _family_lines(report: dict[str, Any]) -> list[str]:
    fams = report.get("families") or {}
    if not fams:
        return []
    out = ["Speed per op family (every dtype of the run; geomean over the correct ops, fast_1 over all):", "",
           "| family | ops | correct | geomean vs eager | fast_1 | geomean vs torch.compile | fast_1 vs compile |",
           "|---|---|---|---|---|---|---|"]
    for fam, s in fams.items():
        out.append(f"| {fam} | {s['n']} | {s['correct']} | {_fmt(s['geomean_speedup'])} | {_fmt(s['fast_1'], '.2f')} | "
                   f"{_fmt(s['geomean_speedup_vs_compile'])} | {_fmt(s['fast_1_vs_compile'], '.2f')} |")
    return out + [""]


def plot_fast_p(report: dict[str, Any], ax: Any = None) -> Any:
    """fast_p over p (0..max(3, largest speedup)), one line per level; dashed: against torch.compile."""
    import numpy as np
    import pandas as pd
    import seaborn as sns
    from matplotlib.figure import Figure

    from workbench.suites.scoring import fast_p

    if ax is None:
        ax = Figure(figsize=(6.4, 3.8), dpi=110).add_subplot(1, 1, 1)
    recs = report["problems"]
    top = max([3.0] + [float(r.get("speedup") or 0) for r in recs if r.get("correct")])
    ps = np.linspace(0, min(top, 50.0), 121)
    rows = []
    levels = sorted({str(r["level"]) for r in recs})
    for lvl in levels:
        sub = [r for r in recs if str(r["level"]) == lvl]
        for key, label in (("speedup", "eager"), ("speedup_vs_compile", "torch.compile")):
            if key == "speedup_vs_compile" and not any(r.get(key) is not None for r in sub):
                continue
            rows += [{"p": p, "fast_p": fast_p(sub, float(p), key), "level": lvl, "baseline": label} for p in ps]
    df = pd.DataFrame(rows)
    if len(df):
        sns.lineplot(data=df, x="p", y="fast_p", hue="level", style="baseline", ax=ax, drawstyle="steps-post")
    for p in (1.0, 1.5, 2.0):
        ax.axvline(p, color="grey", lw=0.6, ls=":")
    ax.set_ylim(-0.02, 1.02)
    ax.set_xlabel("speedup threshold p")
    ax.set_ylabel("fast_p (share of all problems)")
    ax.set_title(f"{report['run_id']}: fast_p over p", fontsize=9)
    ax.figure.tight_layout()
    return ax.figure


def plot_speedups(report: dict[str, Any], ax: Any = None) -> Any:
    """Speedup over eager of the correct problems, per level (log scale; the line is 1x)."""
    import pandas as pd
    import seaborn as sns
    from matplotlib.figure import Figure

    if ax is None:
        ax = Figure(figsize=(6.4, 3.8), dpi=110).add_subplot(1, 1, 1)
    df = pd.DataFrame([{"level": str(r["level"]), "speedup": float(r["speedup"])} for r in report["problems"]
                       if r.get("correct") and r.get("speedup")])
    if len(df):
        order = sorted(df["level"].unique())
        sns.boxplot(data=df, x="level", y="speedup", order=order, ax=ax, color="lightgrey", fliersize=0)
        sns.stripplot(data=df, x="level", y="speedup", order=order, ax=ax, size=4, color="tab:blue")
        ax.set_yscale("log")
    else:
        ax.text(0.5, 0.5, "no correct problem", ha="center", va="center", transform=ax.transAxes)
    ax.axhline(1.0, color="black", lw=0.8)
    ax.axhline(EXCESSIVE_SPEEDUP, color="tab:red", lw=0.6, ls="--")
    ax.set_ylabel("speedup over eager")
    ax.set_title(f"{report['run_id']}: speedups of correct problems", fontsize=9)
    ax.figure.tight_layout()
    return ax.figure


def write_report(path: Path, store: SuiteStore) -> tuple[dict[str, Any], dict[str, Path]]:
    import pandas as pd

    report = build_report(path, store)
    files = {"json": path / "report.json", "md": path / "report.md", "csv": path / "problems.csv",
             "fast_p": path / "fast_p.png", "speedups": path / "speedups.png"}
    files["json"].write_text(json.dumps(report, indent=1, default=str), encoding="utf-8")
    files["md"].write_text(markdown(report), encoding="utf-8")
    pd.DataFrame(_csv_rows(report), columns=list(CSV_COLUMNS)).to_csv(files["csv"], index=False)
    try:
        plot_fast_p(report).savefig(files["fast_p"])
        plot_speedups(report).savefig(files["speedups"])
    except Exception:  # the numbers are written already; a plotting failure must not hide them
        log.exception("plotting the suite report failed")
    return report, files


def load_report(path: str | Path) -> dict[str, Any]:
    """A recorded `report.json` (a file or a run directory)."""
    p = Path(path)
    if p.is_dir():
        p = p / "report.json"
    return json.loads(p.read_text(encoding="utf-8"))
