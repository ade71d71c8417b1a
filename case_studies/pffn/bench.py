"""The PFFN benchmark, declared as data, and what the runner needs to measure it.
Results: `results/case_studies/pffn/bench.csv` (recorded by `experiments/pffn/gpu_final.py`;
run: `benchmarks/case_studies/run.py --case pffn`)."""
from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any

import torch

from case_studies.common.contenders import kernel, pytorch_contenders
from case_studies.common.metrics import dtype_bytes
from case_studies.common.runner import CaseStudyBench
from case_studies.pffn.reference import pffn_reference
from workbench.tolerances import case_study_tolerances


def _shape(b: int, d: int, n: int = 16, k: int = 256) -> dict[str, Any]:
    return {"name": f"b{b}_d{d}", "N": n, "B": b, "D": d, "K": k}


PRODUCTION = [_shape(64, 128), _shape(256, 256), _shape(1024, 256), _shape(4096, 256)]
BENCHMARK = {
    "name": "pffn",
    "warmup_ms": 10,
    "rep_ms": 50,
    # Every sweep is named production_*: the production range is B 64-4096 and D 64-512, so
    # the production sweeps measure them all, in this order, within its budget.
    # torch.compile's max-autotune (tens of seconds a shape) was measured in an earlier run at b256_d256
    # (rows kept in bench.csv with their own provenance).
    "sweeps": [
        # triton_erff: the same kernel and dispatch with libdevice's erff in the GELU (FAST_GELU=0), side by side
        {"name": "production", "shapes": PRODUCTION, "dtypes": ["float16"],
         "contenders": ["eager", "compile_default", "triton", "triton_erff"],
         "modes": ["plain", "graph"]},
        {"name": "production_bf16", "shapes": [PRODUCTION[1]], "dtypes": ["bfloat16"],
         "contenders": ["eager", "compile_default", "triton"], "modes": ["plain", "graph"]},
        {"name": "production_bf16", "shapes": [PRODUCTION[0], *PRODUCTION[2:]], "dtypes": ["bfloat16"],
         "contenders": ["eager", "triton"], "modes": ["plain", "graph"]},
        # the paper's sweeps: B from 64 to 4096 at D 256, D over {64, ..., 512} at B 1024
        {"name": "production_batch", "shapes": [_shape(b, 256) for b in (512, 2048)], "dtypes": ["float16"],
         "contenders": ["eager", "triton"], "modes": ["plain", "graph"]},
        {"name": "production_dim", "shapes": [_shape(1024, d) for d in (64, 100, 200, 512)],
         "dtypes": ["float16"], "contenders": ["eager", "triton"], "modes": ["plain", "graph"]},
    ],
}


# The paper's reported speedups over PyTorch (section 5.3.2; H100), for the notebook.
PAPER_SPEEDUPS = [
    {"shape": "b64_d128", "dtype": "float16", "versus": "eager", "low": 2.0, "high": 2.6},
    {"shape": "b256_d256", "dtype": "float16", "versus": "eager", "low": 2.0, "high": 2.6},
    {"shape": "b512_d256", "dtype": "float16", "versus": "eager", "low": 1.2, "high": 1.4},
    {"shape": "b1024_d256", "dtype": "float16", "versus": "eager", "low": 1.2, "high": 1.4},
    {"shape": "b4096_d256", "dtype": "float16", "versus": "eager", "low": 1.2, "high": 1.4},
]

TOLERANCES = case_study_tolerances()

# Device correctness checks (`case_studies.common.checks.float_checks`): odd sizes below the tiles and a
# wide D, the fixed tiles, against PyTorch in the same dtype.
CHECKS = {"shapes": [_shape(5, 123, n=2, k=48), _shape(70, 512, n=3)], "dtypes": ["float16", "bfloat16"],
          "configs": {"fixed": {}}}


def check_kernel(inputs: tuple, config: dict[str, Any], probes: bool) -> torch.Tensor:
    from case_studies.pffn.kernel import triton_pffn

    return triton_pffn(*inputs, config=config, probes=probes)


def check_reference(inputs: tuple) -> torch.Tensor:
    return pffn_reference(*inputs)


def make_inputs(p: dict[str, Any], dtype: torch.dtype, device: str) -> tuple[torch.Tensor, ...]:
    g = torch.Generator(device="cpu").manual_seed(0)
    n, b, d, k = p["N"], p["B"], p["D"], p["K"]
    x = torch.randn(n, b, d, generator=g)
    w1 = torch.randn(n, d, k, generator=g) / d ** 0.5
    w2 = torch.randn(n, k, d, generator=g) / k ** 0.5
    g1 = 1.0 + 0.1 * torch.randn(k, generator=g)
    g2 = 1.0 + 0.1 * torch.randn(d, generator=g)
    return tuple(t.to(device=device, dtype=dtype) for t in (x, w1, w2, g1, g2))


def flops(p: dict[str, Any]) -> float:
    """Two products of 2 * N * B * D * K each (the elementwise work is negligible beside them)."""
    return 4.0 * p["N"] * p["B"] * p["D"] * p["K"]


def nbytes(p: dict[str, Any], dtype: str) -> float:
    """X read once, out written once, both weight sets and norm weights read once."""
    n, b, d, k = p["N"], p["B"], p["D"], p["K"]
    return float((2 * n * b * d + 2 * n * d * k + k + d) * dtype_bytes(dtype))


PRECOMPILE = True     # compile every autotune config of every benchmarked shape first, in parallel


def warm_compile_cache() -> None:
    """Compile every config the benchmark's autotuning will time, in parallel, once per process."""
    if PRECOMPILE:
        from case_studies.common.launch import warm_benchmark_once
        from case_studies.pffn.kernel import configs_for

        warm_benchmark_once("pffn", BENCHMARK, configs_for)


def _erff_variant(params: dict[str, Any], inputs: Sequence[Any]) -> Callable[[], Any]:
    """Our kernel with libdevice's erff in the GELU, at the tiles the autotuner chose for `triton` at this
    shape (measured after it, in the same run: one compile instead of a second tuning)."""
    from case_studies.pffn import kernel as pk

    x = inputs[0]
    tuned = [c for k, c in pk.best_config().items()
             if tuple(k[:3]) == (params["B"], params["D"], params["K"]) and str(x.dtype) in map(str, k)]
    fn = functools.partial(pk.triton_pffn, config={**(tuned[0] if tuned else {}), "FAST_GELU": 0})
    fn(*inputs)
    return lambda: fn(*inputs)


def case() -> CaseStudyBench:
    from case_studies.pffn.kernel import triton_pffn

    warm_compile_cache()
    contenders = {**pytorch_contenders(pffn_reference), "triton": kernel(triton_pffn), "triton_erff": _erff_variant}
    roles = {c: "pytorch" for c in contenders}
    roles.update(eager="baseline", triton="kernel", triton_erff="kernel")
    return CaseStudyBench(make_inputs=make_inputs, contenders=contenders, flops=flops, nbytes=nbytes,
                          tolerances=TOLERANCES, reference="eager", roles=roles)


def configured(config: dict[str, Any]) -> Any:
    """Our kernel pinned to `config` (a `kernel.triton_pffn` config dict) as a contender factory, for A/B runs
    (`benchmarks/case_studies/ab.py`)."""
    import functools

    from case_studies.common.contenders import kernel as kernel_contender
    from case_studies.pffn.kernel import triton_pffn

    return kernel_contender(functools.partial(triton_pffn, config=dict(config)))
