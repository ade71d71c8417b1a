"""Turn a harness record into the short text the universal operator (and a person) reads."""

from __future__ import annotations

import logging
from typing import Any

from workbench.result import EvalResult, Status

log = logging.getLogger(__name__)

_MAX_ERROR_CHARS = 1800


def _tail(text: str, limit: int) -> str:
    text = text.strip()
    return text if len(text) <= limit else "...\n" + text[-limit:]


def _profile_summary(profile: Any) -> str:
    """The profiler's summary when the profiling package is installed, else nothing."""
    if isinstance(profile, str):
        return profile
    try:
        from profiling import summarize
    except ImportError:
        return ""
    try:
        return str(summarize(profile))
    except Exception as exc:  # a profile we cannot read must not stop the search
        log.warning("profiling.summarize failed: %s", exc)
        return ""


def diagnose(result: EvalResult) -> str:
    """What happened to a candidate: the failure text, the mismatch, or the timings and profile."""
    lines: list[str] = [f"status: {result.status.value}"]
    if result.status == Status.PASSED:
        lines.append(
            f"correct; speedup {result.speedup:.3g}x over the reference "  # .3f printed 0.000x for the interpreter
            f"(candidate median {_us(result.runtime_us)} "
            f"[p20 {_us(result.runtime_p20_us)}, p80 {_us(result.runtime_p80_us)}], "
            f"reference median {_us(result.baseline_runtime_us)}) on {result.device}"
        )
        if result.triton_launches:
            lines.append(f"triton launches over the evaluation (trials, autotuning, timing): {result.triton_launches}")
        if result.aten_ops:
            lines.append("torch ops dispatched in forward: " + ", ".join(result.aten_ops[:12]))
    elif result.status == Status.INCORRECT:
        lines.append(
            f"wrong output: max abs error {_num(result.max_abs_err)}, "
            f"max rel error {_num(result.max_rel_err)}"
        )
        mismatch = result.details.get("mismatch") if isinstance(result.details, dict) else None
        if mismatch:
            lines.append(f"mismatch report: {_tail(str(mismatch), 800)}")
    if result.violations:
        lines.append("rules broken: " + ", ".join(result.violations))
    if result.error and result.status != Status.PASSED:
        lines.append("error:\n" + _tail(result.error, _MAX_ERROR_CHARS))
    if result.stdout_tail and result.status in (Status.CRASHED, Status.RUNTIME_ERROR, Status.TIMEOUT):
        lines.append("output tail:\n" + _tail(result.stdout_tail, 600))
    profile = result.details.get("profile") if isinstance(result.details, dict) else None
    if profile:
        summary = _profile_summary(profile)
        if summary:
            lines.append("profile:\n" + _tail(summary, 1200))
    return "\n".join(lines)


def _us(v: float | None) -> str:
    return "n/a" if v is None else f"{v:.1f} us"


def _num(v: float | None) -> str:
    return "n/a" if v is None else f"{v:.3g}"
