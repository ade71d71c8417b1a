"""Each primitive against PyTorch on odd shapes in every dtype it supports (tolerances: workbench/tolerances.py).

A case is a one-line forward written into a tiny spec; the spec is lowered and `ModelNew` is compared
with `Model` in-process (tests/lowering/helpers.py). The harness end-to-end path is test_end_to_end.py.
"""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.lowering.helpers import check_candidate
from workbench.lowering import lower_spec

FLOATS = ("float32", "float16", "bfloat16")

SPEC = '''import torch
import torch.nn as nn

DT = torch.{dt}


class Model(nn.Module):
    def __init__(self):
        super().__init__()
{init}

    def forward(self, {args}):
        return ({expr},)


def get_inputs():
    return [{inputs}]


def get_init_inputs():
    return []
'''


def _family(tmp_path: Path, family: str, dt: str, cases: dict[str, tuple[str, str, str]],
            init: dict[str, str] | None = None) -> None:
    """All cases of one family in one spec (one lowering: the capture dominates the test's time);
    case k's arguments are renamed `<name>{k}`, its module `self.m` becomes `self.m{k}`."""
    args, exprs, inputs, inits = [], [], [], ["pass"]
    for k, name in enumerate(sorted(cases)):
        a, expr, inp = cases[name]
        names = [x.strip() for x in a.split(",")]
        for n in names:
            expr = re.sub(rf"\b{n}\b", f"{n}{k}", expr)
        args += [f"{n}{k}" for n in names]
        exprs.append(expr.replace("self.m(", f"self.m{k}("))
        inputs.append(inp)
        if init and name in init:
            inits.append(init[name].replace("self.m ", f"self.m{k} "))
    spec = tmp_path / f"{family}_{dt}.py"
    spec.write_text(SPEC.format(dt=dt, args=", ".join(args), expr=", ".join(exprs), inputs=", ".join(inputs),
                                init="\n".join("        " + i for i in inits)))
    res = lower_spec(spec)
    assert res.source is not None, res.diagnosis
    check_candidate(spec, res.source, tmp_path)


def _case(tmp_path: Path, name: str, dt: str, args: str, expr: str, inputs: str) -> None:
    _family(tmp_path, name, dt, {name: (args, expr, inputs)})


R = "torch.randn({}, dtype=DT)"
POS = "(torch.rand({}, dtype=DT) + 0.5)"
INT = "torch.randint(-9, 10, ({},), dtype=DT)"

POINTWISE = {
    "broadcast_arith": ("a, b", "(a + b) * 2.0 - a / (b.abs() + 1.0)", f"{R.format('5, 1, 7')}, {R.format('3, 7')}"),
    "activations": ("a", "torch.tanh(a) + torch.sigmoid(a) + nn.functional.gelu(a) + torch.relu(a) "
                    "+ nn.functional.gelu(a, approximate='tanh') + nn.functional.silu(a) + nn.functional.elu(a)",
                    R.format("4, 37")),
    "math": ("a", "torch.sqrt(a) + torch.log(a) + torch.exp(-a) + torch.rsqrt(a) + a ** 1.7 + torch.log1p(a) "
             "+ torch.expm1(-a) + torch.atan(a) + torch.pow(a, a)", POS.format("3, 5, 9")),
    "where_clamp_masked": ("a, b", "torch.where(a > b, a, b).clamp(-0.5, 0.7) + a.masked_fill(b < 0, 3.0) "
                           "+ torch.clamp(b, min=-0.2)", f"{R.format('6, 11')}, {R.format('6, 11')}"),
    "rounding": ("a", "torch.floor(a * 3) + torch.ceil(a * 3) + torch.round(a * 3) + torch.trunc(a * 3) "
                 "+ torch.sign(a) + torch.remainder(a * 5, 0.5) + torch.fmod(a * 5, 2.0)", R.format("41")),
}


@pytest.mark.parametrize("dt", FLOATS)
def test_pointwise(tmp_path: Path, dt: str) -> None:
    _family(tmp_path, "pointwise", dt, POINTWISE)


@pytest.mark.parametrize("dt", ("int32", "int64"))
def test_pointwise_integer(tmp_path: Path, dt: str) -> None:
    _case(tmp_path, "int_ops", dt, "a, b", "(a * b + a - 3) % 7 + torch.maximum(a, b) + (a & b) + (a // 4)",
          f"{INT.format('5, 3')}, {INT.format('3')}")


REDUCTIONS = {
    "sum_mean": ("x.sum(dim=1) + x.mean(dim=(0, 2), keepdim=True).sum() + x.sum()", "5, 7, 3"),
    "amax_amin_prod": ("x.amax(dim=-1, keepdim=True) - x.amin(dim=0) + (x * 0.1 + 1.0).prod(dim=2, keepdim=True)",
                       "4, 6, 9"),
    "arg": ("torch.stack([x.argmax(dim=1), x.argmin(dim=0, keepdim=True).squeeze(0)[:5]], 0)", "5, 13"),
    "var_std": ("x.var(dim=1) + x.std(dim=0, unbiased=False).sum() + x.var(dim=1, keepdim=True, correction=0)",
                "6, 33"),
    "any_all_max": ("(x > 0.5).any(dim=1).to(x.dtype) + (x > -2.0).all(dim=1).to(x.dtype) + x.max(dim=1)[0]",
                    "7, 19"),
}


@pytest.mark.parametrize("dt", FLOATS)
def test_reductions(tmp_path: Path, dt: str) -> None:
    _family(tmp_path, "reductions", dt, {k: ("x", e, R.format(shp)) for k, (e, shp) in REDUCTIONS.items()})


def test_integer_reductions(tmp_path: Path) -> None:
    _case(tmp_path, "int_red", "int64", "x", "x.sum(dim=1) + x.amax(dim=1) + x.argmax(dim=1)", INT.format("5, 9"))


MATMULS = {
    "mm": ("a, b", "a @ b", f"{R.format('5, 7')}, {R.format('7, 3')}"),
    "bmm": ("a, b", "torch.bmm(a, b)", f"{R.format('3, 5, 17')}, {R.format('3, 17, 9')}"),
    "addmm_linear": ("a, b", "torch.addmm(b[:, 0], a, b.t() * 0.5, beta=0.5, alpha=2.0)",
                     f"{R.format('6, 11')}, {R.format('5, 11')}"),
    "baddbmm": ("c, a, b", "torch.baddbmm(c, a, b)", f"{R.format('2, 5, 3')}, {R.format('2, 5, 7')}, "
                f"{R.format('2, 7, 3')}"),
    "matmul_4d": ("a, b", "torch.matmul(a, b).relu()", f"{R.format('2, 3, 5, 7')}, {R.format('7, 6')}"),
}


@pytest.mark.parametrize("dt", FLOATS)
def test_matmul(tmp_path: Path, dt: str) -> None:
    _family(tmp_path, "matmul", dt, MATMULS)


CONVS = {
    "conv1d": ("nn.Conv1d(4, 6, 3, stride=2, padding=1, dilation=2)", "2, 4, 19"),
    "conv2d_groups": ("nn.Conv2d(4, 6, (3, 2), padding=(1, 0), groups=2)", "2, 4, 7, 9"),
    "conv3d": ("nn.Conv3d(2, 3, 2, stride=(1, 2, 1), bias=False)", "1, 2, 4, 5, 3"),
    "conv_transpose2d": ("nn.ConvTranspose2d(4, 6, 3, stride=2, padding=1, output_padding=1, groups=2)",
                         "2, 4, 5, 3"),
    "conv_transpose1d": ("nn.ConvTranspose1d(3, 2, 4, stride=3, dilation=2)", "2, 3, 7"),
    "conv_transpose3d": ("nn.ConvTranspose3d(4, 2, (2, 3, 3), stride=(1, 2, 3), padding=(0, 1, 1), groups=2)",
                         "1, 4, 3, 4, 2"),
}


# >= 16 input channels per group: the tap-major loop (transposed with a stride: one class per residue)
CONVS_TAP = {
    "conv2d": ("nn.Conv2d(17, 6, 3, stride=2, padding=1, dilation=2)", "2, 17, 9, 8"),
    "conv3d": ("nn.Conv3d(20, 7, 2, stride=(1, 2, 1))", "1, 20, 4, 5, 3"),
    "conv_transpose2d": ("nn.ConvTranspose2d(32, 6, 3, stride=2, padding=1, output_padding=1, groups=2)",
                         "2, 32, 5, 4"),
    "conv_transpose3d": ("nn.ConvTranspose3d(16, 5, (3, 2, 3), stride=(2, 1, 3), padding=(1, 0, 1), bias=False)",
                         "1, 16, 3, 4, 3"),
    "conv_transpose1d": ("nn.ConvTranspose1d(16, 4, 4, stride=3, padding=2, dilation=2)", "2, 16, 6"),
    "conv_transpose1d_s1": ("nn.ConvTranspose1d(16, 3, 3, padding=1)", "2, 16, 7"),
}


# fewer than 16 input channels a group, not transposed: the direct form (outer products per channel and tap,
# taps unrolled): padded and unpadded dims, stride with dilation, groups, output channels past one block
# (DIRECT_BLOCK_CO 32) and not a power of two, an epilogue
CONVS_DIRECT = {
    "d1d": ("nn.Conv1d(3, 5, 4, stride=3, padding=2, dilation=2)", "2, 3, 17"),
    "d2d_groups": ("nn.Conv2d(6, 9, (3, 2), stride=(2, 1), padding=(1, 0), groups=3)", "2, 6, 7, 9"),
    "d2d_wide": ("nn.Conv2d(3, 37, 5, stride=2, padding=2)", "1, 3, 11, 10"),
    "d3d": ("nn.Conv3d(3, 16, 3, padding=(1, 0, 1))", "2, 3, 4, 5, 6"),
    "d3d_nobias": ("nn.Conv3d(2, 3, 2, stride=(1, 2, 1), dilation=(2, 1, 1), bias=False)", "1, 2, 5, 5, 3"),
}


# one input channel a group: the depthwise form (no tl.dot), multipliers 1 and 2, with an epilogue
CONVS_DW = {
    "dw1d": ("nn.Conv1d(5, 10, 3, stride=2, padding=1, groups=5)", "2, 5, 13"),
    "dw2d": ("nn.Conv2d(6, 6, (3, 5), stride=(2, 1), padding=(1, 2), dilation=(1, 2), groups=6)", "2, 6, 9, 11"),
    "dw2d_nobias": ("nn.Conv2d(3, 3, 3, padding=1, groups=3, bias=False)", "1, 3, 7, 5"),
    "dw3d": ("nn.Conv3d(4, 8, 2, stride=(1, 2, 1), groups=4)", "1, 4, 3, 5, 4"),
}


@pytest.mark.parametrize("dt", FLOATS)
@pytest.mark.parametrize("cases", ["flat", "tap", "depthwise", "direct"])
def test_convolution(tmp_path: Path, dt: str, cases: str) -> None:
    if cases == "direct":
        _family(tmp_path, "conv_direct", dt, {k: ("x", "torch.sigmoid(self.m(x) * 2)", R.format(shp))
                                              for k, (_, shp) in CONVS_DIRECT.items()},
                init={k: f"self.m = {mod}.to(DT)" for k, (mod, _) in CONVS_DIRECT.items()})
        return
    if cases == "depthwise":
        _family(tmp_path, "conv_dw", dt, {k: ("x", "torch.tanh(self.m(x)) * 2", R.format(shp))
                                          for k, (_, shp) in CONVS_DW.items()},
                init={k: f"self.m = {mod}.to(DT)" for k, (mod, _) in CONVS_DW.items()})
        return
    convs = CONVS if cases == "flat" else CONVS_TAP
    _family(tmp_path, f"conv_{cases}", dt, {k: ("x", "self.m(x)", R.format(shp)) for k, (_, shp) in convs.items()},
            init={k: f"self.m = {mod}.to(DT)" for k, (mod, _) in convs.items()})


def test_convolution_loops(tmp_path: Path) -> None:
    """Which reduction loop each convolution gets: tap-major from 16 channels a group, stride classes only
    for a strided transposed one; fewer channels, not transposed: the direct kernel and its flat twin
    (CONV_DIRECT picks one at run time)."""
    spec = tmp_path / "convs.py"
    init = [f"self.m{k} = {mod}" for k, (mod, _) in enumerate(CONVS_TAP.values())]
    n = len(init)
    init += [f"self.m{n} = {CONVS['conv2d_groups'][0]}", f"self.m{n + 1} = {CONVS['conv_transpose2d'][0]}",
             f"self.m{n + 2} = {CONVS_DW['dw2d'][0]}"]
    shapes = [shp for _, shp in CONVS_TAP.values()] + [CONVS["conv2d_groups"][1], CONVS["conv_transpose2d"][1],
                                                       CONVS_DW["dw2d"][1]]
    args = ", ".join(f"x{k}" for k in range(len(shapes)))
    expr = ", ".join(f"self.m{k}(x{k})" for k in range(len(shapes)))
    spec.write_text(SPEC.format(dt="float32", args=args, expr=expr, inputs=", ".join(R.format(s) for s in shapes),
                                init="\n".join("        " + i for i in init)))
    res = lower_spec(spec)
    assert res.source is not None, res.diagnosis
    loops = re.findall(r"((?:tap-major|depthwise|direct \(ci, taps\)|flat \(ci, k\))(?:, \d+ stride classes)?) "
                       r"reduction", res.source)
    assert loops == ["tap-major", "tap-major", "tap-major, 4 stride classes", "tap-major, 6 stride classes",
                     "tap-major, 3 stride classes", "tap-major", "direct (ci, taps)", "flat (ci, k)",
                     "flat (ci, k), 4 stride classes", "depthwise"]


POOLS = {
    "max2d": ("nn.functional.max_pool2d(x, 3, stride=2, padding=1, ceil_mode=True)", "2, 3, 9, 7"),
    "max1d_3d": ("nn.functional.max_pool1d(x.flatten(2), 2).sum(-1) + nn.functional.max_pool3d("
                 "x.unsqueeze(2).expand(-1, -1, 3, -1, -1), 2, dilation=1).flatten(2).sum(-1)", "2, 3, 9, 7"),
    "avg": ("nn.functional.avg_pool2d(x, 3, stride=2, padding=1, count_include_pad=False) + "
            "nn.functional.avg_pool2d(x, 3, stride=2, padding=1)", "2, 3, 9, 7"),
}


@pytest.mark.parametrize("dt", FLOATS)
def test_pooling(tmp_path: Path, dt: str) -> None:
    _family(tmp_path, "pool", dt, {k: ("x", e, R.format(shp)) for k, (e, shp) in POOLS.items()})


SCANS = {
    "cumsum": ("torch.cumsum(x, dim=1) + torch.cumsum(x.flip(0), dim=0).flip(0)", R.format("5, 300")),
    "cumprod": ("torch.cumprod(x, dim=-1)", POS.format("3, 4, 7")),
}


@pytest.mark.parametrize("dt", FLOATS)
def test_scans(tmp_path: Path, dt: str) -> None:
    _family(tmp_path, "scan", dt, {k: ("x", e, inp) for k, (e, inp) in SCANS.items()})


def test_integer_cumsum(tmp_path: Path) -> None:
    _case(tmp_path, "int_cumsum", "int32", "x", "torch.cumsum(x, dim=0)", INT.format("9, 4"))


GATHERS = {
    "gather": ("x, i", "torch.gather(x, 1, i) * 2", f"{R.format('5, 7')}, torch.randint(0, 7, (5, 3))"),
    "index": ("x, i", "x[:, i] + x[i[1:3]].sum()", f"{R.format('6, 7')}, torch.randint(-6, 6, (4,))"),
    "embedding": ("x, i", "self.emb(i) + x", f"{R.format('3, 2, 5')}, torch.randint(0, 11, (3, 2))"),
}


@pytest.mark.parametrize("dt", FLOATS)
def test_gathers(tmp_path: Path, dt: str) -> None:
    _family(tmp_path, "gather", dt, GATHERS, init={"embedding": "self.emb = nn.Embedding(11, 5).to(DT)"})


SCATTERS = {
    "scatter": ("x, i, s", "torch.scatter(x, 1, i, s) + torch.scatter(x, 0, i[:2] % 4, 2.5)",
                f"{R.format('4, 9')}, torch.stack([torch.randperm(9)[:5] for _ in range(4)]), {R.format('4, 5')}"),
    "scatter_add": ("x, i, s", "torch.scatter_add(x, 1, i, s)",
                    f"{R.format('4, 9')}, torch.randint(0, 9, (4, 6)), {R.format('4, 6')}"),
}


@pytest.mark.parametrize("dt", FLOATS)
def test_scatters(tmp_path: Path, dt: str) -> None:
    _family(tmp_path, "scatter", dt, SCATTERS)
