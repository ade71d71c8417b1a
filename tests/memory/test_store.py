"""The context memory: queries, failure counts, text deduplication, crash safety under SIGKILL."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from workbench.memory import Memory, Node, RunInfo
from workbench.result import EvalResult, Status


def _node(
    run: str,
    spec: str,
    fit: float,
    *,
    platform: str = "cpu",
    err: str | None = None,
    seq: int = 0,
    source: str = "x = 1\n",
    t: float = 0.0,
) -> Node:
    n = Node(
        run_id=run,
        spec_key=spec,
        operator="llm",
        source=source,
        platform=platform,
        seq=seq,
        created_at=1000.0 + t,
    )
    if err:
        n.apply_result(EvalResult(status=Status(err), error=f"{err} happened"), f"status: {err}\nwhy {seq}")
    else:
        n.apply_result(
            EvalResult(status=Status.PASSED, fitness=fit, speedup=fit, correct=True, runtime_us=1.0 / fit),
            "status: passed",
        )
    return n


@pytest.fixture()
def mem(tmp_path: Path):
    m = Memory(tmp_path / "memory.sqlite")
    yield m
    m.close()


def test_wal_mode_and_schema(mem: Memory) -> None:
    assert mem._conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_best_and_top_k_by_spec_and_platform(mem: Memory) -> None:
    nodes = [
        _node("r1", "a", 1.5, seq=0),
        _node("r1", "a", 3.0, seq=1),
        _node("r1", "a", 0.0, err="incorrect", seq=2),
        _node("r2", "a", 9.0, platform="cuda:sm_90", seq=0),
        _node("r2", "b", 7.0, seq=1),
    ]
    mem.save_nodes(nodes)
    assert mem.best_node("a", "cpu").fitness == 3.0
    assert mem.best_node("a").fitness == 9.0
    assert mem.best_node("zzz") is None
    assert [n.fitness for n in mem.top_k("a", "cpu", k=5)] == [3.0, 1.5]  # failures (fitness 0) excluded
    assert [n.fitness for n in mem.top_k(None, k=2)] == [9.0, 7.0]
    got = mem.best_node("a", "cpu")
    assert got.source == "x = 1\n" and got.result is not None and got.result.status == Status.PASSED


def test_failure_counts_follow_status_changes(mem: Memory) -> None:
    n = Node(run_id="r", spec_key="s", operator="llm", source="y = 2\n")
    mem.save_node(n)  # pending: no failure yet
    assert mem.failures_by_class("s") == {}
    n.apply_result(EvalResult(status=Status.COMPILE_ERROR, error="boom"), "status: compile_error")
    mem.save_node(n)
    mem.save_node(n)  # saving again must not count twice
    m2 = Node(run_id="r", spec_key="s", operator="llm", seq=1)
    m2.fail_generation("parse_error", "no code block")
    mem.save_node(m2)
    assert mem.failures_by_class("s") == {"compile_error": 1, "parse_error": 1}
    n.apply_result(EvalResult(status=Status.PASSED, fitness=2.0, correct=True), "status: passed")
    mem.save_node(n)  # a re-evaluated node that now passes leaves the counts
    assert mem.failures_by_class("s") == {"parse_error": 1}
    assert mem.failures_by_class("s", "cuda:sm_90") == {}


def test_texts_stored_once(mem: Memory) -> None:
    src = "# the same kernel\n" * 50
    mem.save_nodes([_node("r", "s", 1.0 + i, seq=i, source=src) for i in range(20)])
    hashes = mem._conn.execute("SELECT COUNT(DISTINCT source_hash) FROM nodes").fetchone()[0]
    blob = mem._conn.execute(
        "SELECT COUNT(*) FROM blobs WHERE hash = (SELECT source_hash FROM nodes LIMIT 1)"
    ).fetchone()[0]
    assert hashes == 1 and blob == 1
    assert all(n.source == src for n in mem.run_history("r"))


def test_past_attempts_dedup_failures_and_exclude(mem: Memory) -> None:
    nodes = [_node("r", "s", 2.0, seq=0), _node("r", "s", 4.0, seq=1)]
    nodes += [_node("r", "s", 0, err="compile_error", seq=2 + i, t=i) for i in range(4)]
    for n in nodes[2:4]:
        n.diagnosis = "status: compile_error\nsame cause"
    mem.save_nodes(nodes)
    best, fails = mem.past_attempts("s", "cpu", k=2, n_failures=5, exclude_ids=[nodes[1].id])
    assert [n.fitness for n in best] == [2.0]
    diags = [n.diagnosis for n in fails]
    assert len(diags) == len(set(diags)) == 3  # two identical diagnoses shown once


def test_runs_and_history_order(mem: Memory) -> None:
    mem.start_run(
        RunInfo(
            run_id="r",
            spec_key="s",
            spec_path="/x/spec.py",
            platform="cpu",
            policy="mcts",
            config={"budget": 3},
        )
    )
    mem.save_nodes([_node("r", "s", 1.0, seq=k) for k in (2, 0, 1)])
    assert [n.seq for n in mem.run_history("r")] == [0, 1, 2]
    mem.finish_run("r", status="finished", stop_rule="stall", stop_message="no improvement")
    info = mem.get_run("r")
    assert (info.policy, info.config, info.stop_rule) == ("mcts", {"budget": 3}, "stall")
    with pytest.raises(sqlite3.IntegrityError):
        mem.start_run(RunInfo(run_id="r", spec_key="s", spec_path="x", platform="cpu", policy="greedy"))


def test_newer_schema_is_refused(tmp_path: Path) -> None:
    p = tmp_path / "m.sqlite"
    Memory(p).close()
    c = sqlite3.connect(p)
    c.execute("PRAGMA user_version=99")
    c.close()
    with pytest.raises(RuntimeError, match="newer"):
        Memory(p)


_WRITER = textwrap.dedent("""
    import sys, time
    from workbench.memory import Memory, Node
    from workbench.result import EvalResult, Status
    mem = Memory(sys.argv[1])
    for i in range(100000):
        n = Node(run_id="r", spec_key="s", operator="llm", source=f"k = {i}\\n" * 40, seq=i)
        mem.save_node(n)
        n.apply_result(EvalResult(status=Status.PASSED, fitness=1.0 + i, correct=True), "ok")
        mem.save_node(n)
        print(n.id, flush=True)       # printed only after the commit returned
""")


def test_sigkill_loses_no_committed_node(tmp_path: Path) -> None:
    db = tmp_path / "m.sqlite"
    proc = subprocess.Popen(
        [sys.executable, "-c", _WRITER, str(db)],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])},
    )
    committed = []
    t0 = time.monotonic()
    while len(committed) < 60 and time.monotonic() - t0 < 60:
        line = proc.stdout.readline()
        if not line:
            break
        committed.append(line.strip())
    os.kill(proc.pid, signal.SIGKILL)  # mid-write: the writer is busy committing the next nodes
    proc.wait()
    committed += [ln.strip() for ln in proc.stdout.read().splitlines() if ln.strip()]
    assert len(committed) >= 60
    with Memory(db) as mem:
        ids = {n.id: n for n in mem.run_history("r")}
        for nid in committed:
            assert nid in ids and ids[nid].status == "passed"
