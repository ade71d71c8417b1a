"""The typed config of a suite run, saved in its store so `--resume` continues it unchanged."""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from workbench.suites.problems import SuiteError

# Largest tensor (elements) on the CPU interpreter: a lowered pointwise kernel over 64 Ki elements and
# a 256^3 matmul each take about a second there, so one evaluation stays in the seconds.
DEFAULT_CPU_MAX_ELEMS = 1 << 16
SEEDS = ("lower", "none")
# What a resumption may change: parallelism, limits, the backend; never the problems or how they are seeded.
RESUMABLE = ("workers", "evaluator", "timeout_s", "prepare_timeout_s")


@dataclass
class SuiteConfig:
    suite: str                                  # kernelbench | aten
    root: str | None = None                     # KernelBench folder
    levels: list[int] = field(default_factory=lambda: [1, 2, 3])
    problems: str | None = None                 # "1-20,23": KernelBench numbers in each level
    ops: list[str] | None = None                # ATen suite: OpInfo names (None: the whole in-scope set)
    dtypes: list[str] = field(default_factory=lambda: ["float32"])
    seed: str = "lower"                         # lower | none
    seed_dir: str | None = None                 # candidates named after the problems (<name>.py)
    llm: str = "none"
    llm_options: dict[str, Any] = field(default_factory=dict)
    llm_max_new_tokens: int = 2048              # per reply: prompt + reply must fit the model's context
    budget: int = 0                             # search nodes after the seed; 0: evaluate the seed only
    device: str = "cpu"                         # resolved: cpu | cuda
    workers: int = 1
    evaluator: str = "local"
    max_elems: int | None = None                # None: published sizes
    timeout_s: float = 300.0                    # per evaluation (the harness's limit)
    prepare_timeout_s: float = 120.0            # per problem: import, sizing, lowering
    trials: int = 3
    compile_baseline: bool = False              # time torch.compile too (GPU)

    def validate(self) -> None:
        if self.suite not in ("kernelbench", "aten"):
            raise SuiteError(f"unknown suite {self.suite!r}: expected kernelbench or aten")
        if self.seed not in SEEDS:
            raise SuiteError(f"--seed expects lower or none, got {self.seed!r}")
        if self.budget < 0:
            raise SuiteError(f"--budget must be >= 0, got {self.budget}")
        if self.workers < 1:
            raise SuiteError(f"--workers must be >= 1, got {self.workers}")
        if self.device not in ("cpu", "cuda"):
            raise SuiteError(f"unknown device {self.device!r}: expected cpu or cuda")
        if self.evaluator not in ("local", "ray"):
            raise SuiteError(f"unknown evaluator {self.evaluator!r}: expected local or ray")
        if self.max_elems is not None and self.max_elems < 1:
            raise SuiteError(f"--max-elems must be >= 1, got {self.max_elems}")
        if self.timeout_s <= 0 or self.prepare_timeout_s <= 0:
            raise SuiteError("timeouts must be positive")

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "SuiteConfig":
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in d.items() if k in names})
