"""Every kernel file with PROBES follows the probe convention of docs/CONTRACTS.md (read statically).

Checked per file: regions are declared in a docstring (`Probe regions: ...`), every declared region
is entered and exited, nothing undeclared is entered, no exit lacks an enter, so the self-check knows
which regions to expect (the exact pairing is checked when compiling with probes and on the GPU).
"""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

import pytest

from profiling.probes import parse_regions_line

ROOT = Path(__file__).resolve().parents[2]
_ENTER = re.compile(r'(?:enter_scope|pl\.scope)\(\s*"([^"]+)"')
_EXIT = re.compile(r'exit_scope\(\s*"([^"]+)"')
_FLAG = re.compile(r"PROBES\s*:\s*tl\.constexpr")
# every module that compiles probes (a `PROBES: tl.constexpr` switch), whatever its name: a case study's
# JIT code need not sit in its kernel.py (conv1d's is in gather_jit.py and tma.py)
FILES = sorted(
    p
    for p in [ROOT / "profiling" / "kernels.py", *ROOT.glob("case_studies/*/*.py")]
    if _FLAG.search(p.read_text())
)


def _docstring_declarations(src: str) -> set[str]:
    names: set[str] = set()
    for doc in re.findall(r'"""(.*?)"""', src, re.DOTALL):
        names.update(parse_regions_line(doc) or [])
    return names


@pytest.mark.parametrize("path", FILES, ids=lambda p: str(p.relative_to(ROOT)))
def test_probe_convention(path):
    src = path.read_text()
    assert _FLAG.search(src), "probes must sit behind a `PROBES: tl.constexpr` switch"
    declared = _docstring_declarations(src)
    entered, exited = Counter(_ENTER.findall(src)), Counter(_EXIT.findall(src))
    with_cm = set(re.findall(r'pl\.scope\(\s*"([^"]+)"', src))  # `with pl.scope(...)` closes itself
    assert declared, "no `Probe regions: ...` line in a docstring"
    assert set(entered) == declared, f"declared {sorted(declared)} but the code enters {sorted(entered)}"
    # counts can differ (one enter, an exit in each branch of a constexpr `if`); each needs both
    assert set(exited) <= set(entered), f"exits without an enter: {sorted(set(exited) - set(entered))}"
    for name in set(entered) - with_cm:
        assert exited[name] >= 1, f"region {name!r} is entered but never exited"
    assert all(re.search(r'"(?:%s)"' % re.escape(n), src) for n in declared)
    assert all(re.fullmatch(r"[a-z][a-z0-9_]*", n) for n in declared), "region names are snake_case"


def test_files_found():
    assert ROOT / "profiling" / "kernels.py" in FILES
