"""The suites in Python: `run_kernelbench(...)` and `run_aten(...)`, the same as `workbench suite ...`."""
from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

from workbench.suites.config import DEFAULT_CPU_MAX_ELEMS, SuiteConfig
from workbench.suites.problems import SuiteError, kernelbench_problems, parse_levels
from workbench.suites.runner import SuiteRun, new_run_id, run_suite


def resolve_device(device: str) -> str:
    from workbench.env import cuda_visible

    if device == "auto":
        return "cuda" if cuda_visible() else "cpu"
    if device not in ("cpu", "cuda"):
        raise SuiteError(f"unknown device {device!r}: expected auto, cpu or cuda")
    return device


def _common(device: str, max_elems: int | None, compile_baseline: bool | None) -> tuple[str, int | None, bool]:
    dev = resolve_device(device)
    if max_elems is None and dev == "cpu":
        max_elems = DEFAULT_CPU_MAX_ELEMS  # the interpreter: reduced sizes unless told otherwise
    return dev, max_elems, (dev == "cuda") if compile_baseline is None else compile_baseline


def run_kernelbench(root: str | Path | None = None, *, levels: Sequence[int] | str | None = None,
                    problems: str | None = None, seed: str = "lower", seed_dir: str | Path | None = None,
                    llm: str = "none", llm_options: dict[str, Any] | None = None, llm_max_new_tokens: int = 2048,
                    budget: int = 0, device: str = "auto", workers: int = 1, evaluator: str = "local",
                    run_dir: str | Path = "runs/suites", resume: str | None = None, max_elems: int | None = None,
                    timeout_s: float = 300.0, prepare_timeout_s: float = 120.0, trials: int = 3,
                    compile_baseline: bool | None = None, progress: bool = True,
                    retry_failed: bool = False) -> SuiteRun:
    """Run (or `resume`) KernelBench problems from `root` (`<root>/level<L>/<N>_<Name>.py`).

    On the CPU the problems are auto-sized to `max_elems` (default 64 Ki elements per tensor); on a GPU
    they keep their published sizes unless `max_elems` is given, and torch.compile is timed too.
    """
    if resume is not None:
        return run_suite(SuiteConfig(suite="kernelbench"), run_dir=run_dir, resume=resume, progress=progress,
                         retry_failed=retry_failed, changes=_changes(workers, evaluator, timeout_s, prepare_timeout_s))
    if root is None:
        raise SuiteError("give the KernelBench folder (--root DIR)")
    dev, max_elems, compile_bl = _common(device, max_elems, compile_baseline)
    cfg = SuiteConfig(suite="kernelbench", root=str(root), levels=parse_levels(levels), problems=problems, seed=seed,
                      seed_dir=str(seed_dir) if seed_dir else None, llm=llm, llm_options=dict(llm_options or {}),
                      llm_max_new_tokens=llm_max_new_tokens, budget=budget, device=dev, workers=workers,
                      evaluator=evaluator, max_elems=max_elems,
                      timeout_s=timeout_s, prepare_timeout_s=prepare_timeout_s, trials=trials,
                      compile_baseline=compile_bl)
    cfg.validate()
    found = kernelbench_problems(root, cfg.levels, problems)
    return run_suite(cfg, found, run_dir=run_dir, progress=progress)


def run_aten(*, ops: Sequence[str] | str | None = None, dtypes: Sequence[str] | str = ("float32",),
             seed: str = "lower", seed_dir: str | Path | None = None, llm: str = "none",
             llm_options: dict[str, Any] | None = None, llm_max_new_tokens: int = 2048, budget: int = 0,
             device: str = "auto", workers: int = 1,
             evaluator: str = "local", run_dir: str | Path = "runs/suites", resume: str | None = None,
             max_samples: int | None = None, timeout_s: float = 300.0, prepare_timeout_s: float = 120.0,
             trials: int = 3, compile_baseline: bool | None = None, progress: bool = True,
             retry_failed: bool = False) -> SuiteRun:
    """Run (or `resume`) the OpInfo ATen suite: one generated spec per (op, dtype), every sample must pass.

    `ops` None means the whole declared in-scope set (`workbench.suites.aten.in_scope_ops`).
    """
    from workbench.suites.aten import write_specs

    if resume is not None:
        return run_suite(SuiteConfig(suite="aten"), run_dir=run_dir, resume=resume, progress=progress,
                         retry_failed=retry_failed, changes=_changes(workers, evaluator, timeout_s, prepare_timeout_s))
    dev, _, compile_bl = _common(device, None, compile_baseline)
    op_list = [o for o in ops.split(",") if o] if isinstance(ops, str) else (list(ops) if ops else None)
    dtype_list = [d for d in dtypes.split(",") if d] if isinstance(dtypes, str) else list(dtypes)
    cfg = SuiteConfig(suite="aten", ops=op_list, dtypes=dtype_list, seed=seed,
                      seed_dir=str(seed_dir) if seed_dir else None, llm=llm, llm_options=dict(llm_options or {}),
                      llm_max_new_tokens=llm_max_new_tokens, budget=budget, device=dev, workers=workers,
                      evaluator=evaluator, max_elems=None,
                      timeout_s=timeout_s, prepare_timeout_s=prepare_timeout_s, trials=trials,
                      compile_baseline=compile_bl)
    cfg.validate()
    run_id = new_run_id("aten")
    found = write_specs(Path(run_dir) / run_id / "specs", op_list, dtype_list, max_samples=max_samples)
    return run_suite(cfg, found, run_dir=run_dir, progress=progress, run_id=run_id)


def _changes(workers: int, evaluator: str, timeout_s: float, prepare_timeout_s: float) -> dict[str, Any]:
    """On resume, only what differs from the defaults replaces the stored config."""
    out: dict[str, Any] = {}
    if workers != 1:
        out["workers"] = workers
    if evaluator != "local":
        out["evaluator"] = evaluator
    if timeout_s != 300.0:
        out["timeout_s"] = timeout_s
    if prepare_timeout_s != 120.0:
        out["prepare_timeout_s"] = prepare_timeout_s
    return out
