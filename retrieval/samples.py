"""Code samples keyed by the aten ops of the problem they solve, so a prompt only shows a kernel for
the same ops as the spec (issue 19: with plain similarity retrieval a 0.5B model copied a kernel for
another op verbatim).

A sample is a kernel file with a spec beside it (`examples/<name>/candidate.py` + `spec.py`,
`case_studies/<name>/kernel.py` + `spec.py`), or a passing kernel of an earlier run that the caller
hands in with its spec's ops. This module knows nothing of how ops are captured: the caller passes
`ops_of(spec_path) -> list[str]` (the search uses the lowering's capture), so retrieval stays a library.

    index = OpSampleIndex(ops_of)
    index.match(["aten.softmax.default"])   # [(1.0, CodeSample(path="examples/row_softmax/candidate.py", ...))]
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from retrieval.corpus import REPO_ROOT

log = logging.getLogger(__name__)

# Kernel files and the spec each one solves (relative to the repository root).
SAMPLE_GLOBS: tuple[str, ...] = ("examples/*/candidate.py", "case_studies/*/kernel.py")
SPEC_NAME = "spec.py"


@dataclass(frozen=True)
class CodeSample:
    path: str  # where the kernel comes from: a repository path or "memory:<run_id>/<node_id>"
    source: str
    ops: frozenset[str]
    spec: str = ""  # the spec it solves (path or spec key)
    fitness: float | None = None  # measured speedup, for samples from the context memory


def op_overlap(want: Iterable[str], have: Iterable[str]) -> float:
    """Jaccard overlap of two op sets: 1.0 for the same ops, 0.0 for nothing shared."""
    a, b = frozenset(want), frozenset(have)
    if not a and not b:
        return 0.0  # two empty keys say nothing about each other
    return len(a & b) / len(a | b)


class OpSampleIndex:
    """The repository's kernels keyed by their spec's ops, built on first use (one capture per spec)."""

    def __init__(
        self,
        ops_of: Callable[[Path], Sequence[str]],
        *,
        root: Path = REPO_ROOT,
        globs: tuple[str, ...] = SAMPLE_GLOBS,
    ) -> None:
        self.ops_of = ops_of
        self.root = Path(root)
        self.globs = globs
        self._samples: list[CodeSample] | None = None
        self._lock = threading.Lock()

    def samples(self) -> list[CodeSample]:
        with self._lock:
            if self._samples is None:
                self._samples = self._build()
            return list(self._samples)

    def _build(self) -> list[CodeSample]:
        out: list[CodeSample] = []
        for g in self.globs:
            for kernel in sorted(self.root.glob(g)):
                spec = kernel.parent / SPEC_NAME
                if not spec.is_file():
                    continue
                try:
                    ops = frozenset(self.ops_of(spec))
                except Exception as exc:  # one spec that cannot be captured must not hide the others
                    log.info("code sample %s left out: its spec's ops could not be captured: %s", kernel, exc)
                    continue
                if not ops:
                    continue
                rel = kernel.relative_to(self.root).as_posix()
                out.append(CodeSample(rel, kernel.read_text(encoding="utf-8"), ops, spec=str(spec)))
        log.info("op-keyed code samples: %d", len(out))
        return out

    def match(
        self,
        ops: Iterable[str],
        *,
        k: int = 1,
        min_overlap: float = 1.0,
        extra: Iterable[CodeSample] = (),
        exclude_specs: Iterable[str] = (),
    ) -> list[tuple[float, CodeSample]]:
        """The `k` samples whose ops overlap `ops` at least `min_overlap` (1.0: the same op set), best
        first; `extra` adds candidates (passing kernels from the context memory) to the repository's."""
        want = frozenset(ops)
        if not want:
            return []
        skip = {str(Path(s).resolve()) for s in exclude_specs}
        scored = []
        for s in [*self.samples(), *extra]:
            if s.spec and str(Path(s.spec).resolve()) in skip:
                continue  # the spec's own kernel is its answer, not a sample
            score = op_overlap(want, s.ops)
            if score >= min_overlap and score > 0:
                scored.append((score, s))
        scored.sort(key=lambda t: (-t[0], -(t[1].fitness or 0.0), t[1].path))
        return scored[:k]
