"""`kill -9` of a real `workbench suite` run, then `--resume`: nothing finished runs again, nothing is lost."""
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

from tests.suites.kb_folder import write_candidates, write_problems

REPO = Path(__file__).resolve().parents[2]
NAMES = ["1_Add", "2_ReLU", "3_Scale"]


def rows(store: Path) -> dict[str, tuple]:
    con = sqlite3.connect(store)
    try:
        return {r[0]: r[1:] for r in con.execute(
            "SELECT problem_id, status, attempts, finished_at, record_json FROM problems")}
    except sqlite3.OperationalError as e:
        # sqlite creates the file at connect, the run creates its tables a moment later: a poll in
        # between sees an empty file (CI hit this: "no such table: problems")
        if "no such table" in str(e):
            return {}
        raise
    finally:
        con.close()


def suite(args: list[str], **kw) -> subprocess.Popen:
    env = {**os.environ, "TRITON_INTERPRET": "1", "PYTHONPATH": str(REPO)}
    return subprocess.Popen([sys.executable, "-m", "workbench.cli", "suite", "kernelbench", *args], cwd=REPO, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True, **kw)


def test_sigkill_then_resume(tmp_path):
    root = write_problems(tmp_path / "kb", NAMES)
    seeds = write_candidates(tmp_path / "seeds", NAMES)
    runs = tmp_path / "runs"
    proc = suite(["--root", str(root), "--levels", "1", "--draft", "none", "--seed-dir", str(seeds), "--device", "cpu",
                  "--run-dir", str(runs), "--trials", "1", "--no-progress"])
    try:
        deadline = time.monotonic() + 600
        store = None
        while time.monotonic() < deadline:  # kill once the first problem is committed, the others not all
            found = list(runs.glob("*/suite.sqlite"))
            if found:
                store = found[0]
                done = [k for k, v in rows(store).items() if v[0] == "done"]
                if done:
                    break
            assert proc.poll() is None, proc.communicate()
            time.sleep(0.2)
        else:
            raise AssertionError("no problem finished within 600 s")
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        try:  # the harness and fork servers of the killed run exit on their own (stdin EOF); make sure
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    before = rows(store)
    finished = {k: v for k, v in before.items() if v[0] in ("done", "failed")}
    assert 1 <= len(finished) < 3, before
    assert any(v[0] in ("pending", "running") for v in before.values())
    run_id = store.parent.name
    again = suite(["--resume", run_id, "--run-dir", str(runs), "--no-progress", "--json"])
    try:
        out, err = again.communicate(timeout=600)
    finally:
        try:
            os.killpg(again.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    assert again.returncode == 0, err[-3000:]
    after = rows(store)
    for pid, row in finished.items():
        assert after[pid] == row  # not re-run: same attempt count, same finish time, same record
    assert all(v[0] == "done" and v[1] >= 1 for v in after.values()), after
    assert '"complete": true' in out and '"correct": 3' in out
