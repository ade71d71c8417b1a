"""Lowered max/min-like ops against eager on rows holding nan, under the interpreter's semantics and the GPU's.

Triton's `tl.maximum`/`tl.minimum` default to `propagate_nan=tl.PropagateNan.NONE`, which compiles to
max.f32/min.f32 on an NVIDIA GPU: a nan operand gives the *other* one. The interpreter implements them with
np.maximum/np.minimum, which propagate nan, so a kernel relying on the default is right on the interpreter and
wrong on the GPU (its `tl.max`/`tl.min` reductions are np.nanmax/np.nanmin there, as the GPU). Eager's relu,
clamp, hardtanh, relu6, maximum/minimum, amax/amin, max/min (values and indices), max_pool and dist(p=inf)
return nan for a nan input; fmax/fmin ignore it. Each spec runs twice: as the interpreter is, and with its
float maximum/minimum made np.fmax/np.fmin (`_gpu_max_semantics`, the softmax test's patch: max.f32/min.f32).

Rows: random, nan first, nan in the middle, nan last, all nan, nan beside +inf, nan among -inf, +-inf; 1000
wide (several blocks of a reduction's loop: a lane's accumulator sees the nan, then finite values), plus the
whole tensor with one nan at its first, middle, last element; fp32, fp16, bf16.
"""
from __future__ import annotations

from pathlib import Path

import pytest
import torch

from tests.lowering.helpers import flat, load_module
from tests.lowering.test_softmax_kernel import _gpu_max_semantics
from workbench.lowering import lower_spec
from workbench.tolerances import tolerance_for

SPEC = '''import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def forward(self, {args}):
        return {expr}


def get_inputs():
    return [{inputs}]


def get_init_inputs():
    return []
'''

R, N = 8, 1000
# name -> (forward, number of tensor inputs)
FORWARDS = {
    "relu": ("torch.relu(x)", 1),
    "relu6": ("F.relu6(x)", 1),
    "clamp": ("torch.clamp(x, -0.5, 0.5)", 1),
    "clamp_min": ("torch.clamp_min(x, 0.25)", 1),
    "hardtanh": ("F.hardtanh(x)", 1),
    "maximum": ("torch.maximum(x, y)", 2),
    "minimum": ("torch.minimum(x, y)", 2),
    "fmax": ("torch.fmax(x, y)", 2),
    "fmin": ("torch.fmin(x, y)", 2),
    "amax_dim": ("torch.amax(x, dim=1)", 1),
    "amin_dim": ("torch.amin(x, dim=1)", 1),
    "amax_all": ("torch.amax(x)", 1),
    "amin_all": ("torch.amin(x)", 1),
    "max_dim": ("torch.max(x, dim=1)", 1),
    "min_dim": ("torch.min(x, dim=1)", 1),
    "max_pool2d": (f"F.max_pool2d(x.view(1, {R}, 25, 40), 2)", 1),
    "dist_inf": ("torch.dist(x, y, p=float('inf'))", 2),
}
DTYPES = ("float32", "float16", "bfloat16")
INF, NAN = float("inf"), float("nan")

_DRAFTS: dict[tuple[str, str], object] = {}


def _draft(tmp_path_factory: pytest.TempPathFactory, name: str, dt: str):  # noqa: ANN202 - the candidate module
    if (name, dt) not in _DRAFTS:
        expr, k = FORWARDS[name]
        d = tmp_path_factory.mktemp(f"nan_{name}_{dt}")
        spec = d / "spec.py"
        spec.write_text(SPEC.format(args=", ".join("xy"[:k]), expr=expr,
                                    inputs=", ".join([f"torch.randn({R}, {N}, dtype=torch.{dt})"] * k)))
        res = lower_spec(spec)
        assert res.source is not None, res.diagnosis
        path = d / "cand.py"
        path.write_text(res.source)
        _DRAFTS[(name, dt)] = load_module(Path(path), f"cand_nan_{name}_{dt}")
    return _DRAFTS[(name, dt)]


def _rows(gen: torch.Generator, shift: int) -> torch.Tensor:
    """[R, N] fp32: the rows of the module docstring; `shift` moves the nans of y away from x's."""
    x = torch.randn(R, N, generator=gen)
    x[1, (0 + shift) % N] = NAN
    x[2, (N // 2 + shift) % N] = NAN
    x[3, (N - 1 - shift) % N] = NAN
    x[4] = NAN
    x[5, 0], x[5, N // 3] = INF, NAN
    x[6] = -INF
    x[6, N // 2 + shift] = NAN
    x[7, 0], x[7, N - 1] = -INF, INF
    return x


def _inputs(k: int, dt: str, gen: torch.Generator) -> list[list[torch.Tensor]]:
    """Input sets: the special rows (y's nans elsewhere, also at some of x's), then one nan at the first,
    middle and last element of a random tensor."""
    sets = [[_rows(gen, 0), _rows(gen, 3)][:k]]
    for i in (0, R * N // 2 + 7, R * N - 1):
        xs = [torch.randn(R, N, generator=gen) for _ in range(k)]
        xs[0].view(-1)[i] = NAN
        sets.append(xs)
    return [[t.to(getattr(torch, dt)) for t in s] for s in sets]


def _check(cand, name: str, xs: list[torch.Tensor]) -> None:  # noqa: ANN001 - the candidate module
    expr, _ = FORWARDS[name]
    env = {"torch": torch, "F": torch.nn.functional, "x": xs[0].clone(), "y": xs[-1].clone()}
    with torch.no_grad():
        want = flat(eval(expr, env))  # noqa: S307 - our own fixed expressions
        got = flat(cand.ModelNew()(*xs))
    assert len(got) == len(want)
    for i, (g, w) in enumerate(zip(got, want)):
        assert g.shape == w.shape and g.dtype == w.dtype, (i, g.shape, g.dtype, w.shape, w.dtype)
        if w.dtype.is_floating_point:
            atol, rtol = tolerance_for(w.dtype)
            torch.testing.assert_close(g.float(), w.float(), atol=atol, rtol=rtol, equal_nan=True,
                                       msg=lambda m, i=i: f"{name} output {i}: {m}")
        else:
            assert torch.equal(g, w), f"{name} output {i} (indices): got {g.tolist()}, eager {w.tolist()}"


@pytest.mark.parametrize("gpu", [False, True], ids=["interp", "gpu_max"])
@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("name", sorted(FORWARDS))
def test_nan_matches_eager(tmp_path_factory: pytest.TempPathFactory, name: str, dt: str, gpu: bool) -> None:
    cand = _draft(tmp_path_factory, name, dt)
    gen = torch.Generator().manual_seed(0)
    for xs in _inputs(FORWARDS[name][1], dt, gen):
        if gpu:
            with _gpu_max_semantics():
                _check(cand, name, xs)
        else:
            _check(cand, name, xs)
