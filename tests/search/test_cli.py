"""`workbench optimize` from the command line: bad input gives one clear message and leaves the memory
intact; a real search killed with SIGKILL loses no evaluated node and `--resume` finishes it."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

import workbench
from tests.search.fakes import FakeEvaluator
from workbench.cli import main
from workbench.memory import Memory

FIX = Path(__file__).parent / "fixtures"
SPEC, SEED = FIX / "add_spec.py", FIX / "add_candidate.py"
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture()
def run_dir(tmp_path: Path) -> Path:
    """A run directory whose memory already holds one run (which bad input must not disturb)."""
    workbench.optimize(
        SPEC,
        seeds=[SEED],
        budget=3,
        evaluator=FakeEvaluator(fitness=lambda c: 1.0),
        run_dir=tmp_path,
        progress=False,
        device="cpu",
    )
    return tmp_path


def _memory_state(run_dir: Path) -> list[tuple]:
    with Memory(run_dir / "memory.sqlite") as mem:
        assert mem._conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        return [(r.run_id, r.status, mem.count_nodes(r.run_id)) for r in mem.runs()]


def _cli(capsys, *args: str) -> tuple[int, str, str]:
    rc = main(["optimize", *args])
    out, err = capsys.readouterr()
    return rc, out, err


@pytest.mark.parametrize(
    "args, message",
    [
        (["--policy", "beam"], "unknown policy 'beam': expected one of greedy, mcts, evolve"),
        (["--llm", "claude"], "unknown LLM provider 'claude'"),
        (["--budget", "0"], "max_evals must be positive"),
        (["--set", "N"], "--set expects NAME=VALUE"),
        (["--resume", "no-such-run"], "no run 'no-such-run'"),
        (["--llm-step", "beam=3"], "unknown llm_step option(s) ['beam']"),
        (["--llm-step", "best_of=0"], "llm_step.best_of must be an integer >= 1"),
        (["--max-rejected", "0"], "max_rejected must be positive"),
    ],
)
def test_bad_options_one_message(capsys, run_dir: Path, args: list[str], message: str) -> None:
    before = _memory_state(run_dir)
    rc, out, err = _cli(
        capsys, str(SPEC), "--seed", str(SEED), "--run-dir", str(run_dir), "--no-progress", *args
    )
    assert rc == 2 and err.count("error:") == 1 and message in err and "Traceback" not in err
    assert _memory_state(run_dir) == before


def test_bad_specs_and_seeds(capsys, run_dir: Path, tmp_path: Path) -> None:
    before = _memory_state(run_dir)
    bad_syntax = tmp_path / "bad_syntax.py"
    bad_syntax.write_text("import torch\nclass Model(:\n    pass\n")
    not_kb = tmp_path / "not_kb.py"
    not_kb.write_text("x = 1\n")
    cases = [
        ([str(tmp_path / "missing.py"), "--seed", str(SEED)], "not found"),
        ([str(bad_syntax), "--seed", str(SEED)], "does not parse: line 2"),
        ([str(not_kb), "--seed", str(SEED)], "does not define Model, get_inputs, get_init_inputs"),
        ([str(SPEC)], "needs at least one --seed"),
        ([str(SPEC), "--seed", str(FIX / "notunables_candidate.py")], "no module-level TUNABLES"),
        ([str(SPEC), "--seed", str(tmp_path / "nope.py")], "seed candidate"),
    ]
    for args, message in cases:
        rc, _, err = _cli(capsys, *args, "--run-dir", str(run_dir), "--no-progress")
        assert rc == 2 and message in err and err.count("error:") == 1, (args, err)
    assert _memory_state(run_dir) == before


def test_spec_that_fails_to_load_and_seed_that_fails(capsys, run_dir: Path, tmp_path: Path) -> None:
    """The real harness on CPU: a spec that raises on import, then a seed that fails at run time."""
    before = _memory_state(run_dir)
    rc, out, err = _cli(
        capsys,
        str(FIX / "bad_load_spec.py"),
        "--seed",
        str(SEED),
        "--run-dir",
        str(run_dir),
        "--no-progress",
        "--device",
        "cpu",
        "--trials",
        "1",
    )
    assert rc == 2 and "this spec cannot be imported" in err and "stopped by rule 'bad_spec'" in out
    broken = tmp_path / "broken.py"
    broken.write_text(SEED.read_text().replace("a + b * scale,", "a + b * scale + undefined_name,"))
    rc, out, err = _cli(
        capsys,
        str(SPEC),
        "--seed",
        str(broken),
        "--run-dir",
        str(run_dir),
        "--no-progress",
        "--device",
        "cpu",
        "--trials",
        "1",
    )
    assert rc == 1 and "every seed failed" in err and "undefined_name" in err
    after = _memory_state(run_dir)
    assert after[0] == before[0] and len(after) == 3  # the earlier run untouched, two failed runs added
    assert [s for _, s, _ in after[1:]] == ["failed", "failed"]


def _evaluated(db: Path) -> dict[str, str]:
    if not db.exists():
        return {}
    try:
        c = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5)
        rows = c.execute("SELECT id, status FROM nodes WHERE status != 'pending'").fetchall()
        c.close()
    except sqlite3.OperationalError:  # the schema is not created yet
        return {}
    return dict(rows)


@pytest.mark.slow
def test_resume_after_sigkill(tmp_path: Path) -> None:
    exe = Path(sys.executable).parent / "workbench"
    cmd = [
        str(exe),
        "optimize",
        str(SPEC),
        "--seed",
        str(SEED),
        "--budget",
        "6",
        "--device",
        "cpu",
        "--trials",
        "1",
        "--run-dir",
        str(tmp_path),
        "--no-progress",
    ]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(
        cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True
    )
    db = tmp_path / "memory.sqlite"
    t0 = time.monotonic()
    try:
        while len(_evaluated(db)) < 3:
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() - t0 < 300, "the search did not evaluate 3 nodes in 300 s"
            time.sleep(0.2)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)  # the search and its harness server, mid-run
        proc.communicate()
    survived = _evaluated(db)
    assert len(survived) >= 3
    with Memory(db) as mem:
        (info,) = mem.runs()
        assert info.status == "running"  # it never got to say it finished
    res = subprocess.run(
        [str(exe), "optimize", "--resume", info.run_id, "--run-dir", str(tmp_path), "--no-progress"],
        env=env,
        capture_output=True,
        text=True,
        timeout=400,
    )
    assert res.returncode == 0, res.stderr
    after = _evaluated(db)
    assert all(after[i] == s for i, s in survived.items())  # nothing evaluated before the kill was lost
    with Memory(db) as mem:
        nodes = mem.run_history(info.run_id)
        assert mem.get_run(info.run_id).status == "finished"
    assert sum(1 for n in nodes if n.operator != "seed" and n.evaluated) == 6  # the budget, not more
    assert all(n.evaluated for n in nodes) and len({n.source for n in nodes}) == len(nodes)
    assert "stopped by rule" in res.stdout and (tmp_path / info.run_id / "best_kernel.py").exists()
