"""Graph search over kernel candidates (KernelEvolve section 3.1): policies, operators, termination.

```python
import workbench
run = workbench.optimize("examples/vector_add/spec.py", seeds=["examples/vector_add/candidate.py"],
                         policy="greedy", llm="none", budget=12, device="cpu")
run.best.fitness, run.history(), run.plot(), run.explorer()
```
"""

from __future__ import annotations

import inspect
from pathlib import Path
from typing import Any, Sequence

from workbench.search.config import SearchConfig, SearchError
from workbench.search.termination import Limits, Stop

__all__ = ["Limits", "SearchConfig", "SearchError", "Stop", "load_run", "optimize"]


def optimize(
    spec: str | Path,
    *,
    seeds: Sequence[str | Path] = (),
    policy: str = "greedy",
    llm: str = "none",
    budget: int | None = 20,
    workers: int = 1,
    device: str = "auto",
    evaluator: Any = "local",
    ray_address: str | None = None,
    retrieval: bool = True,
    overrides: dict[str, Any] | None = None,
    shapes: Sequence[str] | None = None,
    run_dir: str | Path = "runs",
    resume: str | None = None,
    max_wall_s: float | None = None,
    max_tokens: int | None = None,
    stall: int | None = None,
    fitness_target: float | None = None,
    trials: int = 3,
    timeout_s: float = 300.0,
    rng_seed: int = 0,
    policy_options: dict[str, Any] | None = None,
    llm_options: dict[str, Any] | None = None,
    offline_share: float = 0.25,
    llm_max_new_tokens: int = 2048,
    llm_temperature: float = 0.7,
    llm_step: dict[str, Any] | None = None,
    max_rejected: int | None = 60,
    operator: Any = None,
    progress: bool = True,
):  # -> Run
    """Search for a faster correct kernel for `spec`; returns a `workbench.search.run.Run`.

    `evaluator` is a backend name (`local`, `ray`) or an `Evaluator` instance to reuse (not closed here).
    `operator` may be an `Operator` instance (tests, custom operators); by default it follows `llm`.
    `llm_step` holds the LLM step's options (repairs, prechecks, edits, best_of, temperatures, samples,
    context_window: `workbench.search.operators.LLMStepConfig`); `max_rejected` bounds the proposals
    turned away before the harness, which do not spend `budget`.
    `resume` continues a stopped run by id (budgets and workers given here replace the stored ones).
    """
    from workbench.search.engine import SearchEngine

    cfg = SearchConfig(
        spec_path=str(spec),
        seeds=[str(s) for s in seeds],
        policy=policy,
        policy_options=dict(policy_options or {}),
        llm=llm,
        llm_options=dict(llm_options or {}),
        offline_share=offline_share,
        llm_max_new_tokens=llm_max_new_tokens,
        llm_temperature=llm_temperature,
        llm_step=dict(llm_step or {}),
        budget=budget,
        max_rejected=max_rejected,
        max_wall_s=max_wall_s,
        max_tokens=max_tokens,
        stall=stall,
        fitness_target=fitness_target,
        workers=workers,
        device=device,
        evaluator=evaluator if isinstance(evaluator, str) else "local",
        ray_address=ray_address,
        retrieval=retrieval,
        overrides=dict(overrides or {}),
        shapes=list(shapes) if shapes else None,
        trials=trials,
        timeout_s=timeout_s,
        run_dir=str(run_dir),
        rng_seed=rng_seed,
    )
    changes = None
    if resume is not None:  # only what the caller changed from the defaults replaces the stored config
        from workbench.search.engine import RESUMABLE

        defaults = {k: v.default for k, v in inspect.signature(optimize).parameters.items()}
        names = {
            "budget": "budget",
            "max_wall_s": "max_wall_s",
            "max_tokens": "max_tokens",
            "stall": "stall",
            "fitness_target": "fitness_target",
            "workers": "workers",
            "evaluator": "evaluator",
            "ray_address": "ray_address",
            "timeout_s": "timeout_s",
        }
        given = dict(
            budget=budget,
            max_wall_s=max_wall_s,
            max_tokens=max_tokens,
            stall=stall,
            fitness_target=fitness_target,
            workers=workers,
            evaluator=cfg.evaluator,
            ray_address=ray_address,
            timeout_s=timeout_s,
        )
        changes = {names[k]: v for k, v in given.items() if v != defaults[k] and names[k] in RESUMABLE}
    engine = SearchEngine(
        cfg,
        evaluator=None if isinstance(evaluator, str) else evaluator,
        operator=operator,
        resume=resume,
        progress=progress,
        resume_changes=changes,
    )
    return engine.run()


def load_run(run_id: str, run_dir: str | Path = "runs"):  # -> Run
    """A past run rebuilt from the context memory (`runs/memory.sqlite`)."""
    from workbench.search.run import Run

    return Run.load(run_id, run_dir=run_dir)
