"""Benchmark runner for the preprocessing case studies (MapId, MBDT, Batch Event Truncate).

`runner.run_benchmark` compares float outputs within a dtype tolerance and builds inputs per float
dtype. The preprocessing operators differ: their outputs are integer or copied values that must be
bit-identical, some return a tuple (values, offsets), their inputs mix dtypes, and some contenders
synchronize with the host (their output size is data), so they cannot be captured in a CUDA graph.
This runner keeps the same declaration (`BenchmarkDecl`), row type (`BenchRow`), timing (`bench`,
`bench_graph`) and CSV (`write_rows`) and changes only those three points.
"""
from __future__ import annotations

import json
import logging
import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from case_studies.common.contenders import Factory
from case_studies.common.metrics import achieved_gbs
from case_studies.common.runner import BenchmarkDecl, BenchRow, speedup_columns
from case_studies.common.timing import Timing, bench, capture_graph

log = logging.getLogger(__name__)


def _flat(out: Any) -> list[Any]:
    if isinstance(out, (tuple, list)):
        return [t for o in out for t in _flat(o)]
    return [out]


def outputs_identical(out: Any, ref: Any) -> tuple[bool, str]:
    """Bit-identical comparison of tensors or tuples of tensors: count, dtype, shape, then values.
    Returns (same, a one-line reason when not)."""
    got, exp = _flat(out), _flat(ref)
    if len(got) != len(exp):
        return False, f"{len(got)} outputs, expected {len(exp)}"
    for i, (g, r) in enumerate(zip(got, exp, strict=True)):
        if g.dtype != r.dtype or g.shape != r.shape:
            return False, f"output[{i}]: {g.dtype} {list(g.shape)}, expected {r.dtype} {list(r.shape)}"
        if not torch.equal(g, r):
            bad = (g != r).reshape(-1)
            first = int(bad.nonzero()[0]) if bad.any() else -1
            return False, (f"output[{i}]: {int(bad.sum())} of {bad.numel()} differ, "
                           f"first at flat index {first}")
    return True, ""


@dataclass
class ExactCase:
    """What a preprocessing case study gives the runner.

    make_inputs(params, device) -> inputs (whatever the factories take);
    contenders: name -> factory(params, inputs) -> zero-argument callable;
    nbytes(params, inputs): the compulsory bytes (each input read once, each output written once);
    no_graph: contenders that synchronize with the host (never captured in a CUDA graph).
    """
    make_inputs: Callable[[dict[str, Any], str], Sequence[Any]]
    contenders: dict[str, Factory]
    nbytes: Callable[[dict[str, Any], Sequence[Any]], float]
    reference: str = "eager"
    roles: dict[str, str] = field(default_factory=dict)
    no_graph: frozenset[str] = frozenset()
    compile_shapes: Callable[[dict[str, Any]], bool] | None = None   # where compile contenders run


def _combine(ts: list[Timing], mode: str) -> Timing:
    """Rounds of one contender: the median of the round medians (and of the round p20s and p80s)."""
    med = lambda xs: sorted(xs)[len(xs) // 2]
    return Timing(median_us=med([t.median_us for t in ts]), p20_us=med([t.p20_us for t in ts]),
                  p80_us=med([t.p80_us for t in ts]), n=sum(t.n for t in ts), mode=mode)


def run_exact_benchmark(decl: BenchmarkDecl, case: ExactCase, *, device: str = "cuda",
                        time_budget_s: float | None = None, rounds: int = 3,
                        on_row: Callable[[BenchRow], None] | None = None) -> list[BenchRow]:
    """One row per (sweep, shape, contender, mode), checked bit for bit against the reference contender.

    The contenders of a shape are timed in `rounds` interleaved rounds (each gets rep_ms / rounds a
    round) and a row reports the median of its round medians: launch-bound timings on the lent
    machine drift by 2-3x over tens of seconds with the host, and interleaving spreads that drift over
    all contenders instead of charging it to whichever ran late. An incorrect contender is still
    timed (its row says "incorrect" and why); a contender that fails keeps its reason;
    host-synchronizing contenders get "skipped" graph rows with the reason; past `time_budget_s` the
    remaining rows are "skipped". The sweep's `dtypes` are labels only.
    """
    t_start = time.perf_counter()
    rows: list[BenchRow] = []

    def emit(row: BenchRow) -> None:
        rows.append(row)
        if on_row is not None:
            on_row(row)
        log.info("%s %s %s %s: %s %s", row.sweep, row.shape, row.contender, row.mode, row.status,
                 f"{row.median_us:.2f} us" if row.median_us is not None else row.error[:160])

    for sweep in decl.sweeps:
        for shape in sweep.shapes:
            params = {k: v for k, v in shape.items() if k != "name"}
            dtype = sweep.dtypes[0] if sweep.dtypes else ""
            base = dict(benchmark=decl.name, sweep=sweep.name, shape=shape["name"],
                        params=json.dumps(params, sort_keys=True), dtype=dtype)
            names = [c for c in sweep.contenders
                     if not (c.startswith("compile") and case.compile_shapes is not None
                             and not case.compile_shapes(params))]
            if time_budget_s is not None and time.perf_counter() - t_start > time_budget_s:
                for c in names:
                    for m in sweep.modes:
                        emit(BenchRow(**base, contender=c, role=case.roles.get(c, "pytorch"), mode=m,
                                      status="skipped", error="time budget spent"))
                continue
            inputs = case.make_inputs(params, device)
            nbytes = case.nbytes(params, inputs)
            ref = case.contenders[case.reference](params, inputs)()
            # build and check every contender, capture graphs once
            timed: dict[tuple[str, str], Callable[[], Any]] = {}
            info: dict[str, tuple[str, str, float]] = {}
            for c in names:
                role = case.roles.get(c, "pytorch")
                t0 = time.perf_counter()
                try:
                    fn = case.contenders[c](params, inputs)
                    same, why = outputs_identical(fn(), ref)
                except Exception as e:  # a contender that cannot build is a result: keep its reason
                    msg = f"{type(e).__name__}: {e}\n{traceback.format_exc()[-800:]}"
                    for m in sweep.modes:
                        emit(BenchRow(**base, contender=c, role=role, mode=m, status="error", error=msg))
                    continue
                info[c] = ("ok" if same else "incorrect", why, round(time.perf_counter() - t0, 3))
                for m in sweep.modes:
                    if m == "graph" and (c in case.no_graph or device != "cuda"):
                        why_skip = ("synchronizes with the host (output size is data): not capturable"
                                    if c in case.no_graph else "CUDA graphs need a CUDA device")
                        emit(BenchRow(**base, contender=c, role=role, mode=m, status="skipped",
                                      error=why_skip))
                    elif m == "graph":
                        try:
                            timed[(c, m)] = capture_graph(fn).replay
                        except Exception as e:
                            emit(BenchRow(**base, contender=c, role=role, mode=m, status="error",
                                          error=f"capture: {type(e).__name__}: {e}"))
                    else:
                        timed[(c, m)] = fn
            samples: dict[tuple[str, str], list[Timing]] = {k: [] for k in timed}
            failed: dict[tuple[str, str], str] = {}
            for _ in range(max(1, rounds)):
                for (c, m), fn in timed.items():
                    if (c, m) in failed:
                        continue
                    try:
                        samples[(c, m)].append(bench(fn, warmup_ms=decl.warmup_ms / rounds,
                                                     rep_ms=decl.rep_ms / rounds, device=device, mode=m))
                    except Exception as e:
                        failed[(c, m)] = f"{type(e).__name__}: {e}"
            for (c, m) in timed:
                role = case.roles.get(c, "pytorch")
                status, why, setup_s = info[c]
                if (c, m) in failed:
                    emit(BenchRow(**base, contender=c, role=role, mode=m, status="error",
                                  error=failed[(c, m)]))
                    continue
                t = _combine(samples[(c, m)], m)
                emit(BenchRow(**base, contender=c, role=role, mode=m, status=status,
                              median_us=t.median_us, p20_us=t.p20_us, p80_us=t.p80_us, n_iter=t.n,
                              bytes=nbytes, gbs=achieved_gbs(nbytes, t.median_us),
                              max_abs_err=0.0 if status == "ok" else None, setup_s=setup_s, error=why))
            del timed, samples, inputs, ref
            if device == "cuda":
                torch.cuda.empty_cache()
    return rows


def pick_rows(rows: Sequence[dict[str, Any]], mode: str) -> dict[str, dict[str, float]]:
    """shape -> contender -> median_us for the "ok" rows of one launch mode."""
    out: dict[str, dict[str, float]] = {}
    for r in rows:
        if r.get("mode") == mode and r.get("status") == "ok" and r.get("median_us") is not None:
            out.setdefault(r["shape"], {})[r["contender"]] = float(r["median_us"])
    return out


def speedup_frame(rows: Sequence[dict[str, Any]], kernel: str, versus: Sequence[str],
                  params: Sequence[str] = ()) -> Any:
    """A pandas DataFrame, one row per (shape, mode): the kernel's median, each contender's median and
    the kernel's speedup over it (`x_<contender>`), and over the fastest of them (`x_best`), plus the
    named shape parameters. Only "ok" (bit-identical) rows count; a contender that was incorrect or
    not measured in a mode is absent from that row."""
    import pandas as pd

    out = []
    for mode in ("plain", "graph"):
        table = pick_rows(rows, mode)
        for shape, med in table.items():
            if kernel not in med:
                continue
            p = next((json.loads(r["params"]) for r in rows if r["shape"] == shape), {})
            row: dict[str, Any] = {"shape": shape, "mode": mode, **{k: p.get(k) for k in params},
                                   kernel: med[kernel]}
            row.update(speedup_columns(med, kernel, versus, best_key="x_best"))
            out.append(row)
    return pd.DataFrame(out)


def markdown_table(frame: Any, columns: Sequence[str], digits: int = 1) -> str:
    """A GitHub markdown table of `frame[columns]` (numbers rounded, missing cells as "-"), for READMEs
    generated from the recorded CSVs rather than typed by hand."""
    head = "| " + " | ".join(columns) + " |\n|" + "---|" * len(columns) + "\n"
    lines = []
    for _, r in frame.iterrows():
        cells = []
        for c in columns:
            v = r.get(c)
            if v is None or (isinstance(v, float) and v != v):
                cells.append("-")
            elif isinstance(v, float):
                cells.append(f"{v:.2f}x" if c.startswith("x_") else f"{v:.{digits}f}")
            else:
                cells.append(str(v))
        lines.append("| " + " | ".join(cells) + " |")
    return head + "\n".join(lines) + "\n"
