"""Code search over the project's kernels and the corpus: exact substring, regex and filename
queries, each match with its path, line number and a context snippet (paper section 3.3)."""

from __future__ import annotations

import fnmatch
import re
from dataclasses import dataclass
from pathlib import Path

from retrieval.corpus import REPO_ROOT

DEFAULT_ROOTS: tuple[str, ...] = ("case_studies", "examples", "retrieval/corpus")
_SUFFIXES = {".py", ".md", ".txt", ".yaml", ".yml", ".json"}
MODES = ("exact", "regex", "filename")


@dataclass
class CodeMatch:
    path: str  # relative to the repository root
    line: int  # 1-based; 0 for filename matches
    snippet: str

    def render(self) -> str:
        loc = f"{self.path}:{self.line}" if self.line else self.path
        return f"--- {loc}\n{self.snippet}"


def _files(roots: tuple[str, ...], root: Path) -> list[Path]:
    out: list[Path] = []
    for r in roots:
        base = root / r
        if base.is_file():
            out.append(base)
        elif base.is_dir():
            out.extend(
                p
                for p in sorted(base.rglob("*"))
                if p.is_file() and p.suffix in _SUFFIXES and "__pycache__" not in p.parts
            )
    return out


def code_search(
    query: str,
    mode: str = "exact",
    *,
    roots: tuple[str, ...] = DEFAULT_ROOTS,
    root: Path = REPO_ROOT,
    context: int = 3,
    max_results: int = 20,
    ignore_case: bool = False,
) -> list[CodeMatch]:
    """`exact`: substring; `regex`: Python regular expression (per line); `filename`: a glob or a
    substring of the relative path (the snippet is the file's head)."""
    if not isinstance(query, str) or not query.strip():
        raise ValueError("empty code-search query")
    if mode not in MODES:
        raise ValueError(f"unknown code-search mode {mode!r}: expected one of {MODES}")
    files = _files(roots, root)
    matches: list[CodeMatch] = []
    if mode == "filename":
        q = query.lower() if ignore_case else query
        for p in files:
            rel = p.relative_to(root).as_posix()
            r = rel.lower() if ignore_case else rel
            if fnmatch.fnmatch(r, q) or fnmatch.fnmatch(p.name, q) or q in r:
                head = "\n".join(p.read_text(encoding="utf-8", errors="replace").splitlines()[: 2 * context + 1])
                matches.append(CodeMatch(rel, 0, head))
                if len(matches) >= max_results:
                    break
        return matches
    flags = re.IGNORECASE if ignore_case else 0
    try:
        pat = re.compile(query if mode == "regex" else re.escape(query), flags)
    except re.error as exc:
        raise ValueError(f"bad regular expression {query!r}: {exc}") from exc
    for p in files:
        lines = p.read_text(encoding="utf-8", errors="replace").splitlines()
        rel = p.relative_to(root).as_posix()
        last_end = -1
        for i, line in enumerate(lines):
            if not pat.search(line) or i <= last_end:
                continue  # matches inside the previous snippet are already shown
            lo, hi = max(0, i - context), min(len(lines), i + context + 1)
            snippet = "\n".join(f"{j + 1:5d}{'>' if j == i else ' '} {lines[j]}" for j in range(lo, hi))
            matches.append(CodeMatch(rel, i + 1, snippet))
            last_end = hi - 1
            if len(matches) >= max_results:
                return matches
    return matches
