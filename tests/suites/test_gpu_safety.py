"""The suite's parts that keep it right on a GPU, checked on the CPU: the fork server's modes, the device
clock shared by every timed window, a run in which nothing ran, and one log line per problem."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.suites.kb_folder import write_problems
from workbench.suites import forkserver

REPO = Path(__file__).resolve().parents[2]
SPEC = str(REPO / "examples" / "vector_add" / "spec.py")


def _server(mode: str | None = None) -> forkserver.ForkServer:
    from workbench.env import stripped_environ

    env = {**stripped_environ(), "TRITON_INTERPRET": "1", "WB_FORKSERVER_DEVICE": "cpu"}
    if mode:
        env["WB_FORKSERVER_MODE"] = mode
    return forkserver.ForkServer(env=env)


@pytest.mark.parametrize("mode", ["fork", "spawn"])
def test_both_modes_run_a_job_and_say_which_they_are(mode):
    server = _server(mode)
    try:
        info = server.start()
        assert info["mode"] == mode and info["cuda_initialized"] is False
        got = server.call("prepare", {"spec_path": SPEC, "max_elems": 1 << 12, "draft": "none", "name": "va"}, 120)
        assert got["ok"] and got["overrides"], got
        # a job that hangs costs its own limit, in either mode, and the server goes on
        t0 = time.monotonic()
        hung = server.call("prepare", {"spec_path": str(REPO / "no" / "such.py"), "max_elems": None,
                                       "draft": "none", "name": "x"}, 60)
        assert not hung["ok"] and "bad spec" in hung["diagnosis"] and time.monotonic() - t0 < 60
    finally:
        server.close()


def test_a_server_that_touched_cuda_refuses_to_fork(monkeypatch):
    """The guard before every fork: a process with CUDA initialized must not fork a child that needs it."""
    import torch

    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: True)
    with pytest.raises(RuntimeError, match="initialized CUDA"):
        forkserver._serve_one({"job": "cuda_probe", "kwargs": {}, "timeout_s": 5}, "fork")


def test_the_server_asks_nvml_not_the_cuda_runtime():
    """torch.cuda.is_available() through the CUDA runtime poisons fork; the server sets the NVML check before
    torch is imported (its children inherit it)."""
    code = ("import os, sys; sys.argv=['x']; import workbench.suites.forkserver as f; "
            "os.environ.pop('PYTORCH_NVML_BASED_CUDA_CHECK', None); sys.stdin = open(os.devnull); f.main(); "
            "print(os.environ['PYTORCH_NVML_BASED_CUDA_CHECK'], file=sys.stderr)")
    env = {**os.environ, "TRITON_INTERPRET": "1", "PYTHONPATH": str(REPO)}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stderr.strip().splitlines()[-1] == "1"
    assert json.loads(out.stdout.splitlines()[0])["ready"]


HOLD = """
import sys, time
from platforms.clock import device_clock
with device_clock("cuda") as waited:
    print(f"{time.time():.3f} {waited:.3f}", flush=True)
    time.sleep(float(sys.argv[1]))
"""


def test_the_device_clock_admits_one_timed_window_at_a_time(tmp_path):
    env = {**os.environ, "WB_CLOCK_DIR": str(tmp_path), "PYTHONPATH": str(REPO)}
    first = subprocess.Popen([sys.executable, "-c", HOLD, "1.5"], stdout=subprocess.PIPE, text=True, env=env)
    line = first.stdout.readline()  # the first one holds the clock now
    t_first = float(line.split()[0])
    second = subprocess.run([sys.executable, "-c", HOLD, "0"], capture_output=True, text=True, env=env, timeout=60)
    first.wait(timeout=60)
    t_second, waited = map(float, second.stdout.split())
    assert t_second - t_first >= 1.4 and waited > 0.5, (t_first, t_second, waited)


MEMORY = """
import sys, time
from platforms.clock import device_memory
print("asking", flush=True)
with device_memory("cuda", exclusive=sys.argv[1] == "x") as waited:
    print(f"{time.time():.3f} {waited:.3f}", flush=True)
    time.sleep(float(sys.argv[2]))
"""


def test_the_memory_lock_shares_and_an_exclusive_holder_waits_and_is_not_starved(tmp_path):
    """Evaluations and compile baselines share the GPU's memory lock; a job re-run after running out of
    memory holds it alone: it waits for the shared holders to leave, and a shared one asking after it
    waits behind it (the gate), not beside the first."""
    env = {**os.environ, "WB_CLOCK_DIR": str(tmp_path), "PYTHONPATH": str(REPO)}

    def start(kind: str, hold: float) -> subprocess.Popen:
        proc = subprocess.Popen([sys.executable, "-c", MEMORY, kind, str(hold)], stdout=subprocess.PIPE, text=True,
                                env=env)
        assert proc.stdout.readline().strip() == "asking"
        return proc

    def got(proc: subprocess.Popen) -> tuple[float, float]:
        t, waited = map(float, proc.stdout.readline().split())
        proc.wait(timeout=60)
        return t, waited

    first = start("s", 3.0)
    t_first = float(first.stdout.readline().split()[0])  # holds it shared now
    beside = start("s", 0.0)
    alone = start("x", 1.0)
    time.sleep(0.5)  # the exclusive one waits at the lock, holding the gate
    after = start("s", 0.0)
    (_, w_beside), (t_alone, _), (t_after, _) = got(beside), got(alone), got(after)
    first.wait(timeout=60)
    assert w_beside < 1.5, w_beside  # two shared holders at once
    assert t_alone - t_first >= 2.8, (t_first, t_alone)  # the exclusive one waited for the first to leave
    assert t_after - t_alone >= 0.9, (t_alone, t_after)  # and the later shared one for the exclusive one


def test_the_cpu_clock_is_free():
    from platforms.clock import device_clock

    with device_clock("cpu") as a, device_clock("cpu") as b:
        assert a == b == 0.0


def _suite(*args: str, tmp: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "TRITON_INTERPRET": "1", "PYTHONPATH": str(REPO)}
    return subprocess.run([sys.executable, "-m", "workbench.cli", "suite", "kernelbench", *args, "--run-dir",
                           str(tmp / "runs"), "--device", "cpu"], capture_output=True, text=True, env=env,
                          timeout=600)


def test_a_run_in_which_nothing_ran_says_so_first_and_exits_1(tmp_path):
    root = write_problems(tmp_path / "kb", ["1_Add", "2_ReLU"])
    proc = _suite("--root", str(root), "--levels", "1", "--draft", "none", tmp=tmp_path)  # no seeds: nothing runs
    assert proc.returncode == 1, proc.stderr[-3000:]
    said = [ln for ln in proc.stderr.splitlines() if ln.startswith("workbench suite:")]
    assert said and said[0].startswith("workbench suite: NOTHING RAN: none of the 2 problems"), proc.stderr[-3000:]
    assert "no seed" in said[0]
    md = next((tmp_path / "runs").glob("*/report.md")).read_text()
    assert md.splitlines()[2].startswith("**NOTHING RAN")


def test_a_log_gets_one_line_per_problem_and_no_bar(tmp_path):
    from tests.suites.kb_folder import write_candidates

    root = write_problems(tmp_path / "kb", ["1_Add", "5_Sub"])
    seeds = write_candidates(tmp_path / "seeds", ["1_Add", "5_Sub"])
    proc = _suite("--root", str(root), "--levels", "1", "--draft", "none", "--seed-dir", str(seeds), "--trials", "1",
                  tmp=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = [ln for ln in proc.stderr.splitlines() if "workbench.suites.runner" in ln and "] level1/" in ln]
    assert len(lines) == 2 and "\r" not in proc.stderr, proc.stderr[-3000:]
    assert any("1_Add: correct" in ln for ln in lines) and any("5_Sub: incorrect" in ln for ln in lines), lines
    assert proc.stdout.splitlines()[0] == "2 of 2 problems reached the harness, 1 correct"


def test_stop_after_leaves_the_rest_pending_and_a_resume_runs_them(tmp_path):
    from tests.suites.kb_folder import write_candidates
    from workbench.suites import run_kernelbench

    root = write_problems(tmp_path / "kb", ["1_Add", "2_ReLU"])
    seeds = write_candidates(tmp_path / "seeds", ["1_Add", "2_ReLU"])
    run = run_kernelbench(root, levels="1", draft="none", seed_dir=seeds, device="cpu", trials=1, progress=False,
                          run_dir=tmp_path / "runs", stop_after_s=1e-6)  # past it before the first problem starts
    assert not run.report["complete"] and run.report["counts"] == {"pending": 2}
    again = run_kernelbench(resume=str(run.path), stop_after_s=600, progress=False)
    assert again.report["complete"] and again.report["levels"]["1"]["correct"] == 2


def test_a_named_run_resumes_by_its_name_and_a_taken_name_is_refused(tmp_path):
    """`--run-id NAME` (how benchmarks/suite_gpu.sh carries one run across device calls)."""
    from tests.suites.kb_folder import write_candidates
    from workbench.suites import SuiteError, run_kernelbench

    root = write_problems(tmp_path / "kb", ["1_Add", "2_ReLU"])
    seeds = write_candidates(tmp_path / "seeds", ["1_Add", "2_ReLU"])
    common = dict(levels="1", draft="none", seed_dir=seeds, device="cpu", trials=1, progress=False)
    run = run_kernelbench(root, run_dir=tmp_path / "runs", run_id="kb_named", stop_after_s=1e-6, **common)
    assert run.run_id == "kb_named" and run.path == tmp_path / "runs" / "kb_named"
    with pytest.raises(SuiteError, match="--resume kb_named"):
        run_kernelbench(root, run_dir=tmp_path / "runs", run_id="kb_named", **common)
    with pytest.raises(SuiteError, match="plain directory name"):
        run_kernelbench(root, run_dir=tmp_path / "runs", run_id="../elsewhere", **common)
    # the same flags again are no change (the suite's budget, not the search's stored one, is compared)
    again = run_kernelbench(resume="kb_named", run_dir=tmp_path / "runs", stop_after_s=600, budget=0, progress=False)
    assert again.report["complete"] and again.report["levels"]["1"]["correct"] == 2


def _evaluate_beside(tmp_path, monkeypatch, hold):
    """An evaluation of vector_add started while this process holds the CPU's clock (`hold`, a context
    manager of `platforms.clock`; WB_CLOCK_CPU=1 makes it a real lock) for 20 s: the result and the seconds
    from the hold's start."""
    import threading
    import time

    from workbench.harness import Harness

    monkeypatch.setenv("WB_CLOCK_DIR", str(tmp_path))
    monkeypatch.setenv("WB_CLOCK_CPU", "1")
    spec = Path(__file__).resolve().parents[2] / "examples" / "vector_add" / "spec.py"
    out: dict = {}
    with Harness(device="cpu") as h:
        h.start()
        with hold("cpu"):
            t0 = time.monotonic()
            worker = threading.Thread(target=lambda: out.update(res=h.evaluate(spec, spec.parent / "candidate.py",
                                                                                 trials=1)))
            worker.start()
            worker.join(20.0)
            assert worker.is_alive(), "the evaluation finished while another process held the clock"
        worker.join(300)
    res = out["res"]
    assert res.passed, res.error
    return res, time.monotonic() - t0


def test_a_timed_window_waits_for_other_evaluations_untimed_gpu_work(tmp_path, monkeypatch):
    """Another process's untimed GPU work (`device_busy`: another evaluation's input generation, trials,
    judging) holds the clock shared: an evaluation runs its own untimed steps beside it, gets as far as its
    first timed window (the baseline's rounds) and waits there until the other leaves."""
    from platforms.clock import device_busy

    res, since = _evaluate_beside(tmp_path, monkeypatch, device_busy)
    assert res.timings_s["busy_wait"] < 3.0, res.timings_s  # its untimed steps did not wait
    assert 3.0 < res.timings_s["clock_wait"] < since, res.timings_s  # its timed window did, for the rest


def test_no_evaluation_step_runs_during_another_timed_window(tmp_path, monkeypatch):
    """Another process's timed window (`device_clock`, exclusive: a harness's rounds or a compile baseline)
    holds off every step of an evaluation that touches the device: it waits before its first, and its own
    windows, opened after, wait for nothing."""
    from platforms.clock import device_clock

    res, since = _evaluate_beside(tmp_path, monkeypatch, device_clock)
    assert 3.0 < res.timings_s["busy_wait"] < since, res.timings_s
    assert res.timings_s["clock_wait"] < 3.0, res.timings_s


