"""LSTM and GRU kept whole (aten.lstm.input / aten.gru.input) and lowered to a projection GEMM and a
recurrence per layer and direction (workbench/lowering/rnn.py): a launch per step by default, or one
persistent program per batch block walking the steps (RNN_PERSISTENT=1). Before, they were decomposed into
one cell per step: KernelBench's LSTM/GRUHidden lowerings ran past 150 s on the 2-core CPU."""
from __future__ import annotations

from pathlib import Path

import pytest

from tests.lowering.helpers import check_candidate, lowers_within_a_minute
from workbench.lowering import lower_spec

SPECS = Path(__file__).parent / "specs"
KB3 = Path(__file__).resolve().parents[3] / "shared" / "kernelbench" / "level3"


@pytest.mark.parametrize("persistent", [0, 1], ids=["step_launches", "persistent"])
@pytest.mark.parametrize("stem", ["rnn_lstm", "rnn_gru"])
def test_rnn_matches_torch(stem: str, persistent: int, tmp_path: Path) -> None:
    res = lower_spec(SPECS / f"{stem}.py")
    assert res.source is not None, res.diagnosis
    assert res.ops[0] in ("wb_lowering.lstm.default", "wb_lowering.gru.default")
    # proj + the recurrence in both forms (+ the fc's matmul, the tanh helper)
    assert res.source.count("@triton.jit") <= 5
    assert "\nRNN_PERSISTENT = 0\n" in res.source  # per-step launches by default (batch 10: one SM otherwise)
    source = res.source.replace("\nRNN_PERSISTENT = 0\n", f"\nRNN_PERSISTENT = {persistent}\n")
    check_candidate(SPECS / f"{stem}.py", source, tmp_path, seed=3)


@pytest.mark.skipif(not KB3.is_dir(), reason="KernelBench level 3 is not beside this checkout")
def test_published_size_lstm_lowers_within_a_minute() -> None:
    lowers_within_a_minute(KB3 / "36_LSTMHn.py")
