"""Suites: KernelBench (levels 1-3, from the user's folder) and an OpInfo ATen suite, run end to end.

```python
from workbench.suites import run_kernelbench
run = run_kernelbench("../shared/kernelbench", levels=[1], problems="1-5", draft="lower", budget=0)
run.report["levels"]["1"]["fast_p"], run.path / "report.md"
```
A run is a directory with its SQLite store (`suite.sqlite`): `--resume RUN` re-runs only what had not
finished. Reports: `report.json` (schema in docs/suites.md), `report.md`, `problems.csv`, plots.
"""
from __future__ import annotations

from workbench.suites.api import run_aten, run_kernelbench
from workbench.suites.problems import Problem, SuiteError, kernelbench_problems
from workbench.suites.report import load_report
from workbench.suites.runner import SuiteRun
from workbench.suites.scoring import fast_p, geomean_speedup
from workbench.suites.sizing import auto_size

__all__ = ["Problem", "SuiteError", "SuiteRun", "auto_size", "fast_p", "geomean_speedup", "kernelbench_problems",
           "load_report", "run_aten", "run_kernelbench"]
