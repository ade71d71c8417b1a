"""cat (and the stacks that decompose to it), constant_pad_nd and constant graph outputs as Triton kernels,
against PyTorch on odd shapes in every dtype: negative dims, empty and legacy (0,) inputs, non-contiguous
inputs, negative pads (crops), a mixed-dtype cat, isreal/full_like/fill outputs. Each case also runs under
the harness's op recorder: the forward must launch kernels and leave cat, pad and the fills to them (torch
doing them is what the harness rejects as no_triton_kernel)."""
from __future__ import annotations

from pathlib import Path

import pytest
import torch

from tests.lowering.helpers import load_module
from tests.lowering.test_primitives import FLOATS, R, _family
from workbench.harness import opcheck

# integer-valued, so bool and int dtypes get zeros and ones as well as other values
V = "(torch.randn({}) * 3).round().to(DT)"
TORCH_DOES_IT = {"cat", "stack", "constant_pad_nd", "pad", "full", "full_like", "fill", "fill_", "zeros",
                 "zeros_like", "ones", "ones_like", "scalar_tensor", "copy_"}


def _kernels_do_it(tmp_path: Path, family: str, dt: str) -> None:
    """The candidate `_family` wrote launches kernels and dispatches none of the copy/fill ops itself."""
    spec = tmp_path / f"{family}_{dt}.py"
    ref = load_module(spec, f"ops_ref_{spec.stem}")
    cand = load_module(tmp_path / f"cand_{spec.stem}.py", f"ops_cand_{spec.stem}")
    model, inputs = cand.ModelNew(*ref.get_init_inputs()), ref.get_inputs()
    opcheck.install_triton_wrappers()
    opcheck.STATE.launches = 0
    rec = opcheck.OpRecorder()
    with torch.no_grad(), rec:
        model(*inputs)
    assert opcheck.STATE.launches > 0
    assert not TORCH_DOES_IT & set(rec.ops), dict(rec.ops)


CATS = {
    "cat_dims": ("a, b, c", "torch.cat([a, b, c], dim=1), torch.cat([a, a], -1), torch.cat([c, a, b], -2)",
                 f"{V.format('3, 5, 7')}, {V.format('3, 2, 7')}, {V.format('3, 1, 7')}"),
    # a transposed input, an empty slice (launches nothing) and legacy 1-d (0,) inputs (skipped at any rank)
    "cat_views_empty": ("a, e", "torch.cat([a.transpose(0, 1), a[:2].transpose(0, 1)], 1), "
                        "torch.cat([e, a, a[:, :0], e], 1), torch.cat([e, e], 0), torch.cat([a[:, 3:]], 0)",
                        f"{V.format('4, 9')}, {V.format('0')}"),
    "stacks": ("a, b", "torch.stack([a, b], -1), torch.hstack([a, b]), torch.vstack([a, b]), torch.dstack([a, b]), "
               "torch.column_stack([a[0], b[1]]), torch.stack([a[0, 0], b[0, 0]])",
               f"{V.format('3, 5')}, {V.format('3, 5')}"),
}
PADS = {
    "pad_value": ("x", "nn.functional.pad(x, (1, 2), value=1.5), nn.functional.pad(x, (0, 3, 2, 0, 1, 1), value=-3.5)",
                  V.format("3, 5, 7")),
    # negative pads crop, and a transposed source is read through its strides
    "pad_crop": ("x", "nn.functional.pad(x, (2, -1, -2, 1)), nn.functional.pad(x.transpose(1, 2), (-3, -2), value=2.0)",
                 V.format("3, 5, 7")),
    # an empty source (every element is the value) and an output cropped to nothing
    "pad_empty": ("x", "nn.functional.pad(x[:, :0], (0, 0, 1, 1), value=4.0), nn.functional.pad(x, (-7, 0)), "
                  "nn.functional.pad(x[0, 0], (3, 1))", V.format("3, 5, 7")),
}
CONSTANTS = {
    "constants": ("x", "torch.full_like(x, 2.5), torch.zeros_like(x.t()), torch.ones_like(x[:0]), torch.fill(x, 3.0), "
                  "torch.full((x.shape[0], 2), -1.0, dtype=DT), torch.scalar_tensor(4.0, dtype=DT)",
                  V.format("5, 7")),
}


@pytest.mark.parametrize("dt", (*FLOATS, "int32", "bool"))
def test_cat(tmp_path: Path, dt: str) -> None:
    _family(tmp_path, "cats", dt, CATS)
    _kernels_do_it(tmp_path, "cats", dt)


@pytest.mark.parametrize("dt", (*FLOATS, "int32"))
def test_constant_pad(tmp_path: Path, dt: str) -> None:
    _family(tmp_path, "pads", dt, PADS)
    _kernels_do_it(tmp_path, "pads", dt)


@pytest.mark.parametrize("dt", (*FLOATS, "int64", "bool"))
def test_constant_outputs(tmp_path: Path, dt: str) -> None:
    _family(tmp_path, "constants", dt, CONSTANTS)
    _kernels_do_it(tmp_path, "constants", dt)


def test_mixed_cat_and_isreal(tmp_path: Path) -> None:
    # dtype promotion across inputs: the output dtype is the traced one, each input cast on store
    cases = {"mixed": ("a, i, b", "torch.cat([a, i, b.to(DT)], 0), torch.cat([i, b[:3]], 1), torch.cat([b, b], 0), "
                       "torch.isreal(a), torch.cat([a.half(), i[:2]], -1)",
                       f"{R.format('2, 5')}, torch.randint(-9, 10, (3, 5), dtype=torch.int32), "
                       "torch.rand(4, 5) > 0.5")}
    _family(tmp_path, "mixed", "float32", cases)
    _kernels_do_it(tmp_path, "mixed", "float32")
