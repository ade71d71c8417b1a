"""The harness's one statistic of a timing: linear-interpolated quantiles (numpy's default).

The timing protocol itself is `workbench/harness/rounds.py` (the trusted server's clock, rounds on fresh
inputs, no L2 flush). The do_bench-style protocol (CUDA events per call, a 256 MB L2 flush before each) is
`case_studies/common/timing.py`, used by the case studies and the benchmark scripts; the harness keeps this
definition of its own because the workbench must not depend on the case studies (its callers), and the
case-study kernels, which import that module, must not depend on the workbench (tests/test_imports.py).
"""
from __future__ import annotations


def quantile(xs: list[float], q: float) -> float:
    """Linear-interpolated quantile of `xs` (q in [0, 1]); the same definition as
    `case_studies.common.timing.quantile`."""
    s = sorted(xs)
    pos = q * (len(s) - 1)
    lo = int(pos)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (pos - lo)
