"""The typed record every evaluation returns (the harness's only output).

The JSON schema of `EvalResult.to_json()` is documented in the README ("Harness JSON schema").
"""
from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from enum import Enum
from typing import Any


class Status(str, Enum):
    PASSED = "passed"
    INCORRECT = "incorrect"
    COMPILE_ERROR = "compile_error"
    RUNTIME_ERROR = "runtime_error"
    TIMEOUT = "timeout"
    CRASHED = "crashed"
    REJECTED = "rejected"          # a rule was broken (see `violations`)
    BAD_SPEC = "bad_spec"          # the spec or the command line is at fault, not the candidate
    INFRA_ERROR = "infra_error"    # the evaluation infrastructure failed (lost worker, ...)


@dataclass
class EvalResult:
    status: Status
    fitness: float = 0.0
    speedup: float = 0.0
    correct: bool = False
    runtime_us: float | None = None
    runtime_p20_us: float | None = None
    runtime_p80_us: float | None = None
    baseline_runtime_us: float | None = None
    baseline_p20_us: float | None = None
    baseline_p80_us: float | None = None
    # Both clocks, side by side (docs/harness.md): device time per call by CUDA-graph replay (what
    # do_bench measures; None where the forward cannot be captured, or on the CPU) and wall time per call
    # with host launch included. `timing_basis` says which one `runtime_us` and the fitness use.
    device_time_us: float | None = None
    wall_time_us: float | None = None
    baseline_device_time_us: float | None = None
    baseline_wall_time_us: float | None = None
    timing_basis: str = "wall"
    max_abs_err: float | None = None
    max_rel_err: float | None = None
    device: str = "cpu"
    platform: dict[str, Any] = field(default_factory=dict)
    error: str = ""
    violations: list[str] = field(default_factory=list)
    trials: int = 0
    shapes: list[str] = field(default_factory=list)
    triton_launches: int = 0
    aten_ops: list[str] = field(default_factory=list)
    stdout_tail: str = ""
    timings_s: dict[str, float] = field(default_factory=dict)  # compile, correctness, timing, overhead, wall
    details: dict[str, Any] = field(default_factory=dict)
    isolation: dict[str, Any] = field(default_factory=dict)  # what the trusted side saw of the sandbox

    @property
    def passed(self) -> bool:
        return self.status == Status.PASSED

    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d["status"] = self.status.value
        return d

    def to_json(self, **kw: Any) -> str:
        return json.dumps(self.to_dict(), **kw)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "EvalResult":
        names = {f.name for f in dataclasses.fields(cls)}
        kw = {k: v for k, v in d.items() if k in names}
        kw["status"] = Status(kw["status"])
        return cls(**kw)

    def summary(self) -> str:
        """One line for logs and tables."""
        if self.passed:
            return (f"passed: speedup {self.speedup:.3g}x ({self.runtime_us:.1f} us vs "
                    f"{self.baseline_runtime_us:.1f} us)")
        why = "; ".join(self.violations) if self.violations else (self.error.strip().splitlines() or [""])[-1]
        return f"{self.status.value}: {why[:200]}"
