"""The red team's mechanisms (issue 15), one candidate each in hostile/, against the hostile-candidate harness.

With the static policy on (the default), each must end as its docstring's EXPECT line says, its violation
named. The sandbox escapes run a second time with the policy off: the OS isolation alone must leave no
trace (no file outside, no secret in any output, no process left, no change to another job's result).
Each runs on the CPU and, under `pytest -m gpu`, on the GPU (`devices.py`).
"""
from __future__ import annotations

import os
import re
import subprocess
import time
from pathlib import Path

import pytest

from tests.harness.devices import DEVICES, sized
from workbench.harness import Harness
from workbench.result import Status

HERE = Path(__file__).parent
ROOT = HERE.parents[1]
SPEC = ROOT / "examples" / "vector_add" / "spec.py"
HONEST = SPEC.parent / "candidate.py"
HOSTILE = sorted((HERE / "hostile").glob("*.py"))
CANARY = "sk-canary-hostile-0123456789abcdef"
TRACES = ["/tmp/wb_hostile_dirfd.txt", "/tmp/wb_hostile_symlink", "/tmp/wb_hostile_link", "/tmp/wb_hostile_daemon",
          "/tmp/wb_hostile_collect_env", "/tmp/wb_hostile_fake_site", "/tmp/wb_hostile_cffi"]
ESCAPES = ["dir_fd_write", "proc_snoop", "daemon_fork_exec", "collect_env_shell", "fake_site_packages", "cffi_libc",
           "renices_reference", "forges_other_pipes", "poisons_input_cache", "rebinds_harness_globals"]


def _expectation(path: Path) -> tuple[str, str | None]:
    m = re.search(r"EXPECT status=(\w+)(?: violation=(\S+))?", path.read_text())
    assert m, f"{path.name} states no expectation"
    return m.group(1), m.group(2)


@pytest.fixture(scope="module", params=DEVICES)
def harness(request):
    mp = pytest.MonkeyPatch()
    mp.setenv("OPENAI_API_KEY", CANARY)  # in the test process's environment, as a user's key would be
    for t in TRACES:
        Path(t).unlink(missing_ok=True)
    with Harness(device=request.param) as h:
        yield h
    mp.undo()


@pytest.mark.parametrize("path", HOSTILE, ids=[p.stem for p in HOSTILE])
def test_hostile_candidate_is_caught(harness: Harness, path: Path) -> None:
    status, violation = _expectation(path)
    res = harness.evaluate(SPEC, path, **sized(harness.device, 3), timeout_s=120)
    assert res.status == Status(status), f"{path.name}: {res.status.value}: {res.error[:400]} {res.violations}"
    if status != "passed":
        assert res.fitness == 0.0 and not res.correct
        assert res.error
    if violation:
        assert any(v.startswith(violation) for v in res.violations), (path.name, res.violations)
    assert CANARY not in res.to_json()


def test_memo_never_hits(harness: Harness) -> None:
    res = harness.evaluate(SPEC, HERE / "hostile" / "memo_by_elements.py", **sized(harness.device, 3))
    assert res.passed, res.error
    assert "memo hits" not in res.stdout_tail  # every repetition saw fresh inputs


def _uid_processes(uid: int) -> list[str]:
    out = subprocess.run(["ps", "-o", "pid=,args=", "-u", str(uid)], capture_output=True, text=True)
    return [line for line in out.stdout.splitlines() if line.strip()]


@pytest.mark.parametrize("name", ESCAPES)
def test_escape_without_policy_leaves_no_trace(harness: Harness, name: str) -> None:
    res = harness.evaluate(SPEC, HERE / "hostile" / f"{name}.py", **sized(harness.device, 1), timeout_s=120,
                           policy=False)
    assert CANARY not in res.to_json()  # nothing of the user's environment, through any output
    uid = res.isolation.get("uid")
    assert uid and uid != os.getuid(), res.isolation
    assert all(res.isolation["own_namespaces"].values()), res.isolation
    time.sleep(0.2)
    assert _uid_processes(uid) == [], "a process of the candidate's uid outlived its job"
    for t in TRACES:
        assert not os.path.lexists(t), f"{name} left {t} outside its sandbox"
    if harness.device == "cpu":  # the GPU checks the next jobs once, after all the escapes (its budget)
        _next_jobs_are_untouched(harness)


def _next_jobs_are_untouched(harness: Harness) -> None:
    """An honest candidate passes, a wrong one still fails."""
    ok = harness.evaluate(SPEC, HONEST, **sized(harness.device, 1))
    assert ok.passed, ok.summary()
    wrong = harness.evaluate(SPEC, HONEST.read_text().replace("a + b * scale", "a - b * scale"),
                             **sized(harness.device, 1))
    assert wrong.status == Status.INCORRECT, wrong.summary()


def test_the_next_jobs_are_untouched_after_every_escape(harness: Harness) -> None:
    for t in TRACES:
        assert not os.path.lexists(t), f"an escape left {t} outside its sandbox"
    _next_jobs_are_untouched(harness)


def test_isolation_is_reported(harness: Harness) -> None:
    res = harness.evaluate(SPEC, HONEST, **sized(harness.device, 1))
    iso = res.isolation
    assert iso["enforced"] and iso["missing"] == [], iso
    assert iso["claimed"]["readonly_root"] and iso["claimed"]["private_proc"] and iso["claimed"]["no_new_privs"]
    assert set(iso["own_namespaces"]) == {"pid", "mnt", "net", "ipc", "uts"}


@pytest.mark.parametrize("device", DEVICES)
def test_missing_isolation_is_said(monkeypatch, device: str) -> None:
    monkeypatch.setenv("WB_SANDBOX", "off")
    with Harness(device=device) as h:
        res = h.evaluate(SPEC, HONEST, **sized(device, 1))
    assert res.passed, res.summary()
    assert res.isolation["enforced"] is False
    assert any("not isolated" in m for m in res.isolation["missing"])


def test_sandbox_tmp_is_writable_by_the_candidate(harness: Harness) -> None:
    res = harness.evaluate(SPEC, HERE / "specs" / "tmpdir_candidate.py", **sized(harness.device, 1), policy=False)
    assert res.passed, res.error
