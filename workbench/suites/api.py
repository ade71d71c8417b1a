"""The suites in Python: `run_kernelbench(...)` and `run_aten(...)`, the same as `workbench suite ...`.

Both take a `SuiteConfig` and/or keyword options: `SuiteConfig` fields (`draft`, `seed_dir`, `budget`,
`levels`, ...) and the search settings of `SUITE_SEARCH_FIELDS` (`llm`, `device`, `workers`, `trials`, ...),
applied with `dataclasses.replace`. With `resume`, the keyword options are exactly what changes.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from workbench.suites.config import DEFAULT_CPU_MAX_ELEMS, SuiteConfig, split
from workbench.suites.problems import SuiteError, kernelbench_problems, parse_levels
from workbench.suites.runner import SuiteRun, new_run_id, run_suite


def resolve_device(device: str) -> str:
    from workbench.env import cuda_visible

    if device == "auto":
        return "cuda" if cuda_visible() else "cpu"
    if device not in ("cpu", "cuda"):
        raise SuiteError(f"unknown device {device!r}: expected auto, cpu or cuda")
    return device


def _flat(options: dict[str, Any]) -> dict[str, Any]:
    """The changes of a resume: options as stored (the deprecated `seed=` mapped to `draft=`, unknown names
    refused, `device` resolved), flat."""
    parts = split(_normalised(options))
    out = {**{k: v for k, v in parts.items() if k != "search"}, **parts.get("search", {})}
    if "device" in out:
        out["device"] = resolve_device(out["device"])
    return out


def _normalised(options: dict[str, Any]) -> dict[str, Any]:
    """Options as the config stores them: paths as strings, `A,B` strings as lists, levels as numbers."""
    options = dict(options)
    for name in ("root", "seed_dir"):
        if options.get(name) is not None:
            options[name] = str(options[name])
    for name in ("ops", "dtypes"):
        if isinstance(options.get(name), str):
            options[name] = [x for x in options[name].split(",") if x] or None
        elif options.get(name) is not None:
            options[name] = list(options[name]) or None
    if "levels" in options:
        options["levels"] = parse_levels(options["levels"])
    return options


def _configure(suite: str, config: SuiteConfig | None, options: dict[str, Any]) -> SuiteConfig:
    """The config of a new run: `config` (or the defaults) with `options`, the device resolved."""
    cfg = (config or SuiteConfig(suite=suite)).replace(suite=suite, **_normalised(options))
    dev = resolve_device(cfg.search.device)
    changes: dict[str, Any] = {"device": dev}
    if cfg.max_elems is None and dev == "cpu" and suite == "kernelbench":
        changes["max_elems"] = DEFAULT_CPU_MAX_ELEMS  # the interpreter: reduced sizes unless told otherwise
    if cfg.compile_baseline is None:
        changes["compile_baseline"] = dev == "cuda"
    cfg = cfg.replace(**changes)
    cfg.validate()
    return cfg


def _fresh(run_dir: str | Path, run_id: str | None) -> str | None:
    """A run id the user chose (`--run-id`): a plain name, not one already taken (that is `--resume`)."""
    if run_id is None:
        return None
    if not run_id or run_id != Path(run_id).name or run_id.startswith("."):
        raise SuiteError(f"run id {run_id!r}: a plain directory name, no path")
    if (Path(run_dir) / run_id).exists():
        raise SuiteError(f"run {run_id!r} exists under {run_dir}: continue it with --resume {run_id}")
    return run_id


def run_kernelbench(root: str | Path | None = None, config: SuiteConfig | None = None, *,
                    resume: str | None = None, run_dir: str | Path = "runs/suites", progress: bool = True,
                    retry_failed: bool = False, run_id: str | None = None, **options: Any) -> SuiteRun:
    """Run (or `resume`) KernelBench problems from `root` (`<root>/level<L>/<N>_<Name>.py`).

    On the CPU the problems are auto-sized to `max_elems` (default 64 Ki elements per tensor); on a GPU
    they keep their published sizes unless `max_elems` is given, and torch.compile is timed too.
    """
    if resume is not None:
        return run_suite(None, run_dir=run_dir, resume=resume, progress=progress, retry_failed=retry_failed,
                         changes=_flat(options))
    if root is not None:
        options["root"] = root
    cfg = _configure("kernelbench", config, options)
    if cfg.root is None:
        raise SuiteError("give the KernelBench folder (--root DIR)")
    found = kernelbench_problems(cfg.root, cfg.levels, cfg.problems)
    return run_suite(cfg, found, run_dir=run_dir, progress=progress, run_id=_fresh(run_dir, run_id))


def run_aten(config: SuiteConfig | None = None, *, resume: str | None = None, run_dir: str | Path = "runs/suites",
             progress: bool = True, retry_failed: bool = False, run_id: str | None = None,
             **options: Any) -> SuiteRun:
    """Run (or `resume`) the OpInfo ATen suite: one generated spec per (op, dtype), every sample must pass.

    `ops` None means the whole declared in-scope set (`workbench.suites.aten.in_scope_ops`).
    """
    from workbench.suites.aten import write_specs

    if resume is not None:
        return run_suite(None, run_dir=run_dir, resume=resume, progress=progress, retry_failed=retry_failed,
                         changes=_flat(options))
    cfg = _configure("aten", config, options)
    run_id = _fresh(run_dir, run_id) or new_run_id("aten")
    found = write_specs(Path(run_dir) / run_id / "specs", cfg.ops, cfg.dtypes, max_samples=cfg.max_samples)
    return run_suite(cfg, found, run_dir=run_dir, progress=progress, run_id=run_id)
