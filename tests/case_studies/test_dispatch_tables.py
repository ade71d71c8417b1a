"""The dispatch tables ship with the package: each `case_studies/<case>/dispatch.csv` holds the rows of the
recorded benchmark (`results/case_studies/<case>/bench.csv`) its dispatcher decides from, unchanged, and a case
study installed from a wheel (no results/ beside it) still dispatches from them."""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tools.dispatch_tables import CASES, ROOT, dispatcher_class, shipped_path, table_text


@pytest.mark.parametrize("case", CASES)
def test_the_shipped_table_is_the_recorded_rows_its_dispatcher_reads(case):
    """A GPU run that rewrites a bench.csv without `python tools/dispatch_tables.py` fails here."""
    assert shipped_path(case).read_text() == table_text(case), f"stale: python tools/dispatch_tables.py --case {case}"
    cls = dispatcher_class(case)
    shipped = cls(shipped_path(case))
    recorded = cls(ROOT / "results" / "case_studies" / case / "bench.csv")
    assert shipped.recorded() and sorted(map(repr, shipped.recorded())) == sorted(map(repr, recorded.recorded()))


# Run inside the installed copy, from a folder with no checkout in it: where each dispatch module and its table
# were loaded from, how many recorded shapes its dispatcher holds and how many of them take the kernel.
_PROBE = """
import importlib, json, sys
import case_studies
from case_studies.common.dispatch import ShapeDispatcher
out = {"package": case_studies.__file__}
for case in sys.argv[1:]:
    mod = importlib.import_module(f"case_studies.{case}.dispatch")
    (cls,) = [v for v in vars(mod).values() if isinstance(v, type) and issubclass(v, ShapeDispatcher)
              and v.__module__ == mod.__name__]
    rec = cls(mod.DISPATCH_CSV).recorded()
    out[case] = {"table": str(mod.DISPATCH_CSV), "exists": mod.DISPATCH_CSV.is_file(), "shapes": len(rec),
                 "kernel": sum(1 for _, _, wins in rec if wins)}
print(json.dumps(out))
"""

def test_a_case_study_installed_from_a_wheel_keeps_its_dispatch(tmp_path):
    src = tmp_path / "src"
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info")
    for top in ("platforms", "workbench", "retrieval", "profiling", "case_studies"):
        shutil.copytree(ROOT / top, src / top, ignore=ignore)
    for f in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / f, src / f)
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "-q"]
    wheels = tmp_path / "wheels"
    r = subprocess.run([*pip, "wheel", "--no-deps", "--no-build-isolation", "--no-index", "-w", str(wheels),
                        str(src)], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    (wheel,) = wheels.glob("kernel_workbench-*.whl")
    site = tmp_path / "site"
    r = subprocess.run([*pip, "install", "--no-deps", "--no-index", "--no-compile", "--target", str(site),
                        str(wheel)], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    run_dir = tmp_path / "elsewhere"
    run_dir.mkdir()
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(site), "TRITON_INTERPRET": "1", "PYTHONNOUSERSITE": "1"}
    r = subprocess.run([sys.executable, "-c", _PROBE, *CASES], cwd=run_dir, capture_output=True, text=True,
                       timeout=300, env=env)
    assert r.returncode == 0, r.stderr[-3000:]
    got = json.loads(r.stdout.strip().splitlines()[-1])
    assert Path(got["package"]).resolve().is_relative_to(site.resolve()), got["package"]
    for case in CASES:
        expect = dispatcher_class(case)(shipped_path(case)).recorded()
        g = got[case]
        assert g["exists"] and Path(g["table"]).resolve().is_relative_to(site.resolve()), g
        assert g["shapes"] == len(expect) > 0, (case, g)
        assert g["kernel"] == sum(1 for _, _, wins in expect if wins), (case, g)
    assert sum(got[c]["kernel"] for c in CASES) > 0   # the installed copy takes its kernels somewhere
