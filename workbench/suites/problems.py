"""The problems of a suite: KernelBench files found in the user's folder, selected by level and number.

KernelBench's layout: `<root>/level<L>/<N>_<Name>.py`. The files are read where they are, never copied.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

_NUMBERED = re.compile(r"^(\d+)_(.+)\.py$")


class SuiteError(ValueError):
    """Bad input to a suite (missing folder, bad range, unknown run): one clear line."""


@dataclass(frozen=True)
class Problem:
    problem_id: str      # unique in the run, e.g. "L1/19_ReLU"
    level: str           # "1".."3" (KernelBench) or a dtype (ATen suite)
    name: str            # the file stem, e.g. "19_ReLU"
    spec_path: str       # absolute path of the spec file
    number: int = 0      # KernelBench's problem number (0 for the ATen suite)


def parse_ranges(text: str | None) -> set[int] | None:
    """`1-20,23` -> {1..20, 23}; None or "" -> None (every problem)."""
    if not text:
        return None
    out: set[int] = set()
    for part in text.split(","):
        part = part.strip()
        m = re.fullmatch(r"(\d+)(?:-(\d+))?", part)
        if not m:
            raise SuiteError(f"--problems expects numbers and ranges like 1-20,23; got {part!r}")
        lo, hi = int(m.group(1)), int(m.group(2) or m.group(1))
        if hi < lo:
            raise SuiteError(f"--problems: range {part!r} runs backwards")
        out.update(range(lo, hi + 1))
    return out


def parse_levels(text: str | list[int] | None) -> list[int]:
    if text is None or text == "":
        return [1, 2, 3]
    if isinstance(text, (list, tuple)):
        return [int(x) for x in text]
    try:
        return sorted({int(x) for x in str(text).split(",") if x.strip()})
    except ValueError:
        raise SuiteError(f"--levels expects numbers like 1,2,3; got {text!r}") from None


def kernelbench_problems(root: str | Path, levels: list[int] | str | None = None,
                         problems: set[int] | str | None = None) -> list[Problem]:
    """KernelBench problems under `root`, ordered by level then number."""
    base = Path(root).expanduser()
    if not base.is_dir():
        raise SuiteError(f"KernelBench folder not found: {base}")
    wanted = parse_ranges(problems) if isinstance(problems, str) else problems
    out: list[Problem] = []
    for level in parse_levels(levels):
        folder = base / f"level{level}"
        if not folder.is_dir():
            raise SuiteError(f"{base} has no level{level}/ folder")
        found = []
        for f in folder.iterdir():
            m = _NUMBERED.match(f.name)
            if m and f.is_file():
                found.append((int(m.group(1)), f))
        for number, f in sorted(found):
            if wanted is None or number in wanted:
                out.append(Problem(problem_id=f"L{level}/{f.stem}", level=str(level), name=f.stem,
                                   spec_path=str(f.resolve()), number=number))
    if not out:
        raise SuiteError(f"no KernelBench problem in {base} matches levels {levels} and problems {problems}")
    return out
