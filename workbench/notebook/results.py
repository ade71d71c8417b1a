"""Readers of the recorded GPU reports for the notebooks: the lowered drafts' runs
(`results/lowering/gpu/[runN/]`, written by a side script removed since, kept as the lab book's history)
and the suites' runs
(`results/suites/<run>/report.json`, written by `workbench suite`). They only read: the writers own the
formats. Each returns one tidy frame per run, with the same speedup columns the charts take
(`workbench.notebook.result_charts`), and provenance as one readable line.
"""
from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from profiling.figure_style import provenance_line

log = logging.getLogger(__name__)

# the speedup columns of a tidy frame, as the charts label them
LOWERING_SPEEDUPS = {"draft vs eager": "x_eager_draft", "tuned vs eager": "x_eager_tuned",
                     "tuned vs torch.compile": "x_compile_tuned"}
SUITE_SPEEDUPS = {"vs eager": "speedup", "vs torch.compile": "speedup_vs_compile"}


def provenance_leaves(prov: Mapping[str, Any] | None, name: str = "") -> dict[str, dict[str, Any]]:
    """A merged run's provenance (`merged_from` nests one record per device call, at any depth) as
    {call name: its record}; an unmerged record is its own single leaf."""
    prov = dict(prov or {})
    if "merged_from" not in prov:
        return {name or "run": prov}
    out: dict[str, dict[str, Any]] = {}
    for child, p in prov["merged_from"].items():
        out.update(provenance_leaves(p, child))
    return out


def merged_provenance_line(prov: Mapping[str, Any] | None) -> str:
    """One line for a run made of several device calls: the machine and versions once (or each distinct
    set), the commits and the span of dates: `NVIDIA H200 (driver 580.159.04, CUDA 13.0), torch 2.11.0+cu130,
    triton 3.6.0; 7 device calls, 2026-12-02 06:25 to 15:57 UTC; commits fc843a2, d1704c5`."""
    leaves = list(provenance_leaves(prov).values())
    if len(leaves) == 1:
        return provenance_line(leaves[0])
    machines = dict.fromkeys(provenance_line({k: p.get(k) for k in ("gpu", "driver", "cuda", "torch", "triton", "cpu")})
                             for p in leaves)
    dates = sorted(str(p["date"]) for p in leaves if p.get("date"))
    span = ""
    if dates:
        first, last = dates[0][:16].replace("T", " "), dates[-1][:16].replace("T", " ")
        span = f", {first} to {last[11:] if last[:10] == first[:10] else last} UTC"
    commits = list(dict.fromkeys(str(p["commit"])[:7] for p in leaves if p.get("commit")))
    return (f"{'; '.join(machines)}; {len(leaves)} device calls{span}"
            + (f"; commits {', '.join(commits)}" if commits else ""))


@dataclass
class LoweringRun:
    """One folder of the (removed) lowering side script's results."""

    name: str
    path: Path
    summary: dict[str, Any]
    provenance: dict[str, Any]
    rows: pd.DataFrame = field(repr=False)

    @property
    def provenance_line(self) -> str:
        return merged_provenance_line(self.provenance)


def lowering_runs(folder: str | Path) -> list[Path]:
    """The run folders under `folder` in the order they were made: `folder` itself (the first run), then
    run2, run3, ...; only those with a `lowering_gpu.csv`."""
    folder = Path(folder)
    found = [p for p in [folder, *folder.glob("run*")] if (p / "lowering_gpu.csv").is_file()]

    def order(p: Path) -> tuple[int, int]:
        tail = p.name[3:]
        return (p != folder, int(tail) if p != folder and tail.isdigit() else 0)

    return sorted(found, key=order)


def _num(s: pd.Series) -> pd.Series:
    return pd.to_numeric(s, errors="coerce")


def _text(s: pd.Series) -> pd.Series:
    """Strings, absent ones empty (a column with no text at all reads as floats)."""
    return s.astype(object).where(s.notna(), "").astype(str)


def tidy_lowering(raw: pd.DataFrame) -> pd.DataFrame:
    """The CSV's rows with typed columns and the three speedups (the tuned draft is the faster of the
    tuned and the untuned one, as the writer's summary counts it). An older run without the tuner's
    column counts its draft as tuned."""
    df = raw.copy()
    df["level"] = df["level"].astype(str)
    df["correct"] = df["correct"].astype(str).str.lower() == "true"
    for c in ("eager_us", "compile_us", "draft_us", "tuned_draft_us", "n_kernels", "max_abs_err"):
        df[c] = _num(df[c]) if c in df else float("nan")
    tuned = df[["draft_us", "tuned_draft_us"]].min(axis=1)
    df["tuned_us"] = tuned
    df["x_eager_draft"] = df["eager_us"] / df["draft_us"]
    df["x_eager_tuned"] = df["eager_us"] / tuned
    df["x_compile_tuned"] = df["compile_us"] / tuned
    for c in LOWERING_SPEEDUPS.values():  # a speedup only for a correct draft: an incorrect one is not faster
        df.loc[~df["correct"], c] = float("nan")
    df["reason"] = _text(df["reason"]) if "reason" in df else ""
    return df


def read_lowering_run(path: str | Path) -> LoweringRun:
    path = Path(path)
    summary = json.loads((path / "summary.json").read_text()) if (path / "summary.json").is_file() else {}
    prov = json.loads((path / "provenance.json").read_text()) if (path / "provenance.json").is_file() else {}
    rows = tidy_lowering(pd.read_csv(path / "lowering_gpu.csv", keep_default_na=False, na_values=[""]))
    return LoweringRun(path.name, path, summary, prov, rows)


def lowering_summary(runs: list[LoweringRun]) -> pd.DataFrame:
    """One row per run and level from each run's own summary.json (the writer's numbers, not recomputed)."""
    rows = []
    for run in runs:
        for level, s in run.summary.items():
            rows.append({"run": run.name, "level": level, "problems": s.get("problems"), "correct": s.get("correct"),
                         "timed": s.get("timed"),
                         "geomean draft vs eager": s.get("geomean_vs_eager"),
                         "geomean tuned vs eager": s.get("geomean_vs_eager_tuned"),
                         "geomean draft vs compile": s.get("geomean_vs_compile"),
                         "geomean tuned vs compile": s.get("geomean_vs_compile_tuned"),
                         "fast_1 tuned vs eager": s.get("fast_1_vs_eager_tuned"),
                         "fast_1 tuned vs compile": s.get("fast_1_vs_compile_tuned")})
    return pd.DataFrame(rows)


@dataclass
class SuiteRun:
    """One `workbench suite` run directory (its `report.json`)."""

    name: str
    report: dict[str, Any] = field(repr=False)

    @property
    def provenance(self) -> dict[str, Any]:
        return dict(self.report.get("provenance") or {})

    @property
    def on_gpu(self) -> bool:
        """Timed on a GPU: its provenance names one (a CPU run ranks correctness only)."""
        return bool(self.provenance.get("gpu"))

    @property
    def label(self) -> str:
        """The run's name as every table and plot title shows it: the report's run id."""
        return str(self.report.get("run_id") or self.name)

    @property
    def provenance_line(self) -> str:
        return provenance_line(self.provenance)

    def problems(self) -> pd.DataFrame:
        """One row per problem: level, name, verdict, correct, the speedups (absent when not correct)."""
        cols = ["level", "name", "verdict", "correct", "speedup", "speedup_vs_compile", "runtime_us", "baseline_us",
                "compile_baseline_us", "diagnosis"]
        df = pd.DataFrame(self.report.get("problems") or [], columns=cols)
        df["level"] = df["level"].astype(str)
        df["correct"] = df["correct"].fillna(False).astype(bool)
        for c in ("speedup", "speedup_vs_compile", "runtime_us", "baseline_us", "compile_baseline_us"):
            df[c] = _num(df[c])
            if c.startswith("speedup"):
                df.loc[~df["correct"], c] = float("nan")
        df["diagnosis"] = _text(df["diagnosis"])
        return df


def suite_runs(folder: str | Path) -> list[SuiteRun]:
    """Every run under `folder` with a report.json: the GPU runs first, then the CPU ones, by name."""
    runs = []
    for p in sorted(Path(folder).glob("*/report.json")):
        try:
            runs.append(SuiteRun(p.parent.name, json.loads(p.read_text(encoding="utf-8"))))
        except (OSError, ValueError) as exc:  # one unreadable report must not hide the others
            log.warning("%s: not a readable suite report: %s", p, exc)
    return sorted(runs, key=lambda r: (not r.on_gpu, r.name))


def suite_summary(runs: list[SuiteRun]) -> pd.DataFrame:
    """One row per run and level, from each report's levels (the writer's numbers)."""
    rows = []
    for run in runs:
        cfg = run.report.get("config") or {}
        search = cfg.get("search") or cfg  # the search settings: nested since the suite holds a SearchConfig
        for level, s in (run.report.get("levels") or {}).items():
            fast = s.get("fast_p") or {}
            fast_c = s.get("fast_p_vs_compile") or {}
            rows.append({"run": run.label, "timed on": run.provenance.get("gpu") or "CPU (correctness only)",
                         "draft": cfg.get("draft", cfg.get("seed")), "budget": search.get("budget", cfg.get("budget")),
                         "level": level, "problems": s.get("n"), "correct": s.get("correct"),
                         "fast_1 vs eager": fast.get("1"), "fast_1 vs compile": fast_c.get("1"),
                         "geomean vs eager": s.get("geomean_speedup"),
                         "geomean vs compile": s.get("geomean_speedup_vs_compile"),
                         "commit": str(run.provenance.get("commit") or "")[:7],
                         "date": str(run.provenance.get("date") or "")[:10]})
    return pd.DataFrame(rows)
