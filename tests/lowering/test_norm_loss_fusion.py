"""Norms over long rows and losses: their launch counts, their results against PyTorch, their sm_90 compile.

A norm's statistics are one Welford pass (var and sum of x in one kernel, norm_stats.py) and its tiny
epilogue (rsqrt, the mean) runs in the combine of the split; a loss's pointwise prologue with several inputs
(hinge: clamp(1 - pred * target, 0), MSE: (pred - target) ** 2) is computed as the reduction loads it. The
split is forced at small sizes by shrinking RED_BLOCK_N, as tests/lowering/test_reduction_split.py does. The
forwards are KernelBench's (level 1: 33-35, 40, 94, 96, 98, 100 and a cosine-similarity loss), written here.
"""
from __future__ import annotations

from pathlib import Path

import pytest
import torch

from tests.lowering.helpers import flat, load_module
from workbench.lowering import lower_spec
from workbench.lowering import sm90_check as sc
from workbench.tolerances import tolerance_for

SPEC = '''import torch
import torch.nn as nn
import torch.nn.functional as F

DT = torch.{dt}


class Model(nn.Module):
    def __init__(self):
        super().__init__()
{init}

    def forward(self, {args}):
        return {expr}


def get_inputs():
    return [{inputs}]


def get_init_inputs():
    return []
'''

# name -> (init lines, forward args, forward expression, inputs with {shape}, launches with the split forced)
CASES = {
    "layernorm": ("        self.ln = nn.LayerNorm(({c}, {h}, {w}), dtype=DT)", "x", "self.ln(x)",
                  "torch.randn({b}, {c}, {h}, {w}, dtype=DT) * 2.0 + 0.5", 2),
    "groupnorm": ("        self.gn = nn.GroupNorm(3, {c6}, dtype=DT)", "x", "self.gn(x)",
                  "torch.randn({b}, {c6}, {h}, {w}, dtype=DT) * 2.0 + 0.5", 2),
    "instancenorm": ("        self.inorm = nn.InstanceNorm2d({c}, dtype=DT)", "x", "self.inorm(x)",
                     "torch.randn({b}, {c}, {h}, {w}, dtype=DT) * 2.0 + 0.5", 2),
    "batchnorm": ("        self.bn = nn.BatchNorm2d({c}, dtype=DT)", "x", "self.bn(x)",
                  "torch.randn({b}, {c}, {h}, {w}, dtype=DT) * 2.0 + 0.5", 2),
    "hinge": ("        pass", "predictions, targets", "torch.mean(torch.clamp(1 - predictions * targets, min=0))",
              "torch.randn({b}, {n}, dtype=DT), torch.randint(0, 2, ({n},)).to(DT) * 2 - 1", 1),
    "mse": ("        pass", "predictions, targets", "torch.mean((predictions - targets) ** 2)",
            "torch.randn({b}, {n}, dtype=DT), torch.randn({b}, {n}, dtype=DT)", 1),
    "huber": ("        pass", "predictions, targets", "F.smooth_l1_loss(predictions, targets)",
              "torch.randn({b}, {n}, dtype=DT), torch.randn({b}, {n}, dtype=DT)", 1),
    "kldiv": ("        pass", "predictions, targets",
              "F.kl_div(torch.log(predictions), targets, reduction='batchmean')",
              "torch.rand({b}, {n}, dtype=DT).softmax(-1), torch.rand({b}, {n}, dtype=DT).softmax(-1)", 1),
    "cosine": ("        pass", "predictions, targets",
               "torch.mean(1 - F.cosine_similarity(predictions, targets, dim=1))",
               "torch.randn({b}, {n}, dtype=DT), torch.randn({b}, {n}, dtype=DT)", 5),
    # ||a - p|| and ||a - n|| over the rows: one kernel reading the anchor once (norm_stats.pair_row_reductions)
    "triplet": ("        self.loss = nn.TripletMarginLoss(margin=1.0)", "a, p, n", "self.loss(a, p, n)",
                "torch.randn({b}, {n}, dtype=DT), torch.randn({b}, {n}, dtype=DT), torch.randn({b}, {n}, dtype=DT)",
                2),
    # the picked log-probabilities are gathered from x (softmax_match.fold_gathered_log_softmax): no [B, C] write;
    # the row max and the sum of exp(x - max) are one online pass (softmax_match.pair_logsumexp)
    "cross_entropy": ("        pass", "predictions, targets", "F.cross_entropy(predictions, targets)",
                      "torch.randn({b}, {n}, dtype=DT) * 3.0, torch.randint(0, {n}, ({b},))", 2),
    # the target broadcast along the rows' other dim and a row reduction over a middle dim (K2 rows for pins)
    "row_sq_dev": ("        pass", "x, y", "((x - y) ** 2).sum(dim=1)",
                   "torch.randn({b}, {n}, 3, dtype=DT), torch.randn({b}, 1, 3, dtype=DT)", 2),
}
SHAPES = ({"b": 3, "c": 5, "c6": 6, "h": 13, "w": 11, "n": 127},
          {"b": 2, "c": 3, "c6": 6, "h": 7, "w": 5, "n": 123})
DTYPES = (("float32",), ("float16",), ("bfloat16",))


def _spec(tmp: Path, case: str, dt: str, shape: dict) -> Path:
    init, args, expr, inputs, _ = CASES[case]
    tag = f"{case}_{dt}_{shape['b']}_{shape['n']}"
    spec = tmp / f"nl_{tag}.py"
    spec.write_text(SPEC.format(dt=dt, init=init.format(**shape), args=args, expr=expr,
                                inputs=inputs.format(**shape)))
    return spec


def _run(tmp: Path, case: str, dt: str, shape: dict, block_n: int = 16):  # noqa: ANN202
    spec = _spec(tmp, case, dt, shape)
    res = lower_spec(spec)
    assert res.source is not None, res.diagnosis
    ref = load_module(spec, f"ref_{spec.stem}")
    path = tmp / f"cand_{spec.stem}.py"
    path.write_text(res.source)
    cand = load_module(path, f"cand_{spec.stem}_{block_n}")
    cand.RED_BLOCK_N, cand.RED_BLOCK_M = block_n, 1
    torch.manual_seed(0)
    model = ref.Model()
    torch.manual_seed(0)
    model_new = cand.ModelNew()
    torch.manual_seed(1)
    inputs = ref.get_inputs()
    with torch.no_grad():
        want = flat(model(*[x.clone() for x in inputs]))
        with sc.recording() as launches:
            got = flat(model_new(*inputs))
    return res.source, launches, want, got


def _close(want: list[torch.Tensor], got: list[torch.Tensor]) -> None:
    for i, (w, g) in enumerate(zip(want, got)):
        assert g.shape == w.shape and g.dtype == w.dtype, f"output {i}: {g.shape} {g.dtype} vs {w.shape} {w.dtype}"
        atol, rtol = tolerance_for(w.dtype)
        torch.testing.assert_close(g.float(), w.float(), atol=atol, rtol=rtol, msg=lambda m, i=i: f"{i}: {m}")


@pytest.mark.parametrize("case", sorted(CASES))
def test_launch_count_with_the_split(tmp_path: Path, case: str) -> None:
    """fp32, the split forced: a norm is its statistics (partials; the last program of each row block combines
    them and runs rsqrt and the mean) and its apply; a loss one kernel (its partials and their combine)."""
    _, launches, want, got = _run(tmp_path, case, "float32", SHAPES[0])
    assert len(launches) <= CASES[case][4], [(ln.kernel, ln.constexprs.get("PHASE")) for ln in launches]
    if case not in ("cosine", "row_sq_dev", "instancenorm", "cross_entropy", "triplet"):  # rows of 127 or 143: no split
        assert any(ln.constexprs.get("PHASE") == 1 for ln in launches), "the split did not happen"
    _close(want, got)


@pytest.mark.parametrize(("dt",), DTYPES)
@pytest.mark.parametrize("case", sorted(CASES))
def test_matches_torch_on_odd_shapes(tmp_path: Path, case: str, dt: str) -> None:
    for shape in SHAPES:
        for block_n in (16, 256):  # split and whole rows
            _, _, want, got = _run(tmp_path, case, dt, shape, block_n)
            _close(want, got)


def test_welford_var_is_exact_where_a_sum_of_squares_cancels(tmp_path: Path) -> None:
    """Rows of mean 1e4 and std 1: E[x^2] - E[x]^2 in fp32 loses every digit; the one-pass Welford var does not."""
    spec = tmp_path / "nl_var_offset.py"
    spec.write_text(SPEC.format(dt="float32", init="        pass", args="x", expr="x.var(dim=1)",
                                inputs="torch.randn(4, 3001, dtype=DT) + 1e4"))
    res = lower_spec(spec)
    assert res.source is not None, res.diagnosis
    path = tmp_path / "cand_nl_var_offset.py"
    path.write_text(res.source)
    cand = load_module(path, "cand_nl_var_offset")
    cand.RED_BLOCK_N, cand.RED_BLOCK_M = 16, 1
    torch.manual_seed(1)
    x = torch.randn(4, 3001) + 1e4
    with torch.no_grad():
        got = cand.ModelNew()(x)
    want = x.double().var(dim=1).float()
    torch.testing.assert_close(got, want, atol=1e-3, rtol=1e-3)


@pytest.mark.parametrize("case", ["layernorm", "groupnorm", "batchnorm", "hinge", "mse", "row_sq_dev"])
def test_compiles_for_sm90_without_spills(tmp_path: Path, case: str) -> None:
    """Both phases of each draft at its default config (RED_BLOCK_N forced down only to split): no failure,
    no spill."""
    source, launches, _, _ = _run(tmp_path, case, "float32", SHAPES[0])
    fits = sc.compile_launches(source, launches)
    bad = [f.why() for f in fits if not f.ok]
    assert not bad, bad
    assert all(f.spills == 0 for f in fits), [(f.kernel, f.spills) for f in fits]


def test_cross_entropy_writes_no_log_softmax(tmp_path: Path) -> None:
    source, _, _, _ = _run(tmp_path, "cross_entropy", "float32", SHAPES[0])
    assert "softmax_kernel" not in source


def test_runtime_views_merge_dims_every_tensor_allows() -> None:
    """`_coalesce` (pointwise kernels) and `_red_views` (a reduction's prologue inputs) against plain indexing."""
    from workbench.lowering.codegen import RUNTIME_HELPERS

    ns: dict = {}
    exec(RUNTIME_HELPERS, ns)  # noqa: S102 - the candidate's own runtime helpers
    x = torch.randn(4, 6, 5, 7)
    w = torch.randn(6, 5, 7).expand(4, 6, 5, 7)
    mu = torch.randn(4, 1, 1, 1).expand(4, 6, 5, 7)
    sizes, strides = ns["_coalesce"]([4, 6, 5, 7], x, w, mu)
    assert sizes == [4, 210, 1, 1] and strides == [(210, 1, 0, 0), (0, 1, 0, 0), (1, 0, 0, 0)]
    t = torch.randn(7).expand(4, 6, 5, 7)
    sizes, strides = ns["_coalesce"]([4, 6, 5, 7], x, t)
    assert sizes == [120, 7, 1, 1] and strides == [(7, 1, 0, 0), (0, 1, 0, 0)]
    # a full reduction of x (contiguous) and a target broadcast along rows: one row, columns in two groups
    m, n, n2, x2, m2, k2, views = ns["_red_views"](0, x.reshape(24, 35), torch.randn(35).expand(24, 35))
    assert (m, n, n2, x2, m2, k2) == (1, 840, 35, True, 1, False)
    assert [v[1:] for v in views] == [(0, 35, 1, 0), (0, 0, 1, 0)]  # no kept dims: row stride 0 (aligned)
    # kept dims in three groups: copies, [M, N] each
    y = torch.randn(3, 4, 5, 6).permute(0, 2, 1, 3)
    m, n, n2, x2, m2, k2, views = ns["_red_views"](3, y, y)
    assert (m, n, x2, k2) == (60, 6, False, False) and views[0][0].shape == (60, 6)


@pytest.mark.parametrize("block_n", (16, 256))
def test_cross_entropy_edge_values(tmp_path: Path, block_n: int) -> None:
    """The online max and sum give eager's nan where x holds a nan, an +inf or a row of -inf, and eager's value
    with partial -inf rows, split or not (a row of 20000 splits at RED_BLOCK_N 16)."""
    import torch.nn.functional as F

    spec = _spec(tmp_path, "cross_entropy", "float32", SHAPES[0])
    res = lower_spec(spec)
    assert res.source is not None, res.diagnosis
    path = tmp_path / f"cand_ce_edge_{block_n}.py"
    path.write_text(res.source)
    cand = load_module(path, f"cand_ce_edge_{block_n}")
    cand.RED_BLOCK_N, cand.RED_BLOCK_M = block_n, 1
    torch.manual_seed(0)
    p, t = torch.randn(7, 133) * 5, torch.randint(0, 133, (7,))
    cases = [p.clone() for _ in range(5)]
    cases[1][2, 5] = float("nan")
    cases[2][3, :] = float("-inf")
    cases[3][1, 7] = float("inf")
    cases[4][1, :60] = float("-inf")
    with torch.no_grad():
        for i, q in enumerate(cases):
            torch.testing.assert_close(cand.ModelNew()(q, t), F.cross_entropy(q, t), equal_nan=True,
                                       msg=lambda m, i=i: f"case {i}: {m}")
        long_p, long_t = torch.randn(2, 20000) * 3, torch.randint(0, 20000, (2,))
        with sc.recording() as launches:
            got = cand.ModelNew()(long_p, long_t)
        torch.testing.assert_close(got, F.cross_entropy(long_p, long_t))
    assert not any(ln.kernel.startswith("reduce_amax") for ln in launches), "the max is the sum's sibling"
