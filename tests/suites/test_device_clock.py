"""The GPU's clock as a readers-writer lock across processes (`platforms.clock`): untimed GPU work holds it
shared and runs side by side, a timed window holds it exclusive and runs alone, a waiting window is not
starved by a stream of shared holders, and two shared holders opening their windows at once both get them.
Checked with the real `flock`s between real processes (WB_CLOCK_CPU=1 makes the CPU's clock a real one)."""
from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

# argv: a plan of steps, each "s<seconds>" (hold shared that long), "x<seconds>" (exclusive) or
# "sx<a>,<b>" (shared a seconds, then a timed window of b seconds inside the shared hold, then shared again
# for a), "m<seconds>"/"M<seconds>" (the memory lock shared/exclusive). Prints "<step> <t_start> <waited>"
# when each hold is taken and "<step> end <t>" when it ends.
HOLDER = """
import sys, time
from platforms.clock import device_busy, device_clock, device_memory
print("asking", flush=True)
for step in sys.argv[1:]:
    if step.startswith("sx"):
        a, b = map(float, step[2:].split(","))
        with device_busy("cpu") as w:
            print(f"{step} {time.time():.3f} {w:.3f}", flush=True)
            time.sleep(a)
            with device_clock("cpu") as w2:
                print(f"{step}:window {time.time():.3f} {w2:.3f}", flush=True)
                time.sleep(b)
            print(f"{step}:after {time.time():.3f}", flush=True)
            time.sleep(a)
    else:
        hold = {"x": device_clock, "s": device_busy, "m": device_memory,
                "M": lambda d: device_memory(d, exclusive=True)}[step[0]]
        with hold("cpu") as w:
            print(f"{step} {time.time():.3f} {w:.3f}", flush=True)
            time.sleep(float(step[1:]))
    print(f"{step} end {time.time():.3f}", flush=True)
"""


def _env(tmp_path: Path) -> dict[str, str]:
    return {**os.environ, "WB_CLOCK_DIR": str(tmp_path), "WB_CLOCK_CPU": "1", "PYTHONPATH": str(REPO)}


def _start(tmp_path: Path, *plan: str) -> subprocess.Popen:
    proc = subprocess.Popen([sys.executable, "-c", HOLDER, *plan], stdout=subprocess.PIPE, text=True,
                            env=_env(tmp_path))
    assert proc.stdout.readline().strip() == "asking"
    return proc


class _Events(dict):
    def __missing__(self, key: str) -> float:
        raise AssertionError(f"no {key!r} in the holder's output:\n{self.get('out')}")


def _events(proc: subprocess.Popen) -> dict[str, float]:
    """Every line of a finished holder: step (or step:end, step:window, ...) -> time."""
    out = proc.stdout.read()  # not communicate(timeout=): it reads the pipe past what readline() buffered
    assert proc.wait(timeout=120) == 0, out
    got = _Events(out=out)
    for line in out.splitlines():
        parts = line.split()
        got[parts[0] + (":end" if parts[1] == "end" else "")] = float(parts[2] if parts[1] == "end" else parts[1])
    return got


def test_shared_holders_overlap_and_a_window_waits_for_them_all(tmp_path):
    first = _start(tmp_path, "s2.0")
    second = _start(tmp_path, "s2.5")
    time.sleep(0.3)  # both hold it shared now
    window = _start(tmp_path, "x0.5")
    e1, e2, ew = _events(first), _events(second), _events(window)
    assert abs(e1["s2.0"] - e2["s2.5"]) < 1.0, (e1, e2)  # side by side
    assert ew["x0.5"] >= e2["s2.5:end"] - 0.05, (e2, ew)  # the window opened only after the last shared left


def test_untimed_work_waits_while_a_window_is_open(tmp_path):
    window = _start(tmp_path, "x2.0")
    time.sleep(0.3)
    work = _start(tmp_path, "s0.1")
    ew, es = _events(window), _events(work)
    assert es["s0.1"] >= ew["x2.0:end"] - 0.05, (ew, es)


def test_a_waiting_window_is_not_starved_by_later_shared_holders(tmp_path):
    """Shared holders keep arriving while a window waits: the gate makes the later ones queue behind it."""
    first = _start(tmp_path, "s2.0")
    time.sleep(0.3)
    window = _start(tmp_path, "x1.0")
    time.sleep(0.5)  # the window waits at the lock, holding the gate
    later = _start(tmp_path, "s0.1")
    e1, ew, el = _events(first), _events(window), _events(later)
    assert ew["x1.0"] >= e1["s2.0:end"] - 0.05, (e1, ew)
    assert el["s0.1"] >= ew["x1.0:end"] - 0.05, (ew, el)  # behind the window, not beside the first


def test_two_shared_holders_opening_windows_at_once_both_get_them_one_at_a_time(tmp_path):
    """Each gives its shared hold up while it queues for its window (else each would wait for the other's
    shared hold forever), and takes it back after: the two windows never overlap, and the shared work after
    a window waits for the other's window to close."""
    a = _start(tmp_path, "sx0.5,1.0")
    b = _start(tmp_path, "sx0.5,1.0")
    ea, eb = _events(a), _events(b)
    wa, wb = ea["sx0.5,1.0:window"], eb["sx0.5,1.0:window"]
    first, second = (ea, eb) if wa < wb else (eb, ea)
    assert max(wa, wb) - min(wa, wb) >= 0.95, (ea, eb)  # one window after the other
    # the second waited for its window at the gate: the first's shared hold came back only after the second's
    # window closed (a window runs alone)
    assert first["sx0.5,1.0:after"] >= second["sx0.5,1.0:window"] + 0.95, (first, second)


def test_holds_nest_within_a_process(tmp_path, monkeypatch):
    """A window inside this process's own window, or shared work inside either, takes nothing again (no wait
    on its own lock); the file is unlocked and closed when the outermost hold ends."""
    from platforms import clock

    monkeypatch.setenv("WB_CLOCK_DIR", str(tmp_path))
    monkeypatch.setenv("WB_CLOCK_CPU", "1")
    with clock.device_busy("cpu") as w0:
        with clock.device_clock("cpu") as w1, clock.device_clock("cpu") as w2, clock.device_busy("cpu") as w3:
            assert (w1 < 1.0) and w2 == 0.0 and w3 == 0.0
        with clock.device_busy("cpu") as w4:
            assert w4 == 0.0
    assert w0 < 1.0
    hold = clock._holds[clock.lock_path("cpu")]
    assert hold.fd == -1 and hold.shared == 0 and hold.exclusive == 0
    # and another process gets it exclusive at once now
    other = _start(tmp_path, "x0.0")
    got = _events(other)
    assert got["x0.0:end"] - got["x0.0"] < 0.5


def test_a_job_waiting_for_the_memory_alone_holds_off_no_timed_window(tmp_path):
    """The memory lock's gate is its own: while a job waits to hold the device's memory exclusive (behind
    another job's shared hold), the jobs already running still open and close their timed windows, which
    take the clock's gate (one gate for both deadlocked the first GPU run: each side waited for the other)."""
    running = _start(tmp_path, "m3.0")
    time.sleep(0.3)
    alone = _start(tmp_path, "M0.1")  # waits for `running`, holding the memory lock's gate
    time.sleep(0.5)
    job = _start(tmp_path, "sx0.1,0.1", "x0.1")  # a running job's untimed step, its window, another window
    ej, er, ea = _events(job), _events(running), _events(alone)
    assert ej["x0.1:end"] < er["m3.0:end"] - 1.0, (ej, er)  # done well before the memory was free
    assert ea["M0.1"] >= er["m3.0:end"] - 0.05, (er, ea)


JOBS = """
import sys, time, random
from platforms.clock import device_busy, device_clock, device_memory
rng = random.Random(int(sys.argv[1]))
for j in range(int(sys.argv[2])):
    with device_memory("cpu", exclusive=rng.random() < 0.15):  # a job; now and then one that needs it alone
        with device_busy("cpu"):
            time.sleep(rng.random() * 0.05)
            with device_clock("cpu"):  # the baseline's window
                time.sleep(rng.random() * 0.02)
            time.sleep(rng.random() * 0.05)
            with device_clock("cpu"):  # the candidate's
                time.sleep(rng.random() * 0.02)
            time.sleep(rng.random() * 0.03)
    if rng.random() < 0.3:  # a compile baseline: its inputs shared, its compile outside, its window
        with device_memory("cpu"):
            with device_busy("cpu"):
                time.sleep(0.01)
            time.sleep(rng.random() * 0.05)
            with device_clock("cpu"):
                time.sleep(0.01)
print("done", flush=True)
"""


def test_jobs_and_compile_baselines_of_eight_servers_all_finish(tmp_path):
    """Eight processes, each a server's jobs (memory shared or, now and then, exclusive; untimed steps and two
    windows inside) and compile baselines, with random lengths: every one finishes (with the two locks on one
    gate every run deadlocked within seconds)."""
    procs = [subprocess.Popen([sys.executable, "-c", JOBS, str(i), "15"], stdout=subprocess.PIPE, text=True,
                              env=_env(tmp_path)) for i in range(8)]
    try:
        outs = [p.communicate(timeout=90)[0] for p in procs]
    finally:
        for p in procs:
            p.kill()
    assert all(o.strip() == "done" for o in outs), outs


def test_shared_holds_can_be_turned_off(tmp_path, monkeypatch):
    """`WB_CLOCK_SHARED=off`: untimed work no longer waits for a window (the way out, should one stall)."""
    from platforms import clock

    window = _start(tmp_path, "x1.5")
    assert window.stdout.readline().startswith("x1.5 ")  # it holds the window now
    monkeypatch.setenv("WB_CLOCK_DIR", str(tmp_path))
    monkeypatch.setenv("WB_CLOCK_CPU", "1")
    monkeypatch.setenv("WB_CLOCK_SHARED", "off")
    t0 = time.time()
    with clock.device_busy("cpu") as waited:
        assert waited == 0.0
    assert time.time() - t0 < 0.5
    _events(window)
