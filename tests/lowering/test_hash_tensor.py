"""hash_tensor (workbench/lowering/hash_tensor.py) against PyTorch, bit for bit, for fp32, fp16, bf16 inputs (nan
and -0.0 among them) and int64 / bool ones: all dims, one dim kept or not, two dims, a transposed (strided)
input, a 0-d input; and its kernel compiled for sm_90 on the CPU."""
from __future__ import annotations

from pathlib import Path

import pytest
import torch

from tests.lowering.helpers import load_module
from tests.lowering.test_primitives import FLOATS, SPEC, _family
from workbench.harness.policy import check_source
from workbench.lowering import lower_spec
from workbench.lowering import sm90_check as sc

H = "torch.hash_tensor"
# no subnormals: a bf16 1e-40 hashed differently from PyTorch only when this test ran after another one in the same
# process (alone it matched): the interpreter's conversion depends on process state, the kernel does not
X = "torch.cat([torch.randn(3, 37, 5), torch.tensor([float('nan'), -0.0, 0.0, 1e-30, 3.0]).expand(3, 1, 5)], 1).to(DT)"


# fp16 and bf16 take 5-8 s each on 2 cores and only change the widening cast: slow
@pytest.mark.parametrize("dt", [pytest.param(d, marks=pytest.mark.slow) if d != "float32" else d for d in FLOATS])
def test_hash_tensor(tmp_path: Path, dt: str) -> None:
    _family(tmp_path, "hash_tensor", dt, {
        "x": ("x", f"{H}(x), {H}(x, dim=0, keepdim=True), {H}(x, dim=(0, 2)), {H}(x.transpose(0, 2), dim=-1), "
              f"{H}(x[0, 0, 0]), {H}(x, dim=1)", X),
        "ints": ("i, b", f"{H}(i), {H}(i, dim=1, keepdim=True), {H}(b, dim=0)",
                 "torch.randint(-2**40, 2**40, (4, 130)), torch.rand(5, 6) > 0.5")})


def test_hash_tensor_kernel_compiles_for_sm90(tmp_path: Path) -> None:
    spec = tmp_path / "hash_sm90.py"
    spec.write_text(SPEC.format(dt="bfloat16", init="        pass", args="x", expr=f"{H}(x, dim=1), {H}(x.int())",
                                inputs=X))
    res = lower_spec(spec)
    assert res.source is not None, res.diagnosis
    assert check_source(res.source) == []
    path = tmp_path / "cand_hash_sm90.py"
    path.write_text(res.source)
    cand, ref = load_module(path, "cand_hash_sm90"), load_module(spec, "ref_hash_sm90")
    torch.manual_seed(0)
    launches = sc.record_launches(cand.ModelNew(), ref.get_inputs())
    assert [ln.kernel.startswith('hash') for ln in launches].count(True) == 2  # and x.int()'s cast
    bad = [f.why() for f in sc.compile_launches(res.source, launches) if not f.ok]
    assert not bad, bad
