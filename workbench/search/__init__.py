"""Graph search over kernel candidates (KernelEvolve section 3.1): policies, operators, termination.

```python
import workbench
from workbench.search import SearchConfig
cfg = SearchConfig(spec_path="examples/vector_add/spec.py", seeds=["examples/vector_add/candidate.py"],
                   policy="greedy", llm="none", budget=12, device="cpu")
run = workbench.optimize(config=cfg)  # or keyword overrides: optimize(spec, seeds=[...], budget=12)
run.best.fitness, run.history(), run.plot(), run.explorer()
```
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from workbench.search.config import SearchConfig, SearchError
from workbench.search.termination import Limits, Stop

__all__ = ["Limits", "SearchConfig", "SearchError", "Stop", "load_run", "optimize"]


def optimize(
    spec: str | Path | None = None,
    config: SearchConfig | None = None,
    *,
    resume: str | None = None,
    evaluator: Any = None,
    operator: Any = None,
    progress: bool = True,
    **overrides: Any,
):  # -> Run
    """Search for a faster correct kernel for `spec`; returns a `workbench.search.run.Run`.

    `config` is the search's `SearchConfig` (default: its defaults for `spec`); keyword `overrides` are
    SearchConfig fields applied on top with `dataclasses.replace` (`budget=6`, `seeds=[...]`, ...).
    `resume` continues a stopped run by id: the overrides (only `RESUMABLE` fields, plus `run_dir` to find
    it) replace those fields of the stored config, nothing else changes; give no `config` with it.
    Not configuration, so not fields: `evaluator` may be an `Evaluator` instance to reuse (not closed here;
    a string is the `evaluator` field), `operator` an `Operator` instance (tests, custom operators; by
    default it follows `llm`), `progress` the progress bar.
    """
    from workbench.search.engine import SearchEngine

    if isinstance(evaluator, str):
        overrides["evaluator"] = evaluator
        evaluator = None
    unknown = sorted(set(overrides) - {f.name for f in dataclasses.fields(SearchConfig)})
    if unknown:
        raise SearchError(f"unknown search option(s) {unknown}: expected SearchConfig fields")
    overrides = _normalised(overrides)
    if resume is not None:
        if config is not None:
            raise SearchError("resume takes the changes as keywords, not a config")
        cfg = SearchConfig(spec_path=str(spec or ""), run_dir=overrides.get("run_dir", "runs"))
        changes: dict[str, Any] | None = {k: v for k, v in overrides.items() if k != "run_dir"}
    else:
        if config is None:
            if spec is None:
                raise SearchError("give a spec to optimize (or resume=RUN)")
            config = SearchConfig(spec_path=str(spec))
        elif spec is not None and str(spec) != config.spec_path:
            overrides["spec_path"] = str(spec)
        cfg = dataclasses.replace(config, **overrides)
        # a config built by hand may hold Paths or tuples: stored as JSON, it keeps strings and lists
        cfg = dataclasses.replace(cfg, **_normalised({n: getattr(cfg, n) for n in _STORED_AS}))
        changes = None
    engine = SearchEngine(
        cfg,
        evaluator=evaluator,
        operator=operator,
        resume=resume,
        progress=progress,
        resume_changes=changes,
    )
    return engine.run()


_STORED_AS = ("spec_path", "run_dir", "seeds", "shapes", "overrides", "policy_options", "llm_options")


def _normalised(values: dict[str, Any]) -> dict[str, Any]:
    """Paths as strings and sequences as lists, as the config stores them (it is saved as JSON)."""
    out = dict(values)
    for name in ("spec_path", "run_dir"):
        if name in out:
            out[name] = str(out[name])
    if "seeds" in out:
        out["seeds"] = [str(s) for s in out["seeds"]]
    if out.get("shapes") is not None:
        out["shapes"] = list(out["shapes"]) or None
    for name in ("overrides", "policy_options", "llm_options"):
        if name in out:
            out[name] = dict(out[name] or {})
    # llm_step: an LLMSettings, or a dict the config turns into one
    return out


def load_run(run_id: str, run_dir: str | Path = "runs"):  # -> Run
    """A past run rebuilt from the context memory (`runs/memory.sqlite`)."""
    from workbench.search.run import Run

    return Run.load(run_id, run_dir=run_dir)
