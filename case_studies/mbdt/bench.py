"""The MBDT benchmark, declared as data, and what the exact-output runner needs to measure it.

Shapes are Batch x Features x Borders (the paper's Figure 17 range, then beyond it). Run on a GPU
through `benchmarks/case_studies/run.py --case mbdt`; recorded results are in `results/case_studies/mbdt/bench.csv`.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from case_studies.common.contenders import compiled
from case_studies.common.preprocessing import ExactCase
from case_studies.mbdt.reference import MergeBucketizedDense, MergeBucketizedDenseVectorized
from case_studies.mbdt.spec import border_lengths, make_borders, make_x


def _shape(b: int, f: int, n: int) -> dict[str, Any]:
    return {"name": f"{b}x{f}x{n}", "BATCH": b, "FEATURES": f, "BORDERS": n}


KERNELS = ["triton", "triton_binary", "triton_b256"]
PAPER = [_shape(64, 2, 2), _shape(256, 2, 2), _shape(1024, 2, 4), _shape(2048, 2, 4)]
BEYOND = [_shape(2048, 16, 8), _shape(2048, 64, 16), _shape(8192, 64, 16), _shape(8192, 256, 32)]
BENCHMARK = {
    "name": "mbdt",
    "warmup_ms": 5,
    "rep_ms": 30,
    "sweeps": [
        {"name": "paper_range", "shapes": PAPER, "dtypes": ["float32"],
         "contenders": ["eager", "vectorized_eager", *KERNELS], "modes": ["plain", "graph"]},
        {"name": "beyond", "shapes": BEYOND, "dtypes": ["float32"],
         "contenders": ["eager", "vectorized_eager", *KERNELS], "modes": ["plain", "graph"]},
        # torch.compile costs seconds a shape on the lent machine: the paper's end points and ours
        {"name": "compiled_paper", "shapes": [PAPER[0], PAPER[3]], "dtypes": ["float32"],
         "contenders": ["compile_default", "vectorized_compile_default", "triton"],
         "modes": ["plain", "graph"]},
        {"name": "compiled_beyond", "shapes": [BEYOND[1], BEYOND[3]], "dtypes": ["float32"],
         "contenders": ["vectorized_compile_default", "triton"], "modes": ["plain", "graph"]},
    ],
}
DISPATCH_CONTENDERS = ["eager", "vectorized_eager", "triton", "dispatch"]


def make_inputs(p: dict[str, Any], device: str) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    torch.manual_seed(4321)
    lengths = border_lengths(p["FEATURES"], p["BORDERS"])
    borders = make_borders(lengths)
    x = make_x(p["BATCH"], p["FEATURES"], specials=True)   # NaN, +-inf, -0.0 in every timed input too
    return borders.to(device), torch.tensor(lengths, dtype=torch.int64), x.to(device)


def nbytes(p: dict[str, Any], inputs: Any) -> float:
    """x read once (4 B) and bin ids written once (8 B) per element; the borders are negligible."""
    return 12.0 * p["BATCH"] * p["FEATURES"]


def _module(cls: Any, compile_mode: str | None = None, **kw: Any) -> Any:
    def make(p: dict[str, Any], inputs: tuple) -> Any:
        borders, lengths, x = inputs
        m = cls(borders, lengths, **kw)
        if compile_mode is not None:
            return compiled(m, compile_mode)(p, (x,))
        m(x)            # compile the Triton kernel outside the timing loop
        return lambda: m(x)
    return make


def _kernel_module(**kw: Any) -> Any:
    from case_studies.mbdt import kernel

    class Configured(kernel.ModelNew):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return kernel.mbdt(x, self.padded, self.counts, self.offsets, **kw)

    return Configured


def configured(config: dict[str, Any]) -> Any:
    """The kernel with `config` (`kernel.mbdt` keywords: block, num_warps, search) as a contender factory,
    for A/B runs (`benchmarks/case_studies/ab.py`)."""
    return _module(_kernel_module(**config))


def _dispatch_module(results_csv: str | Path | None) -> Any:
    from case_studies.mbdt.dispatch import MBDTDispatch

    return lambda borders, lengths: MBDTDispatch(borders, lengths, results_csv=results_csv)


def case(dispatch_csv: str | Path | None = None) -> ExactCase:
    contenders = {
        "eager": _module(MergeBucketizedDense),
        "vectorized_eager": _module(MergeBucketizedDenseVectorized),
        "compile_default": _module(MergeBucketizedDense, "default"),
        "vectorized_compile_default": _module(MergeBucketizedDenseVectorized, "default"),
        "triton": lambda p, i: _module(_kernel_module())(p, i),
        "triton_binary": lambda p, i: _module(_kernel_module(search="binary"))(p, i),
        "triton_b256": lambda p, i: _module(_kernel_module(block=256, num_warps=2))(p, i),
        "dispatch": lambda p, i: _module(_dispatch_module(dispatch_csv))(p, i),
    }
    roles = {c: "pytorch" for c in contenders}
    roles.update(eager="baseline", dispatch="dispatch", **{k: "kernel" for k in KERNELS})
    return ExactCase(make_inputs=make_inputs, contenders=contenders, nbytes=nbytes, reference="eager",
                     roles=roles)


# The paper's numbers (KernelEvolve section 5.4.2, Figure 17): speedup over the per-feature bucketize
# loop on MTIA.
PAPER_SPEEDUPS = {
    "versus": "eager",
    "platform": "MTIA v2i and v3",
    "rows": [
        {"label": "v2i, 64x2x2", "low": 3.19, "high": 3.19},
        {"label": "v2i, 2048x2x4", "low": 9.25, "high": 9.25},
        {"label": "v2i, all shapes", "low": 2.94, "high": 9.25},
        {"label": "v3, all shapes", "low": 2.31, "high": 3.09},
    ],
}
