"""`workbench lower` and the one-line diagnoses of specs that cannot be lowered."""
from __future__ import annotations

from pathlib import Path

import pytest

from workbench.cli import main
from workbench.lowering import lower_spec

SPECS = Path(__file__).parent / "specs"


@pytest.mark.parametrize("name, expected", [
    ("bad_embedding_bag", "unsupported: aten._embedding_bag_forward_only.default"),
    ("bad_eig", "unsupported: aten.linalg_eig.default"),
    ("bad_fft", "unsupported: aten._fft_r2c.default"),
    ("bad_branch", "capture failed: data-dependent"),
])
def test_diagnosis_is_one_line(name: str, expected: str) -> None:
    res = lower_spec(SPECS / f"{name}.py")
    assert res.source is None
    assert res.diagnosis.startswith(expected), res.diagnosis
    assert "\n" not in res.diagnosis


def test_an_inverse_through_an_effect_token_is_lowered_and_right(tmp_path: Path) -> None:
    from tests.lowering.helpers import check_candidate

    spec = SPECS / "matrix_power_inverse.py"
    res = lower_spec(spec)
    assert res.source is not None, res.diagnosis
    check_candidate(spec, res.source, tmp_path)


def test_bad_spec_file(tmp_path: Path) -> None:
    p = tmp_path / "broken.py"
    p.write_text("def oops(:\n")
    res = lower_spec(p)
    assert res.source is None and res.diagnosis.startswith("bad spec:")


def test_cli_writes_candidate_and_exit_codes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "cand.py"
    assert main(["lower", str(SPECS / "mlp_softmax.py"), "--out", str(out), "--set", "batch=5"]) == 0
    text = out.read_text()
    assert "class ModelNew(nn.Module):" in text and "TUNABLES = {" in text
    assert main(["lower", str(SPECS / "bad_embedding_bag.py")]) == 1
    assert "unsupported: aten._embedding_bag_forward_only.default" in capsys.readouterr().err
    assert main(["lower", str(tmp_path / "missing.py")]) == 2
    assert main(["lower", str(SPECS / "mlp_softmax.py"), "--set", "nope=3"]) == 2
