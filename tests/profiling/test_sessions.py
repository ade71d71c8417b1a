"""Session lifecycle: always finalize, refuse nesting, clear messages without a GPU.

Proton cannot start without a GPU, so the lifecycle is exercised against a stand-in that records
calls and writes a real fixture file on finalize; the refusal without a GPU is checked for real.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
from pathlib import Path

import pytest

import profiling
from profiling import sessions

FIX = Path(__file__).parent / "fixtures"


class FakeProton:
    """Records start/finalize; finalize copies a recorded H200 file to the session's output."""

    def __init__(self, dropped_lines: int = 0):
        import triton.profiler.mode as mode

        self.mode = mode
        self.sessions: dict[int, dict] = {}
        self.finalized: list[int] = []
        self.scopes: list[tuple] = []
        self.dropped_lines = dropped_lines

    def start(self, name, *, context="shadow", data="tree", backend=None, mode=None, hook=None):
        sid = len(self.sessions)
        self.sessions[sid] = {"name": name, "data": data, "backend": backend, "mode": mode, "hook": hook}
        return sid

    def finalize(self, session=None, output_format=""):
        s = self.sessions[session]
        self.finalized.append(session)
        if s["backend"] == "instrumentation":
            src = FIX / ("it.hatchet" if s["data"] == "tree" else "itr.chrome_trace")
            for _ in range(self.dropped_lines):
                os.write(2, b"[PROTON] Warning: events are dropped in warp 0\n")
        else:
            src = FIX / ("kern.hatchet" if s["data"] == "tree" else "kt.chrome_trace")
        shutil.copy(src, s["name"] + src.suffix)

    def scope(self, name, metrics=None):
        self.scopes.append((name, metrics))
        return contextlib.nullcontext()


@pytest.fixture
def fake(monkeypatch):
    fp = FakeProton()
    monkeypatch.setattr(sessions, "_proton", lambda: fp)
    monkeypatch.setattr(sessions, "_check_can_profile", lambda: None)
    yield fp
    assert profiling.active_session() is None


def test_no_gpu_gives_a_clear_message(tmp_path):
    if os.environ.get("TRITON_INTERPRET") != "1":
        pytest.skip("a GPU is visible: the refusal path is for CPU machines")
    with pytest.raises(profiling.ProfilingUnavailable, match="interpreter"):
        with profiling.kernel_session(tmp_path / "run"):
            pass
    assert profiling.active_session() is None
    assert not (tmp_path / "run.hatchet").exists()


def test_session_finalizes_and_records_error_when_body_raises(fake, tmp_path):
    with pytest.raises(ValueError, match="kernel exploded"):
        with profiling.kernel_session(tmp_path / "run") as s:
            with s.scope("add", bytes=1024, flops=10, flops_dtype="fp32"):
                raise ValueError("kernel exploded")
    assert fake.finalized == [0] and fake.scopes == [("add", {"bytes": 1024.0, "flops32": 10.0})]
    assert s.closed and profiling.active_session() is None
    meta = json.loads((tmp_path / "run.hatchet.meta.json").read_text())
    assert meta["error"] == "ValueError: kernel exploded" and meta["kind"] == "kernel"
    # the output is readable and the next session can start (a re-run notebook cell)
    assert profiling.load(s.path).kernels["launches"].sum() == 3
    with profiling.kernel_session(tmp_path / "again", data="trace") as s2:
        pass
    assert s2.path.name == "again.chrome_trace" and s2.path.exists()


def test_second_session_is_refused_and_first_still_closes(fake, tmp_path):
    with profiling.kernel_session(tmp_path / "first") as first:
        with pytest.raises(profiling.SessionActiveError, match="already open.*first.hatchet"):
            profiling.probe_session(tmp_path / "second").start()
        assert profiling.active_session() is first
    assert fake.finalized == [0] and (tmp_path / "first.hatchet").exists()
    assert not (tmp_path / "second.hatchet").exists()


def test_probe_session_options_companion_and_timing_guard(fake, tmp_path):
    opts = profiling.ProbeOptions(
        buffer_type="global", buffer_size=8192, warps=(0, 2), optimizations=("clock32", "time_shift")
    )
    with profiling.probe_session(tmp_path / "p.hatchet", options=opts, kernel_times=True) as ps:
        with pytest.raises(profiling.SessionActiveError, match="refusing CUDA-event timing"):
            profiling.assert_not_instrumenting("CUDA-event timing")
    backends = [s["backend"] for s in fake.sessions.values()]
    assert backends == [None, "instrumentation"]
    mode = fake.sessions[1]["mode"]
    assert mode.sampling_options == "0,2" and mode.buffer_size == 8192
    assert "SELECTIVE" in str(mode.sampling_strategy) and len(mode.optimizations) == 2
    assert fake.finalized == [1, 0]  # reverse order of starting
    assert ps.path == tmp_path / "p.hatchet" and ps.kernels_path == tmp_path / "p_kernels.hatchet"
    meta = json.loads((tmp_path / "p.hatchet.meta.json").read_text())
    assert meta["options"]["warps"] == [0, 2] and meta["kind"] == "probes"
    prof = profiling.load(ps.path, ps.kernels_path)
    assert set(prof.regions["region"]) == {"ld", "lp"}
    profiling.assert_not_instrumenting()  # no session: no error


def test_dropped_event_lines_are_captured_and_counted(monkeypatch, tmp_path):
    fp = FakeProton(dropped_lines=7)
    monkeypatch.setattr(sessions, "_proton", lambda: fp)
    monkeypatch.setattr(sessions, "_check_can_profile", lambda: None)
    with profiling.probe_session(tmp_path / "d", data="trace") as ps:
        pass
    assert ps.dropped_lines == 7
    assert json.loads((tmp_path / "d.chrome_trace.meta.json").read_text())["dropped_event_lines"] == 7


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"buffer_type": "texture"}, "buffer_type"),
        ({"buffer_strategy": "ring"}, "buffer_strategy"),
        ({"buffer_size": -1}, "buffer_size"),
        ({"optimizations": ("clock16",)}, "unknown optimizations"),
        ({"granularity": "warp_group"}, "granularity='warp'"),
        ({"warps": ()}, "warps"),
    ],
)
def test_bad_probe_options(kwargs, message):
    with pytest.raises(ValueError, match=message):
        profiling.ProbeOptions(**kwargs)


def test_scope_flops_dtype(fake, tmp_path):
    with profiling.kernel_session(tmp_path / "f") as s:
        s.scope("gemm", flops=2.0, flops_dtype="bf16")
        with pytest.raises(ValueError, match="flops_dtype must be one of"):
            s.scope("gemm", flops=2.0, flops_dtype="int4")
    assert fake.scopes == [("gemm", {"flops16": 2.0})]


def test_bad_data_kind(tmp_path):
    with pytest.raises(ValueError, match="'tree' or 'trace'"):
        profiling.kernel_session(tmp_path / "x", data="flamegraph")
