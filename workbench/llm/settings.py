"""`LLMSettings`: every knob of the LLM step, in one typed record (`SearchConfig.llm_step` holds it).

Which model answers (the provider, its endpoint, its key) is `LLMConfig` (`workbench/llm/provider_config.py`);
how a search uses the answers is here: the template, reply length, sampling temperatures, best-of-n,
how a passing parent is edited, repairs, pre-harness checks, code samples and the context window.
Every default is declared here and nowhere else; the measurement behind them is in results/llm/
(benchmarks/llm_local.py).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

EDIT_MODES = ("region", "search_replace", "off")
SAMPLE_MODES = ("ops", "off")
TEMPLATES = ("universal_v1", "universal_v2")  # workbench/llm/templates/<name>.md


class LLMSettingsError(ValueError):
    """A bad LLM-step option: one line naming it."""


@dataclass
class LLMSettings:
    template: str = "universal_v2"  # the prompt template (workbench/llm/templates/)
    max_new_tokens: int = 2048  # reply length limit (prompt + reply must fit the model's context)
    # temperature of the i-th reply of an expansion (cycled); one value: every reply alike. 0.7: at 0.2
    # the 0.5B code model sent the parent's tunables back unchanged (results/llm/README.md)
    temperatures: list[float] = field(default_factory=lambda: [0.7])
    best_of: int = 1  # replies per expansion; the first that passes the checks is evaluated
    # how a passing parent is changed: "region" (the model rewrites one named part of it: tunables, a
    # kernel, forward), "search_replace" (SEARCH/REPLACE blocks), "off" (a whole module). Every mode
    # still accepts a whole module or SEARCH/REPLACE blocks when the reply holds them.
    edits: str = "region"
    repairs: bool = True  # static repairs before the checks
    prechecks: bool = True  # AST checks; a failure is recorded without an evaluation
    samples: str = "ops"  # "ops": code samples keyed by the spec's aten ops; "off": none
    sample_min_overlap: float = 1.0  # 1.0: only kernels for the same op set are shown
    context_window: int | None = None  # tokens; None: ask the provider, else no limit is enforced

    def __post_init__(self) -> None:
        if self.template not in TEMPLATES:
            raise LLMSettingsError(f"llm_step.template must be one of {TEMPLATES}, got {self.template!r}")
        if self.edits not in EDIT_MODES:
            raise LLMSettingsError(f"llm_step.edits must be one of {EDIT_MODES}, got {self.edits!r}")
        if self.samples not in SAMPLE_MODES:
            raise LLMSettingsError(f"llm_step.samples must be one of {SAMPLE_MODES}, got {self.samples!r}")
        if not isinstance(self.best_of, int) or self.best_of < 1:
            raise LLMSettingsError(f"llm_step.best_of must be an integer >= 1, got {self.best_of!r}")
        if not isinstance(self.max_new_tokens, int) or self.max_new_tokens < 1:
            raise LLMSettingsError(f"llm_step.max_new_tokens must be an integer >= 1, got {self.max_new_tokens!r}")
        temps = list(self.temperatures) if isinstance(self.temperatures, (list, tuple)) else [self.temperatures]
        if not temps or any(isinstance(t, bool) or not isinstance(t, (int, float)) or not 0 <= t <= 2 for t in temps):
            raise LLMSettingsError(f"llm_step.temperatures must be numbers in [0, 2], got {self.temperatures!r}")
        self.temperatures = [float(t) for t in temps]
        if not 0 < self.sample_min_overlap <= 1:
            raise LLMSettingsError(f"llm_step.sample_min_overlap must be in (0, 1], got {self.sample_min_overlap}")
        if self.context_window is not None and (not isinstance(self.context_window, int) or self.context_window < 1):
            raise LLMSettingsError(f"llm_step.context_window must be a positive integer, got {self.context_window!r}")

    def temperature(self, i: int) -> float:
        """The temperature of the i-th reply of an expansion."""
        return self.temperatures[i % len(self.temperatures)]

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any] | None) -> LLMSettings:
        """From a saved or typed dict; unknown keys fail with the list of allowed ones."""
        d = dict(d or {})
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(d) - names)
        if unknown:
            raise LLMSettingsError(f"unknown llm_step option(s) {unknown}; allowed: {', '.join(sorted(names))}")
        try:
            return cls(**d)
        except TypeError as exc:  # e.g. a value the checks above cannot even compare
            raise LLMSettingsError(f"llm_step: {exc}") from None

    @classmethod
    def coerce(cls, value: LLMSettings | dict[str, Any] | None) -> LLMSettings:
        return value if isinstance(value, cls) else cls.from_dict(value)

    @staticmethod
    def default(name: str) -> Any:
        """A field's default, for help texts that must not repeat it."""
        return getattr(LLMSettings(), name)
