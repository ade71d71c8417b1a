"""A benchmark declared as data and the runner that measures it.

A declaration (a dict literal in the case study's `bench.py`, or a YAML file) lists sweeps; each sweep is
shapes x dtypes x contenders x launch modes:

```python
BENCHMARK = {
    "name": "conv1d",
    "warmup_ms": 25, "rep_ms": 100,
    "sweeps": [
        {"name": "production", "shapes": [{"name": "production", "B": 2048, ...}],
         "dtypes": ["float16", "float32"], "contenders": ["eager", "compile_default", "triton"],
         "modes": ["plain", "graph"]},
    ],
}
```

The case study supplies a `CaseStudyBench`: how to build inputs for a shape, the contender factories by
name, the FLOP and byte counts (the formulas live in code, next to the case study), and the reference
contender whose output every other contender is checked against in the same run.
"""
from __future__ import annotations

import json
import logging
import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from case_studies.common.contenders import Factory, torch_dtype
from case_studies.common.metrics import achieved_gbs, achieved_tflops
from case_studies.common.timing import Timing, bench, bench_graph

log = logging.getLogger(__name__)

MODES = ("plain", "graph")


@dataclass
class Sweep:
    name: str
    shapes: list[dict[str, Any]]          # each has "name" plus the shape parameters
    dtypes: list[str]
    contenders: list[str]
    modes: list[str] = field(default_factory=lambda: list(MODES))


@dataclass
class BenchmarkDecl:
    name: str
    sweeps: list[Sweep]
    warmup_ms: float = 25.0
    rep_ms: float = 100.0

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "BenchmarkDecl":
        sweeps = [Sweep(**s) for s in d["sweeps"]]
        for s in sweeps:
            bad = [m for m in s.modes if m not in MODES]
            if bad:
                raise ValueError(f"sweep {s.name}: unknown launch modes {bad}; expected {MODES}")
            for i, shp in enumerate(s.shapes):
                shp.setdefault("name", f"{s.name}_{i}")
        return cls(name=d["name"], sweeps=sweeps, warmup_ms=d.get("warmup_ms", 25.0),
                   rep_ms=d.get("rep_ms", 100.0))

    @classmethod
    def load(cls, src: "str | Path | dict[str, Any]") -> "BenchmarkDecl":
        """From a dict, a `.yaml`/`.yml` file, or a `.json` file."""
        if isinstance(src, dict):
            return cls.from_dict(src)
        p = Path(src)
        if p.suffix in (".yaml", ".yml"):
            import yaml

            return cls.from_dict(yaml.safe_load(p.read_text()))
        return cls.from_dict(json.loads(p.read_text()))

    def n_cases(self) -> int:
        return sum(len(s.shapes) * len(s.dtypes) * len(s.contenders) * len(s.modes) for s in self.sweeps)


@dataclass
class CaseStudyBench:
    """What a case study gives the runner."""
    make_inputs: Callable[[dict[str, Any], torch.dtype, str], Sequence[Any]]
    contenders: dict[str, Factory]
    flops: Callable[[dict[str, Any]], float]
    nbytes: Callable[[dict[str, Any], str], float]
    tolerances: dict[str, tuple[float, float]]
    reference: str = "eager"
    roles: dict[str, str] = field(default_factory=dict)  # contender -> "baseline" | "pytorch" | "kernel"


@dataclass
class BenchRow:
    benchmark: str
    sweep: str
    shape: str
    params: str               # JSON of the shape parameters
    dtype: str
    contender: str
    role: str
    mode: str
    status: str               # "ok" | "incorrect" | "error" | "skipped"
    median_us: float | None = None
    p20_us: float | None = None
    p80_us: float | None = None
    n_iter: int | None = None
    flops: float | None = None
    bytes: float | None = None
    tflops: float | None = None
    gbs: float | None = None
    max_abs_err: float | None = None
    setup_s: float | None = None
    error: str = ""

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def _max_abs_err(out: Any, ref: Any) -> float:
    return float((out.float() - ref.float()).abs().max().item()) if out.numel() else 0.0


def _close(out: Any, ref: Any, atol: float, rtol: float) -> bool:
    return out.shape == ref.shape and bool(torch.allclose(out.float(), ref.float(), atol=atol, rtol=rtol))


def run_benchmark(decl: BenchmarkDecl, case: CaseStudyBench, *, device: str = "cuda",
                  time_budget_s: float | None = None,
                  on_row: Callable[[BenchRow], None] | None = None) -> list[BenchRow]:
    """Measure every (sweep, shape, dtype, contender, mode) of `decl`; one row each.

    Every contender's output is checked against the reference contender's output at the dtype's
    tolerance; an incorrect contender is timed anyway and its row says "incorrect". A contender that
    fails to build or run keeps its reason in `error`. Past `time_budget_s` the remaining rows are
    recorded as "skipped" (the device lease is short; a partial table is better than none).
    """
    t_start = time.perf_counter()
    rows: list[BenchRow] = []

    def emit(row: BenchRow) -> None:
        rows.append(row)
        if on_row is not None:
            on_row(row)
        log.info("%s %s %s %s %s: %s %s", row.sweep, row.shape, row.dtype, row.contender, row.mode,
                 row.status, f"{row.median_us:.2f} us" if row.median_us is not None else row.error[:120])

    for sweep in decl.sweeps:
        for shape in sweep.shapes:
            params = {k: v for k, v in shape.items() if k != "name"}
            for dtype in sweep.dtypes:
                base = dict(benchmark=decl.name, sweep=sweep.name, shape=shape["name"],
                            params=json.dumps(params, sort_keys=True), dtype=dtype)
                over = time_budget_s is not None and time.perf_counter() - t_start > time_budget_s
                if over:
                    for c in sweep.contenders:
                        for m in sweep.modes:
                            emit(BenchRow(**base, contender=c, role=case.roles.get(c, "pytorch"), mode=m,
                                          status="skipped", error="time budget spent"))
                    continue
                inputs = case.make_inputs(params, torch_dtype(dtype), device)
                flops, nbytes = case.flops(params), case.nbytes(params, dtype)
                atol, rtol = case.tolerances[dtype]
                ref = case.contenders[case.reference](params, inputs)()
                for c in sweep.contenders:
                    role = case.roles.get(c, "pytorch")
                    t0 = time.perf_counter()
                    try:
                        fn = case.contenders[c](params, inputs)
                        out = fn()
                        err = _max_abs_err(out, ref)
                        status = "ok" if _close(out, ref, atol, rtol) else "incorrect"
                    except Exception as e:  # a contender that cannot build is a result, keep its reason
                        msg = f"{type(e).__name__}: {e}\n{traceback.format_exc()[-800:]}"
                        for m in sweep.modes:
                            emit(BenchRow(**base, contender=c, role=role, mode=m, status="error", error=msg))
                        continue
                    setup_s = time.perf_counter() - t0
                    for m in sweep.modes:
                        try:
                            t: Timing
                            if device == "cuda" and m == "graph":
                                t = bench_graph(fn, warmup_ms=decl.warmup_ms, rep_ms=decl.rep_ms)
                            elif m == "graph":
                                emit(BenchRow(**base, contender=c, role=role, mode=m, status="skipped",
                                              error="CUDA graphs need a CUDA device"))
                                continue
                            else:
                                t = bench(fn, warmup_ms=decl.warmup_ms, rep_ms=decl.rep_ms, device=device)
                        except Exception as e:
                            emit(BenchRow(**base, contender=c, role=role, mode=m, status="error",
                                          max_abs_err=err, error=f"{type(e).__name__}: {e}"))
                            continue
                        emit(BenchRow(**base, contender=c, role=role, mode=m, status=status,
                                      median_us=t.median_us, p20_us=t.p20_us, p80_us=t.p80_us, n_iter=t.n,
                                      flops=flops, bytes=nbytes, tflops=achieved_tflops(flops, t.median_us),
                                      gbs=achieved_gbs(nbytes, t.median_us), max_abs_err=err,
                                      setup_s=round(setup_s, 3)))
                    del fn
                del inputs, ref
                if device == "cuda":
                    torch.cuda.empty_cache()
    return rows


def speedup_columns(med: dict[str, float], kernel: str, versus: Sequence[str],
                    best_key: str = "x_best_pytorch") -> dict[str, Any]:
    """Each contender's median and its ratio to the kernel's, plus the fastest contender present."""
    row: dict[str, Any] = {}
    present = [v for v in versus if v in med]
    for v in present:
        row[v] = med[v]
        row[f"x_{v}"] = med[v] / med[kernel]
    if present:
        best = min(present, key=lambda v: med[v])
        row["best_pytorch"] = best
        row[best_key] = med[best] / med[kernel]
    return row


def speedup_table(rows: Sequence[dict[str, Any]], *, kernel: str,
                  versus: Sequence[str]) -> list[dict[str, Any]]:
    """Per (shape, dtype, mode): our median and its speedup over each contender in `versus`, and over the
    fastest of them (the strongest PyTorch contender in the same launch mode)."""
    by: dict[tuple[str, str, str], dict[str, float]] = {}
    for r in rows:
        if r.get("status") == "ok" and r.get("median_us") is not None:
            by.setdefault((r["shape"], r["dtype"], r["mode"]), {})[r["contender"]] = float(r["median_us"])
    out = []
    for (shape, dtype, mode), med in by.items():
        if kernel not in med:
            continue
        row: dict[str, Any] = {"shape": shape, "dtype": dtype, "mode": mode, kernel: med[kernel]}
        row.update(speedup_columns(med, kernel, versus, best_key="x_best_pytorch"))
        out.append(row)
    return out
