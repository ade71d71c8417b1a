"""The one typed config of a search: saved with the run (no secrets), enough to resume it."""

from __future__ import annotations

import ast
import dataclasses
import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from workbench.search.policies import POLICIES
from workbench.search.termination import Limits

LLM_CHOICES = ("none", "openai", "transformers")


class SearchError(ValueError):
    """Bad input to a search (unknown policy, missing spec, unusable seed...): one clear message."""


@dataclass
class SearchConfig:
    spec_path: str
    seeds: list[str] = field(default_factory=list)  # candidate files to start from
    policy: str = "greedy"  # greedy | mcts | evolve
    policy_options: dict[str, Any] = field(default_factory=dict)
    llm: str = "none"  # none | openai | transformers
    llm_options: dict[str, Any] = field(default_factory=dict)  # model, base_url...; keys come from env
    offline_share: float = 0.25  # share of LLM-run expansions given to the tuner
    llm_max_new_tokens: int = 2048  # per reply; prompt + reply must fit the model's context
    llm_temperature: float = 0.7
    # the LLM step's options (workbench.search.operators.LLMStepConfig: repairs, prechecks, edits,
    # best_of, temperatures, samples, context_window); empty: its defaults
    llm_step: dict[str, Any] = field(default_factory=dict)
    budget: int | None = 20  # nodes after the seeds
    max_wall_s: float | None = None
    max_tokens: int | None = None
    stall: int | None = None
    max_rejected: int | None = 60  # proposals turned away before the harness (they cost no evaluation)
    fitness_target: float | None = None
    workers: int = 1
    device: str = "auto"  # auto | cpu | cuda
    evaluator: str = "local"  # local | ray
    ray_address: str | None = None
    retrieval: bool = True
    overrides: dict[str, Any] = field(default_factory=dict)  # spec module constants (--set)
    shapes: list[str] | None = None  # named shapes each evaluation checks (None: all the spec declares)
    trials: int = 3
    timeout_s: float = 300.0
    run_dir: str = "runs"
    rng_seed: int = 0

    def validate(self) -> None:
        if self.policy not in POLICIES:
            raise SearchError(f"unknown policy {self.policy!r}: expected one of {', '.join(POLICIES)}")
        if self.llm not in LLM_CHOICES:
            raise SearchError(f"unknown LLM provider {self.llm!r}: expected one of {', '.join(LLM_CHOICES)}")
        if self.device not in ("auto", "cpu", "cuda"):
            raise SearchError(f"unknown device {self.device!r}: expected auto, cpu or cuda")
        if self.evaluator not in ("local", "ray"):
            raise SearchError(f"unknown evaluator {self.evaluator!r}: expected local or ray")
        if self.workers < 1:
            raise SearchError(f"--workers must be >= 1, got {self.workers}")
        try:
            self.limits()
        except ValueError as exc:
            raise SearchError(str(exc)) from None
        if self.llm_step:
            from workbench.search.operators.llm_step import LLMStepConfig, LLMStepError

            try:
                LLMStepConfig.from_dict(self.llm_step)
            except (LLMStepError, TypeError) as exc:
                raise SearchError(str(exc)) from None
        for key in self.llm_options:
            from workbench.env import is_secret_name

            if is_secret_name(key):
                raise SearchError(
                    f"LLM option {key!r} looks like a secret: pass it through the environment, "
                    f"it must not be saved with the run"
                )

    def limits(self) -> Limits:
        return Limits(
            max_evals=self.budget,
            max_wall_s=self.max_wall_s,
            max_tokens=self.max_tokens,
            stall_evals=self.stall,
            fitness_target=self.fitness_target,
            max_rejected=self.max_rejected,
        )

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "SearchConfig":
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in d.items() if k in names})


def parse_set(items: list[str] | None) -> dict[str, Any]:
    """`NAME=VALUE` pairs (values as Python literals when they parse, else strings)."""
    out: dict[str, Any] = {}
    for item in items or []:
        name, sep, raw = item.partition("=")
        if not sep or not name.strip().isidentifier():
            raise SearchError(f"--set expects NAME=VALUE, got {item!r}")
        try:
            out[name.strip()] = ast.literal_eval(raw)
        except (ValueError, SyntaxError):
            out[name.strip()] = raw
    return out


def check_spec(path: str | Path) -> str:
    """The spec's source if it looks like a KernelBench spec, else a SearchError saying what is wrong.

    A cheap static check so a typo fails in a second; the harness still does the real load.
    """
    p = Path(path)
    if not p.is_file():
        raise SearchError(f"spec {str(path)!r} not found")
    src = p.read_text(encoding="utf-8")
    try:
        tree = ast.parse(src, filename=str(p))
    except SyntaxError as exc:
        raise SearchError(f"spec {p} does not parse: line {exc.lineno}: {exc.msg}") from None
    names = {n.name for n in tree.body if isinstance(n, (ast.ClassDef, ast.FunctionDef))}
    missing = [n for n in ("Model", "get_inputs", "get_init_inputs") if n not in names]
    if missing:
        raise SearchError(f"spec {p} is not a KernelBench spec: it does not define {', '.join(missing)}")
    return src


def spec_key(path: str | Path, source: str, overrides: dict[str, Any]) -> str:
    """Identity of a problem across sessions: the spec's name, its text and its overrides."""
    h = hashlib.sha256(
        (source + "\0" + json.dumps(overrides, sort_keys=True, default=str)).encode()
    ).hexdigest()
    return f"{spec_name(path)}@{h[:12]}"


def spec_name(path: str | Path) -> str:
    """A readable name: the file stem, or the folder's name for generic stems (examples/add/spec.py)."""
    p = Path(path)
    return p.resolve().parent.name if p.stem in ("spec", "reference", "problem", "model") else p.stem
