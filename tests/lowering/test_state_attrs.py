"""Plain tensor attributes made in `__init__` (KernelBench 33_VanillaRNN's `self.hidden = torch.randn(...)`),
read and reassigned by the forward. Capture traces them as buffers: as plain attributes they stayed fake
tensors of our mode beside export's, and export failed ("fake mode ... doesn't match mode ...").
ModelNew makes them non-persistent buffers after its copied __init__: same values under one seed, moved by
`.to(device)`, out of the state dict. The candidate drops the reassignment, so one call from a fresh
state is what compares."""
from __future__ import annotations

from pathlib import Path

import pytest

from tests.lowering.helpers import check_candidate, load_module, lowers_within_a_minute
from workbench.lowering import lower_spec

SPEC = Path(__file__).parent / "specs" / "state_attr_rnn.py"
KB3 = Path(__file__).resolve().parents[3] / "shared" / "kernelbench" / "level3"


def test_state_attribute_spec_matches_torch(tmp_path: Path) -> None:
    res = lower_spec(SPEC)
    assert res.source is not None, res.diagnosis
    check_candidate(SPEC, res.source, tmp_path, seed=2)


def test_state_attributes_become_non_persistent_buffers(tmp_path: Path) -> None:
    res = lower_spec(SPEC)
    assert res.source is not None, res.diagnosis
    path = tmp_path / "cand_state.py"
    path.write_text(res.source)
    ref = load_module(SPEC, "ref_state_attrs")
    model_new = load_module(path, "cand_state_attrs").ModelNew(*ref.get_init_inputs())
    assert {"hidden", "cell.shift"} <= dict(model_new.named_buffers()).keys()
    assert "hidden" not in model_new.state_dict() and "cell.shift" not in model_new.state_dict()


@pytest.mark.skipif(not KB3.is_dir(), reason="KernelBench level 3 is not beside this checkout")
def test_published_size_vanilla_rnn_lowers_within_a_minute() -> None:
    lowers_within_a_minute(KB3 / "33_VanillaRNN.py")
