"""lower_spec end to end on a small MLP + softmax + reduction spec: in-process and determinism."""
from __future__ import annotations

from pathlib import Path

from tests.lowering.helpers import check_candidate
from workbench.harness.policy import check_source
from workbench.lowering import lower_spec

SPECS = Path(__file__).parent / "specs"


def test_mlp_softmax_lowers_and_matches(tmp_path: Path) -> None:
    spec = SPECS / "mlp_softmax.py"
    res = lower_spec(spec)
    assert res.diagnosis == "" and res.source is not None
    assert "aten.mm.default" in res.ops and "aten.amax.default" in res.ops
    assert check_source(res.source) == []
    assert "import workbench" not in res.source and "from workbench" not in res.source
    check_candidate(spec, res.source, tmp_path)


def test_lowering_is_byte_identical() -> None:
    spec = SPECS / "mlp_softmax.py"
    assert lower_spec(spec).source == lower_spec(spec).source


def test_varargs_forward_and_empty_tensor(tmp_path: Path) -> None:
    """The ATen suite's specs take `*tensors` and OpInfo samples include empty tensors."""
    spec = SPECS / "aten_varargs.py"
    res = lower_spec(spec)
    assert res.source is not None, res.diagnosis
    assert "def forward(self, arg0, arg1, arg2):" in res.source
    check_candidate(spec, res.source, tmp_path)
