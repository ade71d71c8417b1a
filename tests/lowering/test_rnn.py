"""LSTM and GRU kept whole (aten.lstm.input / aten.gru.input) and lowered to a projection GEMM and a
recurrence kernel per layer and direction (workbench/lowering/rnn.py). Before, they were decomposed into
one cell per step: KernelBench's LSTM/GRUHidden lowerings ran past 150 s on the 2-core CPU."""
from __future__ import annotations

import time
from pathlib import Path

import pytest

from tests.lowering.helpers import check_candidate
from workbench.lowering import lower_spec

SPECS = Path(__file__).parent / "specs"
KB3 = Path(__file__).resolve().parents[3] / "shared" / "kernelbench" / "level3"


@pytest.mark.parametrize("stem", ["rnn_lstm", "rnn_gru"])
def test_rnn_matches_torch(stem: str, tmp_path: Path) -> None:
    res = lower_spec(SPECS / f"{stem}.py")
    assert res.source is not None, res.diagnosis
    assert res.ops[0] in ("wb_lowering.lstm.default", "wb_lowering.gru.default")
    assert res.source.count("@triton.jit") <= 4   # proj + recurrence (+ the fc's matmul, the tanh helper)
    check_candidate(SPECS / f"{stem}.py", res.source, tmp_path, seed=3)


@pytest.mark.skipif(not KB3.is_dir(), reason="KernelBench level 3 is not beside this checkout")
def test_published_size_lstm_lowers_within_a_minute() -> None:
    t0 = time.monotonic()
    res = lower_spec(KB3 / "36_LSTMHn.py")
    elapsed = time.monotonic() - t0
    assert res.source is not None, res.diagnosis
    assert elapsed < 60, f"lowering 36_LSTMHn took {elapsed:.0f} s"
