"""The pre-warmed worker process (`workbench.worker.WarmWorker`): ready line, answers, restart, loss."""
from __future__ import annotations

import json

import pytest

from workbench.worker import WarmWorker, WorkerLost


def test_a_worker_answers_and_is_started_once() -> None:
    w = WarmWorker("tests.worker_echo", name="echo worker")
    try:
        assert not w.running
        line, startup = w.request({"x": 1}, timeout_s=30)
        assert json.loads(line)["echo"] == {"x": 1} and startup > 0 and w.running
        pid = json.loads(line)["pid"]
        line, startup = w.request({"x": 2}, timeout_s=30)
        assert json.loads(line)["pid"] == pid and startup == 0.0
    finally:
        w.close()
    assert not w.running


def test_a_request_that_kills_it_twice_is_lost_and_the_next_one_starts_a_new_worker() -> None:
    w = WarmWorker("tests.worker_echo", name="echo worker")
    try:
        with pytest.raises(WorkerLost):
            w.request({"die": True}, timeout_s=30)
        line, startup = w.request({"x": 3}, timeout_s=30)
        assert json.loads(line)["echo"] == {"x": 3} and startup > 0
    finally:
        w.close()


def test_a_worker_that_does_not_answer_in_time_is_lost() -> None:
    w = WarmWorker("tests.worker_echo", name="echo worker")
    try:
        with pytest.raises(WorkerLost):
            w.request({"hang": True}, timeout_s=0.5)
    finally:
        w.close()


def test_a_worker_that_never_says_ready_fails_to_start() -> None:
    w = WarmWorker("json.tool", name="not a worker", startup_timeout_s=5)  # reads stdin, prints nothing
    with pytest.raises(RuntimeError, match="failed to start"):
        w.start()
    assert not w.running
