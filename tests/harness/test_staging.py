"""Staging the timed rounds' inputs: the flat round file, the candidate's reader, staging ahead without
showing a round early, the skipped second sizing round and the total staging budget."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import torch

from workbench.harness import plan as _plan
from workbench.harness import rounds as _rounds
from workbench.harness.stager import RoundStager

MB = 2**20


def _sets(seed: int) -> list[list[Any]]:
    g = torch.Generator().manual_seed(seed)
    return [[torch.randn(5, 7, generator=g), torch.randn(3, generator=g).to(torch.bfloat16),
             torch.randint(-9, 9, (4,), generator=g), torch.rand(6, generator=g) > 0.5,
             torch.tensor(float(seed)), torch.empty(0, 3), 0.5, 3, None]
            for _ in range(3)]


def test_raw_round_trip_and_buffers_reused_with_fresh_content(tmp_path: Path) -> None:
    reader = _plan.RawReader("cpu")
    ptrs = []
    for seed in (1, 2):
        sets = _sets(seed)
        assert _plan.raw_layout_ok(sets)
        _plan.write_raw(tmp_path / f"r{seed}.raw", sets)
        got = reader.read(tmp_path / f"r{seed}.raw")
        assert len(got) == len(sets)
        for a_set, b_set in zip(sets, got, strict=True):
            for a, b in zip(a_set, b_set, strict=True):
                if isinstance(a, torch.Tensor):
                    assert type(b) is torch.Tensor and b.dtype == a.dtype and b.shape == a.shape
                    assert torch.equal(a, b)
                else:
                    assert a == b
        ptrs.append([x.data_ptr() for s in got for x in s[:4]])
        # every set of one round has buffers of its own
        assert len(set(ptrs[-1])) == len(ptrs[-1])
    assert sorted(ptrs[0]) == sorted(ptrs[1])  # the second round refilled the first round's buffers


def test_raw_layout_refuses_what_it_cannot_represent(tmp_path: Path) -> None:
    x = torch.randn(4, 6)
    assert not _plan.raw_layout_ok([[x.t()]])             # strides
    assert not _plan.raw_layout_ok([[x[1:]]])             # a view into a larger storage
    assert not _plan.raw_layout_ok([[x, {"a": 1}]])       # not a JSON scalar
    assert not _plan.raw_layout_ok([[x, x[:2]]])            # two inputs sharing a storage
    assert _plan.raw_layout_ok([[x[:2]], [x[:2].clone()]])  # a prefix view is written as its own bytes
    assert not _plan.raw_layout_ok([[x.requires_grad_()]])
    (tmp_path / "bad.raw").write_bytes(b"PK\x03\x04" + b"\0" * 64)
    with pytest.raises(ValueError):
        _plan.RawReader("cpu").read(tmp_path / "bad.raw")
    sets = [[torch.randn(1000)]]
    _plan.write_raw(tmp_path / "t.raw", sets)
    data = (tmp_path / "t.raw").read_bytes()
    (tmp_path / "t.raw").write_bytes(data[:-100])
    with pytest.raises(ValueError, match="truncated"):
        _plan.RawReader("cpu").read(tmp_path / "t.raw")


def test_total_staging_budget_lowers_rounds_to_a_floor() -> None:
    set_b = 128 * MB  # vector_add at 16M: 2 float32 inputs
    free = _rounds.RoundPlan.for_device("cuda", set_b, 512 * MB)
    assert (free.rounds, free.r_max) == (6, 4) and free.timed_rounds(4, set_b) == 6
    plan = _rounds.RoundPlan.for_device("cuda", set_b, 512 * MB, 3072 * MB)
    n = plan.timed_rounds(4, set_b)  # after one sizing round of one set
    assert n == 4 and set_b + 4 * set_b * (n + 1) <= 3072 * MB  # the recorded round fits too
    assert plan.timed_rounds(1, set_b) == 6  # a slow kernel (R = 1) stages little: no cut
    assert plan.timed_rounds(4, 5 * set_b) == _rounds.MIN_TIMED_ROUNDS  # never below the floor
    small = _rounds.RoundPlan.for_device("cuda", MB, 512 * MB, 3072 * MB)
    assert small.timed_rounds(100, MB) == 6
    assert _rounds.RoundPlan.for_device("cpu", set_b, 512 * MB, 1024 * MB).timed_rounds(4, set_b) == 3


def test_drive_records_the_cut_in_its_summary() -> None:
    child = _FakeChild([])
    plan = _rounds.RoundPlan(rounds=6, target_s=1.0, r_max=4, set_bytes=128 * MB, total_bytes=3072 * MB)
    stats, saved, _ = _rounds.drive(child, plan, 1e18, lambda k, r: {"stage": k})  # type: ignore[arg-type]
    assert stats["rounds"] == 4 and stats["rounds_planned"] == 6 and stats["stage_total_mb"] == 3072
    assert stats["staged_mb"] == 128 + 4 * 128 * 5
    assert len({k for k, _ in saved}) == 1 + 5  # round 0, the 4 timed rounds and the recorded one


class _FakeChild:
    """The server's view of a child that answers every command at once; records the message order."""

    def __init__(self, log: list[str]) -> None:
        self.log = log
        self.queue: list[dict[str, Any]] = []

    def send(self, msg: dict[str, Any]) -> None:
        for key, reply in (("stage", "staged"), ("go", "done"), ("save", "saved")):
            if key in msg:
                self.log.append(f"{key} {msg[key]}")
                self.queue.append({reply: msg[key]})

    def recv(self, deadline: float, expect: str | None = None) -> dict[str, Any]:
        msg = self.queue.pop(0)
        assert expect is None or expect in msg
        return msg


def test_drive_stages_ahead_only_outside_the_timed_window_and_skips_a_useless_sizing_round() -> None:
    log: list[str] = []
    child = _FakeChild(log)
    plan = _rounds.RoundPlan(rounds=3, target_s=1.0, r_max=4)
    seen: list[tuple[int, int]] = []

    def stage(k: int, r: int) -> dict[str, Any]:
        seen.append((k, r))
        return {"stage": k}

    def ahead(k: int, r: int):
        log.append(f"ahead {k}")
        return lambda: log.append(f"ready {k}")

    stats, saved, viol = _rounds.drive(child, plan, 1e18, stage, ahead=ahead)  # type: ignore[arg-type]
    assert not viol and stats["rounds"] == 3
    # instant rounds: round 0 already asks for more than r_max, so round 1 (the second sizing) is skipped
    assert [k for k, _ in seen] == [0, 2, 3, 4, 5] and all(r == 4 for k, r in seen if k >= 2)
    for k in range(2, 5):
        i = log.index(f"stage {k}")
        assert log[i + 1:i + 3] == [f"ahead {k + 1}", f"ready {k + 1}"]  # staged ahead, settled before go
        assert log[i + 3] == f"go {k}"
    assert "ahead 6" not in log and "ahead 2" not in log


class _FakeRef:
    """The reference's side of `make_round`: writes the round file where the server says."""

    def __init__(self) -> None:
        self.queue: list[dict[str, Any]] = []

    def send(self, msg: dict[str, Any]) -> None:
        k = msg["make_round"]
        name = f"round_{k}.raw"
        _plan.write_raw(Path(msg["dir"]) / name, [[torch.full((4,), float(s))] for s in msg["seeds"]])
        self.queue.append({"made": k, "file": name})

    def recv(self, deadline: float, expect: str | None = None) -> dict[str, Any]:
        return self.queue.pop(0)


class _Seeds:
    def _seeds(self, kind: int, k: int, r: int) -> list[int]:
        return [kind * 1000 + k * 10 + i for i in range(r)]


def test_a_round_staged_ahead_is_not_in_the_stage_before_its_round(tmp_path: Path) -> None:
    stage, pending = tmp_path / "stage", tmp_path / "pending"
    stage.mkdir()
    pending.mkdir(mode=0o700)
    st = RoundStager(_Seeds(), _FakeRef(), stage, pending, 1e18, cache=False)  # type: ignore[arg-type]
    msg = st(2, 3)
    assert msg == {"stage": 2, "file": "round_2.raw"} and [p.name for p in stage.iterdir()] == ["round_2.raw"]
    wait = st.ahead(3, 3)
    wait()
    assert [p.name for p in stage.iterdir()] == ["round_2.raw"]  # round 3 exists, but only in pending
    assert [p.name for p in pending.iterdir()] == ["round_3.raw"]
    assert st(3, 3)["file"] == "round_3.raw"
    assert [p.name for p in stage.iterdir()] == ["round_3.raw"] and not list(pending.iterdir())
    vals = [float(s[0][0]) for s in _plan.RawReader("cpu").read(stage / "round_3.raw")]
    assert vals == [1030.0, 1031.0, 1032.0]
    # staged ahead with an R that then changed: discarded, never shown
    st.ahead(4, 3)()
    assert st(4, 2)["file"] == "round_4.raw" and len(_plan.RawReader("cpu").read(stage / "round_4.raw")) == 2
    st.ahead(5, 2)
    st.drain()
    assert st.inflight is None


def test_json_header_is_plain(tmp_path: Path) -> None:
    _plan.write_raw(tmp_path / "h.raw", [[torch.zeros(2, 3), 7]])
    data = (tmp_path / "h.raw").read_bytes()
    n = int.from_bytes(data[len(_plan.RAW_MAGIC):len(_plan.RAW_MAGIC) + 8], "little")
    head = json.loads(data[len(_plan.RAW_MAGIC) + 8:len(_plan.RAW_MAGIC) + 8 + n])
    assert head == [[{"dtype": "float32", "shape": [2, 3], "offset": 0, "nbytes": 24}, {"value": 7}]]
