"""The conv1d benchmark, declared as data, and what the runner needs to measure it.

Run on a GPU through `benchmarks/case_studies/run.py --case conv1d`; recorded results are in
`results/case_studies/conv1d/bench.csv` with provenance on every row.
"""
from __future__ import annotations

from typing import Any

import torch

from case_studies.common.contenders import compiled, eager
from case_studies.common.metrics import dtype_bytes
from case_studies.common.runner import CaseStudyBench
from case_studies.conv1d.reference import conv1d_as_conv2d, conv1d_exact, conv1d_reference, out_length
from workbench.tolerances import case_study_tolerances


def _shape(name: str, B: int = 2048, K: int = 3, padding: int | None = None, C_in: int = 96,
           C_out: int = 96, L: int = 200, stride: int = 1) -> dict[str, Any]:
    return {"name": name, "B": B, "C_in": C_in, "C_out": C_out, "L": L, "K": K, "stride": stride,
            "padding": (K - 1) // 2 if padding is None else padding}


MODES = ["plain", "graph"]
PYTORCH_CORE = ["eager", "conv2d_eager", "compile_default", "conv2d_compile_default"]
# Sized for a short device lease (about two minutes of measuring): production against every contender,
# then the kernel-size, batch and out-of-distribution questions against eager and conv2d.
BENCHMARK = {
    "name": "conv1d",
    "warmup_ms": 10,
    "rep_ms": 50,
    "sweeps": [
        # the production shape against every PyTorch contender a user could pick
        {"name": "production", "shapes": [_shape("production")], "dtypes": ["float16", "float32"],
         "contenders": [*PYTORCH_CORE, "triton"], "modes": ["plain", "graph"]},
        # the paper's kernel-size question (it does not say which K production uses)
        {"name": "kernel_size", "shapes": [_shape("k1", K=1), _shape("k5", K=5)],
         "dtypes": ["float16"], "contenders": ["eager", "conv2d_eager", "triton"], "modes": MODES},
        {"name": "batch", "shapes": [_shape(f"b{b}", B=b) for b in (256, 4096)],
         "dtypes": ["float16"], "contenders": ["eager", "conv2d_eager", "triton"], "modes": MODES},
        # out of the production distribution: wide channels, stride 2 (dispatch territory)
        {"name": "ood", "shapes": [_shape("wide", B=64, C_in=512, C_out=512, L=256),
                                   _shape("stride2", B=2048, K=3, stride=2)],
         "dtypes": ["float16"], "contenders": ["eager", "conv2d_eager", "triton"], "modes": MODES},
        # inductor's max-autotune takes tens of seconds a shape: measured last, under the run's time budget
        {"name": "max_autotune", "shapes": [_shape("production")], "dtypes": ["float16", "float32"],
         "contenders": ["eager", "conv2d_compile_max_autotune"], "modes": ["plain", "graph"]},
    ],
}


# The paper's reported speedups (Table 3, section 5.1; H100, FP16 serving / FP32 training), for the
# notebook to show beside ours. `versus` names our contender that plays the paper's baseline.
PAPER_SPEEDUPS = [
    {"shape": "production", "dtype": "float16", "versus": "eager", "low": 2.30, "high": 2.30},
    {"shape": "production", "dtype": "float16", "versus": "conv2d_eager", "low": 1.62, "high": 1.62},
    {"shape": "production", "dtype": "float32", "versus": "eager", "low": 1.73, "high": 1.73},
    {"shape": "production", "dtype": "float32", "versus": "conv2d_eager", "low": 1.30, "high": 1.30},
]

TOLERANCES = case_study_tolerances(tf32=True)   # fp32: TF32 in the kernel and in cuDNN alike

# Device correctness checks (`case_studies.common.checks.float_checks`): small odd shapes, every dtype, the
# shipped path and the gather kernel, against fp32 with TF32 off (`conv1d_exact`).
CHECKS = {
    "shapes": [_shape("c5_co7_l123", B=3, C_in=5, C_out=7, L=123), _shape("c32_co17_l64", B=4, C_in=32, C_out=17, L=64),
               _shape("c96_k5", B=2, K=5, L=200), _shape("c40_s2_l29", B=2, C_in=40, C_out=24, L=29, stride=2),
               # padding 0 at odd L: wrong values on the H200 once (results/case_studies/conv1d/pad0_bug/)
               _shape("c32_p0_l29", B=2, C_in=32, C_out=24, L=29, padding=0)],
    "dtypes": ["float16", "float32", "bfloat16"],
    "configs": {"auto": {}, "gather": {"path": "gather"}},
}


def check_kernel(inputs: tuple, config: dict[str, Any], probes: bool) -> torch.Tensor:
    from case_studies.conv1d.kernel import triton_conv1d

    return triton_conv1d(*inputs, config=config, probes=probes)


def check_reference(inputs: tuple) -> torch.Tensor:
    return conv1d_exact(*inputs)


def make_inputs(p: dict[str, Any], dtype: torch.dtype, device: str) -> tuple[torch.Tensor, ...]:
    g = torch.Generator(device="cpu").manual_seed(0)
    x = torch.randn(p["B"], p["C_in"], p["L"], generator=g).to(device=device, dtype=dtype)
    w = (torch.randn(p["C_out"], p["C_in"], p["K"], generator=g) / (p["C_in"] * p["K"]) ** 0.5)
    b = torch.randn(p["C_out"], generator=g) * 0.1
    return x, w.to(device=device, dtype=dtype), b.to(device=device, dtype=dtype), p["stride"], p["padding"]


def flops(p: dict[str, Any]) -> float:
    """2 * B * C_out * L_out * C_in * K (one multiply-add per weight tap per output)."""
    l_out = out_length(p["L"], p["K"], p["stride"], p["padding"])
    return 2.0 * p["B"] * p["C_out"] * l_out * p["C_in"] * p["K"]


def nbytes(p: dict[str, Any], dtype: str) -> float:
    """x read once, y written once, weights and bias read once: the compulsory traffic."""
    l_out = out_length(p["L"], p["K"], p["stride"], p["padding"])
    n = (p["B"] * p["C_in"] * p["L"] + p["B"] * p["C_out"] * l_out + p["C_out"] * p["C_in"] * p["K"]
         + p["C_out"])
    return float(n * dtype_bytes(dtype))


def _triton(p: dict[str, Any], inputs: tuple) -> Any:
    from case_studies.conv1d.kernel import triton_conv1d

    triton_conv1d(*inputs)  # autotune (or compile) outside the timing loop
    return lambda: triton_conv1d(*inputs)


def case() -> CaseStudyBench:
    contenders = {
        "eager": eager(conv1d_reference),
        "conv2d_eager": eager(conv1d_as_conv2d),
        "compile_default": compiled(conv1d_reference, "default"),
        "conv2d_compile_default": compiled(conv1d_as_conv2d, "default"),
        "compile_max_autotune": compiled(conv1d_reference, "max-autotune-no-cudagraphs"),
        "conv2d_compile_max_autotune": compiled(conv1d_as_conv2d, "max-autotune-no-cudagraphs"),
        "triton": _triton,
    }
    roles = {c: "pytorch" for c in contenders}
    roles.update(eager="baseline", conv2d_eager="baseline", triton="kernel")
    return CaseStudyBench(make_inputs=make_inputs, contenders=contenders, flops=flops, nbytes=nbytes,
                          tolerances=TOLERANCES, reference="eager", roles=roles)


def configured(config: dict[str, Any]) -> Any:
    """Our kernel pinned to `config` (a `kernel.conv1d` config dict) as a contender factory, for A/B runs
    (`benchmarks/case_studies/ab.py`)."""
    import functools

    from case_studies.common.contenders import kernel as kernel_contender
    from case_studies.conv1d.kernel import triton_conv1d

    return kernel_contender(functools.partial(triton_conv1d, config=dict(config)))
