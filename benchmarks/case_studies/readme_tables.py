"""Regenerate the results blocks of the conv1d, Optimized FM and PFFN READMEs from their recorded CSVs.

    PYTHONPATH=. python benchmarks/case_studies/readme_tables.py

Lives here, not in `case_studies/common/report.py`: the report is a library the case studies share, and a
library that imports three of its users is the wrong way round.
"""
from __future__ import annotations

import sys
from pathlib import Path

if __package__ in (None, ""):   # run as a script: the repository root on the path, as with PYTHONPATH=.
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from case_studies.common.report import update_readme  # noqa: E402
from case_studies.conv1d.dispatch import Conv1dDispatcher  # noqa: E402
from case_studies.optimized_fm.dispatch import OptimizedFMDispatcher  # noqa: E402
from case_studies.pffn.dispatch import PFFNDispatcher  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
DISPATCHERS = {"conv1d": Conv1dDispatcher, "optimized_fm": OptimizedFMDispatcher, "pffn": PFFNDispatcher}


def main() -> int:
    for name, disp in DISPATCHERS.items():
        rel = f"results/case_studies/{name}/bench.csv"
        update_readme(ROOT / "case_studies" / name / "README.md", ROOT / rel, disp, rel)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
