"""Turn an evaluation record (an `EvalResult`, its dict, or any object with the same fields) into a
retrieval query: what failed, the decisive error line, violations, the mismatch pattern, a speedup
below 1, and the profiler's summary."""

from __future__ import annotations

import re
from typing import Any, Mapping

# Lines of a traceback that carry the diagnosis (exception class and message), most specific first.
_ERROR_LINE = re.compile(
    r"(InterpreterError: .*|CompilationError.*|UnsupportedLanguageConstruct.*|OutOfResources: .*|"
    r"out of resource.*|illegal memory access.*|misaligned address.*|\w+Error: .*|\w+Error\(.*)"
)
_SOURCE_CARET = re.compile(r"^\s*\^+\s*$")


def _get(obj: Any, name: str, default: Any = None) -> Any:
    if isinstance(obj, Mapping):
        return obj.get(name, default)
    return getattr(obj, name, default)


def key_error_lines(error: str, limit: int = 2) -> list[str]:
    """The most informative lines of an error text: exception lines from the end, plus the message
    line the Triton compiler prints under its caret."""
    lines = [l.rstrip() for l in (error or "").splitlines() if l.strip()]
    out: list[str] = []
    for i, l in enumerate(lines):
        if _SOURCE_CARET.match(l) and i + 1 < len(lines):
            out.append(lines[i + 1].strip())  # compiler: "at 3:16:\n<source>\n   ^\nmessage"
    for l in reversed(lines):
        m = _ERROR_LINE.search(l)
        if m and m.group(1).strip() not in out:
            out.append(m.group(1).strip())
        if len(out) >= limit:
            break
    if not out and lines:
        out.append(lines[-1].strip())
    return [o[:300] for o in out[:limit]]


def diagnosis_query(result: Any, profile_summary: str | None = None) -> str:
    """A query string for `Retriever.retrieve` from an evaluation result."""
    status = _get(result, "status", "")
    status = getattr(status, "value", status) or "unknown"
    parts: list[str] = [f"status {status}"]
    error = _get(result, "error", "") or ""
    violations = list(_get(result, "violations", []) or [])
    if status in ("compile_error", "runtime_error", "crashed", "timeout", "infra_error", "bad_spec"):
        parts.extend(key_error_lines(error))
    if violations:
        parts.append("violations: " + ", ".join(violations[:5]))
    if status == "incorrect":
        details = _get(result, "details", {}) or {}
        mae, mre = _get(result, "max_abs_err"), _get(result, "max_rel_err")
        if mae is not None:
            parts.append(f"numerical mismatch: max abs error {mae:.3g}, max rel error {mre or 0:.3g}")
        else:
            parts.append("numerical mismatch against the reference")
        for key in ("mismatch", "first_mismatch", "nan_count", "inf_count", "shape", "failed_shape"):
            if key in details:
                parts.append(f"{key.replace('_', ' ')}: {details[key]}")
        if error:
            parts.extend(key_error_lines(error, 1))
    speedup = _get(result, "speedup", None)
    if status == "passed" and speedup is not None and speedup < 1.0:
        parts.append(f"correct but slower than the baseline (speedup {speedup:.2f}x): performance below baseline")
    elif status == "passed" and speedup:
        parts.append(f"correct, speedup {speedup:.2f}x: look for further optimization")
    if profile_summary:
        parts.append("profile: " + " ".join(profile_summary.split())[:400])
    return ". ".join(p for p in parts if p)
