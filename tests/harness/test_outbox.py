"""The outbox (`workbench.harness.outbox`): layouts, the two sides of the file, sampled slots."""
from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch

from workbench.harness import outbox
from workbench.harness.compare import compare_outputs
from workbench.harness.settings import HarnessSettings

DTYPES = [torch.float32, torch.float16, torch.bfloat16, torch.float64, torch.int64, torch.int8, torch.bool,
          torch.complex64]


def _make(dtype: torch.dtype, shape: tuple[int, ...]) -> torch.Tensor:
    g = torch.Generator().manual_seed(7)
    if dtype == torch.bool:
        return torch.rand(shape, generator=g) > 0.5
    if not dtype.is_floating_point and not dtype.is_complex:
        return torch.randint(-100, 100, shape, generator=g).to(dtype)
    return torch.randn(shape, generator=g, dtype=torch.float32 if dtype != torch.complex64 else dtype).to(dtype)


@pytest.mark.parametrize("dtype", DTYPES)
def test_every_dtype_and_odd_shapes_come_back_bit_for_bit(tmp_path: Path, dtype: torch.dtype) -> None:
    outs = [_make(dtype, (3, 5, 7)), _make(dtype, ()), _make(dtype, (0, 4)), _make(dtype, (1031,))[::2]]
    meta = outbox.describe(outs)
    assert meta is not None
    layout = outbox.Layout.from_dict(outbox.Layout.build([meta, meta]).to_dict())  # through the job's JSON
    arena = outbox.Arena(tmp_path / outbox.FILE_NAME, layout, "cpu")
    writer = outbox.Writer(tmp_path / outbox.FILE_NAME, layout, "cpu")
    assert writer.put(1, outs)
    got = arena.read(1)
    for g, o in zip(got, outs):
        assert g.dtype == o.dtype and g.shape == o.shape and torch.equal(g, o)
    assert all(not torch.any(g != 0) for g in arena.read(0))  # a slot never written reads as zeros
    assert all(e[2] % outbox.ALIGN == 0 for slot in layout.slots for e in slot)


def test_an_output_of_another_layout_is_refused_and_nothing_is_written(tmp_path: Path) -> None:
    ref = [torch.ones(4, 4)]
    layout = outbox.Layout.build([outbox.describe(ref)])
    arena = outbox.Arena(tmp_path / outbox.FILE_NAME, layout, "cpu")
    writer = outbox.Writer(tmp_path / outbox.FILE_NAME, layout, "cpu")
    assert not writer.put(0, [torch.ones(4, 4, dtype=torch.float64)])
    assert not writer.put(0, [torch.ones(4, 5)])
    assert not writer.put(0, [torch.ones(4, 4), torch.ones(1)])
    assert not writer.put(0, [3.0])
    assert not writer.put(5, ref)
    assert torch.count_nonzero(arena.read(0)[0]) == 0
    assert outbox.describe([torch.ones(2), 3]) is None and outbox.describe([torch.ones(2).to_sparse()]) is None


def test_the_writer_refuses_a_link_or_a_file_of_another_size(tmp_path: Path) -> None:
    layout = outbox.Layout.build([[("float32", (8,))]])
    (tmp_path / "other").write_bytes(b"\0" * layout.total)
    os.symlink(tmp_path / "other", tmp_path / outbox.FILE_NAME)
    with pytest.raises(OSError):
        outbox.Writer(tmp_path / outbox.FILE_NAME, layout, "cpu")
    (tmp_path / "small").write_bytes(b"\0" * 8)
    with pytest.raises(OSError):
        outbox.Writer(tmp_path / "small", layout, "cpu")
    with pytest.raises(OSError):  # the arena is made, never taken over
        outbox.Arena(tmp_path / "other", layout, "cpu")


def test_a_cut_file_reads_as_an_error_not_as_data(tmp_path: Path) -> None:
    layout = outbox.Layout.build([[("float32", (4096,))]])
    arena = outbox.Arena(tmp_path / outbox.FILE_NAME, layout, "cpu")
    os.truncate(tmp_path / outbox.FILE_NAME, 100)
    with pytest.raises(OSError):
        arena.read(0)


def test_a_sampled_slot_holds_the_values_at_the_seeds_positions(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(outbox, "SAMPLE", 1000)
    monkeypatch.setattr(outbox, "EDGE", 16)
    out = torch.randn(37, 1001)
    meta = outbox.describe([out])
    layout = outbox.Layout.build([meta, meta], [False, True])
    assert layout.slots[1][0][3] and not layout.slots[0][0][3]
    arena = outbox.Arena(tmp_path / outbox.FILE_NAME, layout, "cpu")
    writer = outbox.Writer(tmp_path / outbox.FILE_NAME, layout, "cpu")
    assert not writer.put(1, [out])  # a sampled slot needs the trusted seed
    assert writer.put(1, [out], seed=12345) and writer.put(0, [out])
    got = arena.read(1)[0]
    assert got.shape == (1000 + 32,)
    assert compare_outputs([got], arena.expected(1, [out], 12345)).ok
    assert not compare_outputs([got], arena.expected(1, [out], 54321)).ok  # another seed, other positions
    pos = outbox.positions(out.numel(), 12345, "cpu")
    assert torch.equal(pos, outbox.positions(out.numel(), 12345, "cpu"))
    assert pos[:16].tolist() == list(range(16)) and pos[-16:].tolist() == list(range(out.numel() - 16, out.numel()))
    bad = out.clone()
    bad.view(-1)[-1] += 1.0  # a wrong last element: the tail is always read
    assert writer.put(1, [bad], seed=12345)
    assert not compare_outputs(arena.read(1), arena.expected(1, [out], 12345)).ok
    assert torch.equal(arena.read(0)[0], out)


def test_sampling_starts_above_the_full_size_and_judged_outputs_are_bounded() -> None:
    assert not outbox.sampled([("float32", (256, 1024))], full_mb=1.0)   # exactly 1 MB
    assert outbox.sampled([("float32", (256, 1025))], full_mb=1.0)
    judge_mb = HarnessSettings().judge_mb
    assert outbox.judged_outputs(1, judge_mb) == 1000 and outbox.judged_outputs(2**40, judge_mb) == outbox.MIN_TIMED


def test_a_layout_of_many_outputs_fits_one_message() -> None:
    """A set of a thousand small outputs (OpInfo's int64 `unique`: 1,056 of them) judged in as many timed sets
    as its bytes allow made a layout whose description the server refused (over `MAX_NESTED`): the timed sets
    are bounded by the layout's entries too, and the description of the largest one still fits."""
    import json

    from workbench.harness.trusted_messages import MAX_NESTED

    meta = [("int64", (3, 1, 2, 7, 1 + i % 5)) for i in range(1056)]
    trial_slots = [meta] * 3
    out_bytes = outbox.Layout.build([meta], [False]).total
    judge_mb = HarnessSettings().judge_mb
    assert outbox.judged_outputs(out_bytes, judge_mb) > 100  # by bytes alone: the 5 MB description
    timed = outbox.judged_outputs(out_bytes, judge_mb, len(meta), sum(len(m) for m in trial_slots))
    assert outbox.MIN_TIMED <= timed < 100
    layout = outbox.Layout.build(trial_slots + [meta] * timed, [False] * (3 + timed))
    assert len(json.dumps(layout.to_dict())) < MAX_NESTED
    wide = [("float32", (1,))] * 40_000  # past the bound in one set: the minimum still, never zero
    assert outbox.judged_outputs(4096 * len(wide), judge_mb, len(wide), 3 * len(wide)) == outbox.MIN_TIMED
