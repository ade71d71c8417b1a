"""The Optimized FM benchmark, declared as data, and what the runner needs to measure it.
Results: `results/case_studies/optimized_fm/bench.csv` (recorded by `experiments/run_gpu_part1.py`;
run: `benchmarks/case_studies/run.py --case optimized_fm`)."""
from __future__ import annotations

from typing import Any

import torch

from case_studies.common.contenders import kernel, pytorch_contenders
from case_studies.common.metrics import dtype_bytes
from case_studies.common.runner import CaseStudyBench
from case_studies.optimized_fm.reference import optimized_fm_reference
from workbench.tolerances import case_study_tolerances


def _shape(n: int, k: int, b: int = 1024, d: int = 224) -> dict[str, Any]:
    return {"name": f"n{n}_k{k}", "B": b, "N": n, "D": d, "K": k}


PRODUCTION = [_shape(24, 16), _shape(64, 16), _shape(128, 64)]
BENCHMARK = {
    "name": "optimized_fm",
    "warmup_ms": 10,
    "rep_ms": 50,
    # Every sweep is named production_*: the production range is N 8-128 and K 16-64, so
    # `run.py --shapes production,production_bf16,production_sweep` measures them all, in this order, within its budget.
    "sweeps": [
        {"name": "production", "shapes": PRODUCTION, "dtypes": ["float16"],
         "contenders": ["eager", "compile_default", "triton"],
         "modes": ["plain", "graph"]},
        {"name": "production_bf16", "shapes": PRODUCTION[:1], "dtypes": ["bfloat16"],
         "contenders": ["eager", "compile_default", "triton"], "modes": ["plain", "graph"]},
        {"name": "production_bf16", "shapes": PRODUCTION[1:], "dtypes": ["bfloat16"],
         "contenders": ["eager", "triton"], "modes": ["plain", "graph"]},
        # the paper's Figure 14 sweep (N 8-128, K 16-64), thinned to fit a short device lease
        {"name": "production_sweep", "shapes": [_shape(n, 16) for n in (8, 40, 96)] + [_shape(24, 32)]
         + [_shape(n, 64) for n in (24, 64)],
         "dtypes": ["float16"], "contenders": ["eager", "triton"], "modes": ["plain", "graph"]},
        # last: tens of seconds of compilation; only with `run.py --compile`
        {"name": "max_autotune", "shapes": PRODUCTION[:1], "dtypes": ["float16"],
         "contenders": ["compile_max_autotune"], "modes": ["plain", "graph"]},
    ],
}


# The paper's reported speedups over PyTorch (section 5.3.1, Figure 14; H100), for the notebook.
PAPER_SPEEDUPS = [
    {"shape": "n24_k16", "dtype": "float16", "versus": "eager", "low": 3.6, "high": 3.9},
    {"shape": "n64_k16", "dtype": "float16", "versus": "eager", "low": 2.0, "high": 2.5},
    {"shape": "n128_k64", "dtype": "float16", "versus": "eager", "low": 1.0, "high": 1.0},   # "about 1x"
]

TOLERANCES = case_study_tolerances()

# Device correctness checks (`case_studies.common.checks.float_checks`): odd shapes below the tiles and a
# large N, the fixed tiles, against PyTorch in the same dtype.
CHECKS = {"shapes": [_shape(5, 7, b=5, d=123), _shape(128, 64, b=3)], "dtypes": ["float16", "bfloat16"],
          "configs": {"fixed": {}}}


def check_kernel(inputs: tuple, config: dict[str, Any], probes: bool) -> torch.Tensor:
    from case_studies.optimized_fm.kernel import triton_optimized_fm

    return triton_optimized_fm(*inputs, config=config, probes=probes)


def check_reference(inputs: tuple) -> torch.Tensor:
    return optimized_fm_reference(*inputs)


def make_inputs(p: dict[str, Any], dtype: torch.dtype, device: str) -> tuple[torch.Tensor, ...]:
    g = torch.Generator(device="cpu").manual_seed(0)
    x = torch.randn(p["B"], p["N"], p["D"], generator=g) * p["D"] ** -0.25
    y = torch.randn(p["N"], p["K"], generator=g) / p["N"] ** 0.5
    return x.to(device=device, dtype=dtype), y.to(device=device, dtype=dtype)


def flops(p: dict[str, Any]) -> float:
    """Two products of 2 * B * N * D * K each."""
    return 4.0 * p["B"] * p["N"] * p["D"] * p["K"]


def nbytes(p: dict[str, Any], dtype: str) -> float:
    """X and Y read once, out written once (the fused kernel's compulsory traffic; PyTorch also writes
    and reads the [B, D, K] intermediate)."""
    return float((p["B"] * p["N"] * p["D"] + p["N"] * p["K"] + p["B"] * p["N"] * p["K"]) * dtype_bytes(dtype))


PRECOMPILE = True     # compile every autotune config of every benchmarked shape first, in parallel


def warm_compile_cache() -> None:
    """Compile every config the benchmark's autotuning will time, in parallel, once per process."""
    if PRECOMPILE:
        from case_studies.common.launch import warm_benchmark_once
        from case_studies.optimized_fm.kernel import configs_for

        warm_benchmark_once("optimized_fm", BENCHMARK, configs_for)


def case() -> CaseStudyBench:
    from case_studies.optimized_fm.kernel import triton_optimized_fm

    warm_compile_cache()
    contenders = {**pytorch_contenders(optimized_fm_reference), "triton": kernel(triton_optimized_fm)}
    roles = {c: "pytorch" for c in contenders}
    roles.update(eager="baseline", triton="kernel")
    return CaseStudyBench(make_inputs=make_inputs, contenders=contenders, flops=flops, nbytes=nbytes,
                          tolerances=TOLERANCES, reference="eager", roles=roles)


def configured(config: dict[str, Any]) -> Any:
    """Our kernel pinned to `config` (a `kernel.triton_optimized_fm` config dict) as a contender factory, for A/B runs
    (`benchmarks/case_studies/ab.py`)."""
    import functools

    from case_studies.common.contenders import kernel as kernel_contender
    from case_studies.optimized_fm.kernel import triton_optimized_fm

    return kernel_contender(functools.partial(triton_optimized_fm, config=dict(config)))
