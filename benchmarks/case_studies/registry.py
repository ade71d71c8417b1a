"""The case studies the benchmark driver knows, registered once (the way fla's `benchmarks/ops/registry.py`
registers an op): what a case's `bench.py` already declares as data (`BENCHMARK`, `CHECKS`, contenders)
is not repeated here, only what the driver needs to treat the case right.

Adding a case study: give its folder a `bench.py` (`BENCHMARK`, `case()`, `configured(config)`, and
either `CHECKS` + `check_kernel` + `check_reference` for float outputs or a spec with `SHAPES` for exact
ones), then one `register_case(...)` line below.
"""
from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any


@dataclass(frozen=True)
class CaseConfig:
    name: str
    exact: bool                      # outputs bit-identical (preprocessing runner) rather than at a tolerance
    kernels: tuple[str, ...] = ()    # our contenders, for the summary tables (exact cases: bench.KERNELS)
    # tiny shapes for `--smoke` on the CPU (Triton's interpreter): plumbing, not speed
    smoke_shape: dict[str, Any] = field(default_factory=dict)
    smoke_spec_shapes: tuple[str, ...] = ()    # exact cases: spec shapes small enough for the interpreter

    def bench(self) -> ModuleType:
        return importlib.import_module(f"case_studies.{self.name}.bench")

    def kernel(self) -> ModuleType:
        return importlib.import_module(f"case_studies.{self.name}.kernel")

    def kernel_names(self) -> tuple[str, ...]:
        return tuple(getattr(self.bench(), "KERNELS", self.kernels))


CASES: dict[str, CaseConfig] = {}


def register_case(cfg: CaseConfig) -> CaseConfig:
    if cfg.name in CASES:
        raise ValueError(f"case {cfg.name!r} registered twice")
    CASES[cfg.name] = cfg
    return cfg


def get_case(name: str) -> CaseConfig:
    if name not in CASES:
        raise KeyError(f"unknown case {name!r}: one of {', '.join(CASES)}")
    return CASES[name]


register_case(CaseConfig("conv1d", exact=False, kernels=("triton",),
                         smoke_shape={"B": 2, "C_in": 8, "C_out": 8, "L": 19, "K": 3, "stride": 1, "padding": 1}))
register_case(CaseConfig("optimized_fm", exact=False, kernels=("triton",),
                         smoke_shape={"B": 2, "N": 5, "D": 16, "K": 7}))
register_case(CaseConfig("pffn", exact=False, kernels=("triton", "triton_erff"),
                         smoke_shape={"N": 2, "B": 3, "D": 16, "K": 16}))
register_case(CaseConfig("mapid", exact=True,
                         smoke_shape={"VOCAB_SIZE": 1000, "NUM_SAMPLES": 7, "IDS_PER_SAMPLE": 20, "NUM_IDS": 140,
                                      "UNKNOWN_RATE": 0.1},
                         smoke_spec_shapes=("all_unknown", "all_known")))
register_case(CaseConfig("mbdt", exact=True,
                         smoke_shape={"BATCH": 37, "FEATURES": 5, "BORDERS": 6},
                         smoke_spec_shapes=("paper_64x2x2", "edge_odd")))
register_case(CaseConfig("event_truncate", exact=True,
                         smoke_shape={"NUM_FEATURES": 3, "BATCH": 9, "MAX_LEN": 5, "MAX_EVENTS": 12},
                         smoke_spec_shapes=("keep_nothing", "empty_batch")))
