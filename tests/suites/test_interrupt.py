"""Ctrl-C of a real `workbench suite` run in the middle of a search: the command ends at once, says how to
continue, and the problem in flight stays to run again (its thread is not waited for)."""
import os
import signal
import time

from tests.suites.kb_folder import write_candidates, write_problems
from tests.suites.test_resume import rows, suite

# long enough that waiting for the search in flight to end (the bug) takes far longer than the bound below
BUDGET = "40"
EXIT_BOUND_S = 25.0


def _wide_seed(folder):
    """The seed with a tuning space of 40 points (kb_folder's has 4: its search ended after 4 evaluations, in
    about the 10 s this test waits, and the problem was done before the interrupt on a quicker machine)."""
    path = folder / "1_Add.py"
    src = path.read_text()
    assert 'TUNABLES = {"BLOCK": [256, 512, 1024, 2048]}' in src and "BLOCK=BLOCK)" in src
    path.write_text(src.replace('TUNABLES = {"BLOCK": [256, 512, 1024, 2048]}',
                                'TUNABLES = {"BLOCK": [16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192], '
                                '"NUM_WARPS": [1, 2, 4, 8]}\nNUM_WARPS = 4')
                    .replace("BLOCK=BLOCK)", "BLOCK=BLOCK, num_warps=NUM_WARPS)"))


def test_ctrl_c_ends_the_run_at_once_and_keeps_the_problem_in_flight(tmp_path):
    root = write_problems(tmp_path / "kb", ["1_Add"])
    seeds = write_candidates(tmp_path / "seeds", ["1_Add"])
    _wide_seed(seeds)
    runs = tmp_path / "runs"
    proc = suite(["--root", str(root), "--levels", "1", "--draft", "none", "--seed-dir", str(seeds), "--device", "cpu",
                  "--run-dir", str(runs), "--trials", "1", "--budget", BUDGET, "--no-progress"])
    try:
        deadline = time.monotonic() + 300
        store = None
        while time.monotonic() < deadline:  # interrupt once the problem runs and its search has had time to start
            found = list(runs.glob("*/suite.sqlite"))
            if found and any(v[0] == "running" for v in rows(found[0]).values()):
                store = found[0]
                break
            assert proc.poll() is None, proc.communicate()
            time.sleep(0.2)
        else:
            raise AssertionError("the problem did not start within 300 s")
        time.sleep(10)
        assert proc.poll() is None, "the problem ended before the interrupt: raise BUDGET"
        t0 = time.monotonic()
        os.killpg(proc.pid, signal.SIGINT)  # as a terminal's Ctrl-C: the whole foreground group
        out, err = proc.communicate(timeout=120)
        took = time.monotonic() - t0
    finally:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    assert proc.returncode == 130, err[-3000:]
    assert "interrupted; continue with --resume" in err
    assert took < EXIT_BOUND_S, f"the run took {took:.1f} s to end after Ctrl-C"
    (status, attempts, finished_at, _), = rows(store).values()
    assert status in ("running", "pending") and finished_at is None, (status, finished_at)
    assert attempts == 1
