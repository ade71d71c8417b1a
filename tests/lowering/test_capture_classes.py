"""Capture classes (workbench/lowering/capture.py): loss decompositions that take only a string `reduction` get
ATen's int, and a forward that branches on tensor values is traced on its real inputs, specialized to the
branches they take; `empty_permuted` allocations (cosine_embedding_loss) are glue, `_trilinear` (bilinear) is
decomposed; each checked against PyTorch in the dtypes the ops take."""
from __future__ import annotations

from pathlib import Path

import pytest

from tests.lowering.test_primitives import FLOATS, _family
from workbench.lowering.capture import _int_reduction, _takes_str_reduction, decomposition_table


def test_str_reduction_refs_take_ints() -> None:
    import torch

    aten = torch.ops.aten
    table = decomposition_table()
    a, b, t = torch.randn(6), torch.randn(6), torch.randn(6).sign()
    for red, name in enumerate(("none", "mean", "sum")):  # at::Reduction's order
        got = table[aten.margin_ranking_loss.default](a, b, t, 0.2, red)
        torch.testing.assert_close(got, torch.nn.functional.margin_ranking_loss(a, b, t, 0.2, reduction=name))
        got = table[aten.hinge_embedding_loss.default](a, t, 0.7, red)
        torch.testing.assert_close(got, torch.nn.functional.hinge_embedding_loss(a, t, 0.7, reduction=name))
    assert _takes_str_reduction(_int_reduction(lambda x, reduction="mean": x).__wrapped__) is False


@pytest.mark.parametrize("dt", FLOATS)
def test_int_reduction_losses(tmp_path: Path, dt: str) -> None:
    mrl, hel = "nn.functional.margin_ranking_loss", "nn.functional.hinge_embedding_loss"
    _family(tmp_path, "int_reduction", dt, {
        "margin": ("a, b, t", f"{mrl}(a, b, t), {mrl}(a, b, t, margin=0.3, reduction='sum'), "
                   f"{mrl}(a, b, t, reduction='none')",
                   "torch.randn(5, 7).to(DT), torch.randn(5, 7).to(DT), torch.randn(5, 7).sign().to(DT)"),
        "hinge": ("x, y", f"{hel}(x, y), {hel}(x, y, margin=0.5, reduction='none'), {hel}(x, y, reduction='sum')",
                  "torch.randn(3, 11).to(DT), (torch.randn(3, 11).sign()).to(DT)")})


@pytest.mark.parametrize("dt", FLOATS)
def test_value_branches_traced_on_real_inputs(tmp_path: Path, dt: str) -> None:
    """gaussian_nll_loss raises on a negative variance (`if torch.any(var < 0)`), take's decomposition guards on
    its index values: both failed as data-dependent under fake tensors."""
    gn = "nn.functional.gaussian_nll_loss"
    _family(tmp_path, "value_branches", dt, {
        "gnll": ("x, y, v", f"{gn}(x, y, v), {gn}(x, y, v[:, :1], full=True, reduction='sum')",
                 "torch.randn(4, 9).to(DT), torch.randn(4, 9).to(DT), (torch.rand(4, 9) + 0.1).to(DT)"),
        "take": ("x, i", "torch.take(x, i)", "torch.randn(5, 7).to(DT), torch.randint(-35, 35, (3, 4))")})


@pytest.mark.parametrize("dt", FLOATS)
def test_cosine_embedding_loss_empty_permuted(tmp_path: Path, dt: str) -> None:
    """cosine_embedding_loss's graph allocates with `empty_permuted` (glue: storage in the layout's order)."""
    cel = "nn.functional.cosine_embedding_loss"
    _family(tmp_path, "cosine_embedding", dt, {
        "cel": ("a, b, y", f"{cel}(a, b, y), {cel}(a, b, y, margin=0.3, reduction='none'), "
                f"{cel}(a[0], b[0], y[:1].squeeze(0), reduction='sum')",
                "torch.randn(5, 7).to(DT), torch.randn(5, 7).to(DT), torch.randn(5).sign().to(DT)")})


@pytest.mark.parametrize("dt", FLOATS)
def test_bilinear_trilinear_decomposed(tmp_path: Path, dt: str) -> None:
    """F.bilinear's `_trilinear` decomposed (capture.py) into broadcast products summed over the two input dims."""
    bl = "nn.functional.bilinear"
    _family(tmp_path, "bilinear", dt, {
        "bl": ("a, b, w, c", f"{bl}(a, b, w, c), {bl}(a[0], b[0], w), {bl}(a.unsqueeze(0), b.unsqueeze(0), w, c)",
               "torch.randn(5, 3).to(DT), torch.randn(5, 7).to(DT), (torch.randn(4, 3, 7) / 3).to(DT), "
               "torch.randn(4).to(DT)")})
