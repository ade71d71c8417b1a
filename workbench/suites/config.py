"""The typed config of a suite run, saved in its store so `--resume` continues it unchanged.

One config per job: a suite run is a `SuiteConfig`, the search of each of its problems a `SearchConfig`.
The suite's own fields are here; the search and evaluation settings it passes on (`SUITE_SEARCH_FIELDS`:
the LLM, the device, workers, the evaluator, trials, the timeout) live in `SuiteConfig.search`, a
`SearchConfig` whose per-problem fields (spec, seeds, budget, overrides, run directory) `for_problem`
sets. `workbench suite` gets one flag per field of both, generated from their metadata.

"seed" here: `draft` (`--draft lower|none`, formerly `--seed`) says where a problem's draft kernel comes
from, `seed_dir` holds seed candidate files named after the problems.
"""
from __future__ import annotations

import dataclasses
import logging
import warnings
from dataclasses import dataclass
from typing import Any

from workbench.options import option
from workbench.search.config import SearchConfig
from workbench.suites.problems import SuiteError, parse_levels

log = logging.getLogger(__name__)

# Largest tensor (elements) on the CPU interpreter: a lowered pointwise kernel over 64 Ki elements and
# a 256^3 matmul each take about a second there, so one evaluation stays in the seconds.
DEFAULT_CPU_MAX_ELEMS = 1 << 16
DRAFTS = ("lower", "none")
# The SearchConfig fields a suite sets for every problem (and flags of `workbench suite`)
SUITE_SEARCH_FIELDS = ("llm", "llm_options", "llm_max_new_tokens", "llm_step", "policy", "device", "workers",
                       "evaluator", "timeout_s", "trials")
# What a resumption may change: parallelism, limits, the backend; never the problems or how they are drafted.
RESUMABLE = ("workers", "evaluator", "timeout_s", "prepare_timeout_s", "parallel", "stop_after_s")
# The suite's own flags by subcommand (the shared ones first)
COMMON_FIELDS = ("draft", "seed_dir", "budget", "prepare_timeout_s", "compile_baseline", "parallel", "stop_after_s")
KERNELBENCH_FIELDS = ("root", "levels", "problems", "max_elems")
ATEN_FIELDS = ("ops", "dtypes", "max_samples")


def _search_template() -> SearchConfig:
    return SearchConfig(spec_path="")


@dataclass
class SuiteConfig:
    suite: str = option(help="kernelbench | aten", cli=False)  # the subcommand
    root: str | None = option(None, metavar="DIR", help="the KernelBench folder (holds level1/ ...)")
    levels: list[int] = option(default_factory=lambda: [1, 2, 3], parse=parse_levels, metavar="1,2,3",
                               help="KernelBench levels to run")
    problems: str | None = option(None, metavar="1-20,23", help="KernelBench problem numbers in each level")
    max_elems: int | None = option(None, metavar="N", help="largest tensor (elements) after auto-sizing; default "
                                                           "65536 on cpu, published sizes on cuda")
    ops: list[str] | None = option(None, kind="csv", help="OpInfo names (default: the in-scope set)")
    dtypes: list[str] = option(default_factory=lambda: ["float32"], kind="csv", metavar="float32,float16",
                               help="ATen dtypes: float32, float16, bfloat16 ...")
    max_samples: int | None = option(None, metavar="N", help="first N samples of each ATen op (default all)")
    draft: str = option("lower", choices=DRAFTS, help="each problem's draft kernel: lower (the lowered draft, "
                                                      "workbench lower) or none (--seed-dir only)")
    seed_dir: str | None = option(None, metavar="DIR",
                                  help="seed candidate files named after the problems (<name>.py or "
                                       "level<L>/<name>.py), used with --draft none or when lowering gives nothing")
    budget: int = option(0, metavar="N", help="search nodes per problem after its seed (0: evaluate the seed only)")
    prepare_timeout_s: float = option(120.0, flag="--prepare-timeout", metavar="SECONDS",
                                      help="seconds per problem to import, size and lower it")
    compile_baseline: bool | None = option(None, kind="flag", flag="--no-compile", const=False,
                                           help="skip the torch.compile baselines (default: timed on cuda)")
    parallel: int | None = option(None, metavar="N",
                                  help="problems in flight at once: their lowering, sizing and compile baselines "
                                       "run in parallel on the CPU while their candidates queue for the evaluator's "
                                       "--workers (default: --workers on cpu; on cuda 4 x --workers, up to the "
                                       "CPU count)")
    stop_after_s: float | None = option(None, flag="--stop-after", metavar="SECONDS",
                                        help="start no problem after this many seconds of this session (a "
                                             "time-limited job): the rest stay pending for --resume, the report "
                                             "is written")
    search: SearchConfig = option(default_factory=_search_template, cli=False,
                                  help="the search and evaluation settings of every problem")

    def validate(self) -> None:
        if self.suite not in ("kernelbench", "aten"):
            raise SuiteError(f"unknown suite {self.suite!r}: expected kernelbench or aten")
        if self.draft not in DRAFTS:
            raise SuiteError(f"--draft (formerly --seed) expects lower or none, got {self.draft!r}")
        if self.budget < 0:
            raise SuiteError(f"--budget must be >= 0, got {self.budget}")
        s = self.search
        if s.workers < 1:
            raise SuiteError(f"--workers must be >= 1, got {s.workers}")
        if s.device not in ("cpu", "cuda"):
            raise SuiteError(f"unknown device {s.device!r}: expected cpu or cuda")
        if s.evaluator not in ("local", "ray"):
            raise SuiteError(f"unknown evaluator {s.evaluator!r}: expected local or ray")
        if self.stop_after_s is not None and self.stop_after_s <= 0:
            raise SuiteError(f"--stop-after must be positive, got {self.stop_after_s}")
        if self.parallel is not None and self.parallel < 1:
            raise SuiteError(f"--parallel must be >= 1, got {self.parallel}")
        if self.max_elems is not None and self.max_elems < 1:
            raise SuiteError(f"--max-elems must be >= 1, got {self.max_elems}")
        if s.timeout_s <= 0 or self.prepare_timeout_s <= 0:
            raise SuiteError("timeouts must be positive")

    def problems_in_flight(self) -> int:
        """How many problems run at once (`parallel`, or its device default)."""
        import os

        if self.parallel is not None:
            return self.parallel
        if self.search.device == "cuda":
            # the GPU times one candidate at a time per worker; lowering, Triton's compiles and torch.compile
            # of the other problems overlap with it on the CPU
            return max(self.search.workers, min(4 * self.search.workers, os.cpu_count() or 1))
        return self.search.workers

    def for_problem(self, spec_path: str, seeds: list[str], overrides: dict[str, Any],
                    run_dir: str) -> SearchConfig:
        """The search of one problem: the suite's search settings, its spec, seed, budget and sizes."""
        return dataclasses.replace(self.search, spec_path=spec_path, seeds=list(seeds), budget=self.budget,
                                   overrides=dict(overrides), run_dir=run_dir)

    def replace(self, **changes: Any) -> "SuiteConfig":
        """A copy with `changes` applied (suite fields here, `SUITE_SEARCH_FIELDS` in `search`)."""
        changes = split(changes)
        search = changes.pop("search", {})
        out = dataclasses.replace(self, **changes)
        return dataclasses.replace(out, search=dataclasses.replace(out.search, **search)) if search else out

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "SuiteConfig":
        d = dict(d)
        if "seed" in d and "draft" not in d:  # stored before --seed became --draft
            d["draft"] = d.pop("seed")
        search = d.pop("search", None)
        if search is None:  # stored flat before the suite held a SearchConfig
            search = {k: d[k] for k in SUITE_SEARCH_FIELDS if k in d}
        names = {f.name for f in dataclasses.fields(cls)} - {"search"}
        out = cls(**{k: v for k, v in d.items() if k in names})
        out.search = SearchConfig.from_dict({"spec_path": "", **search})
        return out


def split(options: dict[str, Any]) -> dict[str, Any]:
    """Keyword options sorted into suite fields and a `search` dict of `SUITE_SEARCH_FIELDS`.

    `seed=` (the old name of `draft=`) is still taken, with a DeprecationWarning, for one release.
    """
    options = dict(options)
    if "seed" in options:
        value = options.pop("seed")
        warnings.warn("the suite's seed= / --seed is deprecated: use draft= / --draft (lower | none)",
                      DeprecationWarning, stacklevel=3)
        log.warning("--seed %s is deprecated (it goes in the next release): use --draft %s", value, value)
        if "draft" in options and options["draft"] != value:
            raise SuiteError(f"--seed {value} and --draft {options['draft']} disagree (--seed is --draft's old name)")
        options["draft"] = value
    own = {f.name for f in dataclasses.fields(SuiteConfig)} - {"search"}
    unknown = sorted(set(options) - own - set(SUITE_SEARCH_FIELDS))
    if unknown:
        raise SuiteError(f"unknown suite option(s) {unknown}: expected SuiteConfig fields or "
                         f"{', '.join(SUITE_SEARCH_FIELDS)}")
    out: dict[str, Any] = {k: v for k, v in options.items() if k in own}
    search = {k: v for k, v in options.items() if k in SUITE_SEARCH_FIELDS}
    if search:
        out["search"] = search
    return out
