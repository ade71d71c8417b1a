"""The one typed config of a search: saved with the run (no secrets), enough to resume it."""

from __future__ import annotations

import ast
import dataclasses
import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from workbench.llm.settings import LLMSettings, LLMSettingsError
from workbench.options import option
from workbench.search.policies import POLICIES
from workbench.search.termination import Limits

LLM_CHOICES = ("none", "openai", "transformers")


class SearchError(ValueError):
    """Bad input to a search (unknown policy, missing spec, unusable seed...): one clear message."""


def parse_set(items: list[str] | None, flag: str = "--set") -> dict[str, Any]:
    """`NAME=VALUE` pairs (values as Python literals when they parse, else strings); `flag` names the option."""
    out: dict[str, Any] = {}
    for item in items or []:
        name, sep, raw = item.partition("=")
        if not sep or not name.strip().isidentifier():
            raise SearchError(f"{flag} expects NAME=VALUE, got {item!r}")
        try:
            out[name.strip()] = ast.literal_eval(raw)
        except (ValueError, SyntaxError):
            out[name.strip()] = raw
    return out


@dataclass
class SearchConfig:
    """Everything a search is given: `optimize(spec, config)`, `workbench optimize`'s flags (one per field,
    generated from the metadata here) and what the run saves to resume.

    "seed" names two things here and nothing else: `seeds`, the seed candidate files the graph starts from
    (`--seed CANDIDATE`), and `rng_seed`, the seed of the search's random choices (`--rng-seed`).
    """

    spec_path: str = option(help="the spec file (KernelBench format)", cli=False)  # the positional SPEC
    seeds: list[str] = option(default_factory=list, flag="--seed", kind="append", metavar="CANDIDATE",
                              help="a seed candidate kernel file to start from (repeatable); 'lower' lowers the "
                                   "spec to one (workbench lower)")
    policy: str = option("greedy", choices=POLICIES, help="selection policy")
    policy_options: dict[str, Any] = option(default_factory=dict, flag="--policy-option", kind="pairs",
                                            parse=lambda v: parse_set(v, "--policy-option"),
                                            help="an option of the policy (repeatable), e.g. c=1.4 for mcts")
    llm: str = option("none", choices=LLM_CHOICES, help="the operator's model (none: the offline tuner)")
    llm_options: dict[str, Any] = option(default_factory=dict, flag="--llm-option", kind="pairs",
                                         parse=lambda v: parse_set(v, "--llm-option"),
                                         help="an LLM provider option (repeatable): model=..., base_url=...; "
                                              "keys come from the environment, never from here")
    offline_share: float = option(0.25, help="share of LLM-run expansions given to the offline tuner")
    # the LLM step's settings, one typed record (workbench/llm/settings.py: every default is declared there)
    llm_step: LLMSettings = option(default_factory=LLMSettings, kind="pairs",
                                   parse=lambda v: parse_set(v, "--llm-step"),
                                   help="an LLM step setting (repeatable): best_of=2, temperatures=[0.2,0.8], "
                                        "edits=region|search_replace|off, repairs=False, prechecks=False, "
                                        "samples=ops|off, context_window=4096, max_new_tokens=1024, "
                                        "template=universal_v1 (see docs/llm.md)")
    # two shortcuts into llm_step, kept as flags: folded into it when the config is built (then None)
    llm_max_new_tokens: int | None = option(None, flag="--max-new-tokens", metavar="N",
                                            help="LLM reply length limit, = --llm-step max_new_tokens=N (default "
                                                 f"{LLMSettings.default('max_new_tokens')}; prompt + reply must "
                                                 "fit the model's context)")
    llm_temperature: float | None = option(None, flag="--temperature", metavar="X",
                                           help="LLM sampling temperature of every reply, = --llm-step "
                                                f"temperatures=[X] (default {LLMSettings.default('temperatures')})")
    budget: int | None = option(20, help="nodes to create after the seeds")
    max_wall_s: float | None = option(None, flag="--wall", metavar="SECONDS", help="wall-time budget")
    max_tokens: int | None = option(None, flag="--tokens", help="LLM token budget")
    stall: int | None = option(None, metavar="K", help="stop after K evaluations without improvement")
    max_rejected: int | None = option(60, help="proposals rejected before evaluation (they cost no evaluation) "
                                               "before the search stops")
    fitness_target: float | None = option(None, flag="--target", metavar="FITNESS",
                                          help="stop once this fitness is reached")
    workers: int = option(1, help="evaluations in flight (a suite: problems in parallel too)")
    device: str = option("auto", choices=("auto", "cpu", "cuda"), help="where candidates run")
    evaluator: str = option("local", choices=("local", "ray"), help="the evaluator backend")
    ray_address: str | None = option(None, metavar="ADDR", help="Ray cluster address (with --evaluator ray)")
    retrieval: bool = option(True, kind="flag", help="prompts without retrieved knowledge")
    overrides: dict[str, Any] = option(default_factory=dict, flag="--set", kind="pairs", parse=parse_set,
                                       help="override a module-level constant of the spec (repeatable)")
    shapes: list[str] | None = option(None, kind="csv", help="named shapes each evaluation checks (default: all "
                                                              "the spec declares)")
    trials: int = option(3, help="timing trials per evaluation")
    timeout_s: float = option(300.0, flag="--timeout", metavar="SECONDS", help="seconds per evaluation")
    run_dir: str = option("runs", help="where runs/<run>/ and the memory live")
    rng_seed: int = option(0, help="seed of the search's random choices")

    def __post_init__(self) -> None:
        if self.shapes is not None:  # `--shapes ""` or () means all the spec declares, as None does
            self.shapes = list(self.shapes) or None
        self.llm_step = self._fold_llm_step()

    def _fold_llm_step(self) -> LLMSettings:
        """`llm_step` as LLMSettings (it may arrive as a dict: a saved run, `--llm-step`, a keyword) with
        the shortcut fields applied; a key given in the dict itself wins over its shortcut."""
        given = self.llm_step
        d = given.to_dict() if isinstance(given, LLMSettings) else dict(given or {})
        explicit = set() if isinstance(given, LLMSettings) else set(d)
        if self.llm_temperature is not None and "temperatures" not in explicit:
            d["temperatures"] = [self.llm_temperature]
        if self.llm_max_new_tokens is not None and "max_new_tokens" not in explicit:
            d["max_new_tokens"] = self.llm_max_new_tokens
        self.llm_temperature = self.llm_max_new_tokens = None
        try:
            return LLMSettings.from_dict(d)
        except LLMSettingsError as exc:
            raise SearchError(str(exc)) from None

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
        if not isinstance(self.llm_step, LLMSettings):  # assigned after construction
            self.llm_step = self._fold_llm_step()
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
