"""logcumsumexp (workbench/lowering/logcumsumexp.py) against PyTorch in every float dtype: each dim, a 0-d and
an empty input, rows longer than one chunk, infinities (-inf runs, +inf), a non-contiguous input; sm_90 compile."""
from __future__ import annotations

from pathlib import Path

import pytest
import torch

from tests.lowering import test_primitives
from tests.lowering.helpers import load_module
from tests.lowering.test_primitives import FLOATS, SPEC, R
from workbench.lowering import lower_spec
from workbench.lowering import sm90_check as sc

CASES = {"lse": ("x, y, z", "torch.logcumsumexp(x, 0), torch.logcumsumexp(x, -1), "
                 "torch.logcumsumexp(x.transpose(0, 2), 1), torch.logcumsumexp(y, 0), "
                 "torch.logcumsumexp(x[0, 0, 0], 0), torch.logcumsumexp(x[:, :0], 1), "
                 "torch.logcumsumexp(z, 1)",
                 f"{R.format('3, 5, 7')} * 4, {R.format('300')} * 3, torch.tensor([[-float('inf'), -float('inf'), "
                 "1.0, float('inf'), 2.0], [0.5, -float('inf'), -2.0, 3.0, -float('inf')]]).to(DT)")}


@pytest.mark.parametrize("dt", FLOATS)
def test_logcumsumexp(tmp_path: Path, dt: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Chunks of 2 x 32 here (the interpreter runs the scan's combine in Python: 4 x 256 took a minute a
    dtype), so the 300-long row still crosses chunks."""
    def small(spec):  # noqa: ANN001, ANN202 - lower_spec with smaller LSE blocks in the candidate
        res = lower_spec(spec)
        assert res.source is not None, res.diagnosis
        res.source = res.source.replace("LSE_BLOCK_M = 4", "LSE_BLOCK_M = 2").replace("LSE_BLOCK_N = 256",
                                                                                      "LSE_BLOCK_N = 32")
        assert "LSE_BLOCK_N = 32" in res.source
        return res
    monkeypatch.setattr(test_primitives, "lower_spec", small)
    test_primitives._family(tmp_path, "logcumsumexp", dt, CASES)


def test_logcumsumexp_compiles_for_sm90(tmp_path: Path) -> None:
    spec = tmp_path / "lse_sm90.py"
    spec.write_text(SPEC.format(dt="bfloat16", init="        pass", args="x", expr="torch.logcumsumexp(x, 1)",
                                inputs=R.format("3, 300")))
    res = lower_spec(spec)
    assert res.source is not None, res.diagnosis
    path = tmp_path / "cand_lse_sm90.py"
    path.write_text(res.source)
    cand, ref = load_module(path, "cand_lse_sm90"), load_module(spec, "ref_lse_sm90")
    torch.manual_seed(0)
    launches = sc.record_launches(cand.ModelNew(), ref.get_inputs())
    bad = [f.why() for f in sc.compile_launches(res.source, launches) if not f.ok]
    assert launches and not bad, bad
