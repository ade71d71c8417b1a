"""What the GPU test suite needs: the KernelBench folder, the command line, a record of each path's wall time."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def kernelbench_root() -> Path:
    """KernelBench as published: `KERNELBENCH_DIR`, or `.kernelbench/` in the checkout (a copy carried to a
    GPU machine, never committed), or `../shared/kernelbench` beside it."""
    for cand in (os.environ.get("KERNELBENCH_DIR"), REPO / ".kernelbench", REPO.parent / "shared" / "kernelbench"):
        if cand and (Path(cand) / "level1").is_dir():
            return Path(cand)
    pytest.skip("no KernelBench folder (set KERNELBENCH_DIR, or put it at .kernelbench/ in the checkout)")


def problem(level: int, number: int) -> Path:
    found = sorted((kernelbench_root() / f"level{level}").glob(f"{number}_*.py"))
    assert found, f"KernelBench level {level} has no problem {number}"
    return found[0]


def workbench(*args: str, cwd: Path | None = None, timeout: float = 600) -> tuple[subprocess.CompletedProcess, float]:
    """`workbench ARGS` in a fresh process (as a user types it); (the finished process, its wall seconds)."""
    env = {**os.environ, "PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    env.pop("TRITON_INTERPRET", None)
    logs = os.environ.get("WB_GPU_CI_LOGS")  # stderr streamed to a file as it comes: a killed call keeps it
    t0 = time.perf_counter()
    if logs:
        Path(logs).mkdir(parents=True, exist_ok=True)
        stem = re.sub(r"[^A-Za-z0-9_.-]+", "_", " ".join(args[:2]))[:60]
        log = Path(logs) / f"{stem}.log"
        n = 1
        while log.exists():  # the same path run twice (a resume) keeps both logs
            n += 1
            log = Path(logs) / f"{stem}.{n}.log"
        with open(log, "w", encoding="utf-8") as err:
            try:
                done = subprocess.run([sys.executable, "-m", "workbench.cli", *args], cwd=cwd or REPO, env=env,
                                      stdout=subprocess.PIPE, stderr=err, text=True, timeout=timeout)
            finally:
                err.flush()
        proc = subprocess.CompletedProcess(done.args, done.returncode, done.stdout, log.read_text())
    else:
        proc = subprocess.run([sys.executable, "-m", "workbench.cli", *args], cwd=cwd or REPO, env=env,
                              capture_output=True, text=True, timeout=timeout)
    wall = time.perf_counter() - t0
    record(" ".join(args[:2]), wall, proc.returncode)
    return proc, wall


def record(path: str, wall_s: float, rc: int, **extra: object) -> None:
    """One line per user path into `WB_GPU_CI_TIMES` (a JSON-lines file the GPU CI log keeps), with `extra`
    (an evaluation's own phase times, say)."""
    out = os.environ.get("WB_GPU_CI_TIMES")
    if out:
        with open(out, "a", encoding="utf-8") as f:
            f.write(json.dumps({"path": path, "wall_s": round(wall_s, 2), "rc": rc, **extra}, default=str) + "\n")


def explain(proc: subprocess.CompletedProcess) -> str:
    return f"exit {proc.returncode}\n--- stdout\n{proc.stdout[-4000:]}\n--- stderr\n{proc.stderr[-6000:]}"


def keep(path: Path, name: str) -> None:
    """Copy a file a path wrote (a suite's report) next to the logs, when the GPU CI keeps them."""
    logs = os.environ.get("WB_GPU_CI_LOGS")
    if logs and path.is_file():
        Path(logs).mkdir(parents=True, exist_ok=True)
        (Path(logs) / name).write_bytes(path.read_bytes())


def keep_runs(run_dir: Path, prefix: str) -> None:
    """Every suite run under `run_dir`: its problems' records (phases, the harness's timings) as JSON lines,
    kept beside the logs whether the test passed or not (a slow path says where its time went)."""
    import sqlite3

    logs = os.environ.get("WB_GPU_CI_LOGS")
    if not logs:
        return
    Path(logs).mkdir(parents=True, exist_ok=True)
    for db in sorted(run_dir.glob("*/suite.sqlite")):
        try:
            con = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5)
            rows = con.execute("SELECT problem_id, status, record_json FROM problems ORDER BY seq").fetchall()
            con.close()
        except sqlite3.Error as exc:
            rows = [("?", f"unreadable: {exc}", None)]
        with open(Path(logs) / f"{prefix}_{db.parent.name}.records.jsonl", "w", encoding="utf-8") as f:
            for pid, status, rec in rows:
                f.write(json.dumps({"problem_id": pid, "status": status,
                                    "record": json.loads(rec) if rec else None}) + "\n")

