"""The after-`done` check (`job_pipeline.idle_after_done`) must not call an honest process's arrival at its
read "work after done" when the arrival falls between the check's two looks at /proc (measured 1 in 60
runs on the 2-core host): asleep past 0.5 s is work only if it is still not blocked in its read."""
from workbench.harness import job_pipeline as jp


def _fake(monkeypatch, blocked: list[bool], runnable: bool, cpu_ns: list[int]) -> None:
    looks = iter(blocked)
    cpus = iter(cpu_ns)
    clock = iter([0.0] + [0.6] * 20)  # t0, then every later look is past the 0.5 s bound
    monkeypatch.setattr(jp, "_blocked_in_read", lambda pid: next(looks))
    monkeypatch.setattr(jp, "_runnable", lambda pid: runnable)
    monkeypatch.setattr(jp, "_thread_cpu_ns", lambda pid: next(cpus))
    monkeypatch.setattr(jp.time, "monotonic", lambda: next(clock))
    monkeypatch.setattr(jp.time, "sleep", lambda s: None)


def test_reaching_the_read_between_the_two_looks_is_idle(monkeypatch):
    # first look: still running toward its read; by the second it sleeps in read() (not runnable)
    _fake(monkeypatch, blocked=[False, True], runnable=False, cpu_ns=[0, 100_000, 100_000])
    assert jp.idle_after_done(1234, cpu_ms=3.0) is True


def test_asleep_elsewhere_past_the_bound_is_still_work(monkeypatch):
    # waiting on a thread that works on: never in its read
    _fake(monkeypatch, blocked=[False, False], runnable=False, cpu_ns=[0, 100_000, 100_000])
    assert jp.idle_after_done(1234, cpu_ms=3.0) is False


def test_reaching_the_read_after_spending_cpu_is_still_work(monkeypatch):
    _fake(monkeypatch, blocked=[False, True], runnable=False, cpu_ns=[0, 100_000, 50_000_000])
    assert jp.idle_after_done(1234, cpu_ms=3.0) is False


def test_a_refusal_says_which_rule_fired(monkeypatch):
    monkeypatch.setattr(jp, "_syscall", lambda pid: "202")
    _fake(monkeypatch, blocked=[False, False], runnable=False, cpu_ns=[0, 100_000, 100_000])
    why: list[str] = []
    assert jp.idle_after_done(1234, cpu_ms=3.0, why=why) is False
    assert len(why) == 1 and why[0].startswith("asleep off its command pipe (syscall 202")
    _fake(monkeypatch, blocked=[False, True], runnable=False, cpu_ns=[0, 100_000, 50_000_000])
    why.clear()
    assert jp.idle_after_done(1234, cpu_ms=3.0, why=why) is False
    assert why[0].startswith("50.00 ms of CPU before its read, over 3 ms")
    _fake(monkeypatch, blocked=[False, True], runnable=False, cpu_ns=[0, 100_000, 100_000])
    why.clear()
    assert jp.idle_after_done(1234, cpu_ms=3.0, why=why) is True and why == []
