"""The candidate's side of the rounds runs no cyclic collection from `go` until it reads its next command: a
collection landing after `done` is CPU time the server's after-`done` check counts as the candidate's work
(honest ATen kernels were `reported_done_early` on the H100). Driven over real pipes, as the server does."""
from __future__ import annotations

import contextlib
import gc
import json
import os
import threading

from workbench.harness import rounds
from workbench.harness.channel import Channel


def test_no_collection_from_go_until_the_next_command_is_read() -> None:
    cmd_r, cmd_w = os.pipe()
    rep_r, rep_w = os.pipe()
    seen: dict[str, bool] = {}
    closed: list[int] = []

    def call(inputs: list) -> int:
        seen["forward"] = gc.isenabled()
        return inputs[0] * 2

    def save(k: int, which: list[int], outs: list, samples: list[int] | None) -> None:
        seen["save"] = gc.isenabled()

    def server() -> None:
        reports = os.fdopen(rep_r, "rb")

        def say(msg: dict) -> None:
            os.write(cmd_w, (json.dumps(msg) + "\n").encode())

        def heard() -> dict:
            return json.loads(reports.readline())

        try:
            say({"stage": 0, "n": "job"})
            assert heard()["staged"] == 0
            say({"go": 0, "record": False})
            assert heard()["done"] == 0
            seen["after_done"] = gc.isenabled()  # the child now waits for this order, collector still off
            say({"save": 0, "which": [0]})
            assert heard()["saved"] == 0
            say({"end": True})
        except Exception as exc:  # noqa: BLE001 - end the child's wait (EOF) rather than hang the test
            seen["server_failed"] = repr(exc)  # type: ignore[assignment]
            os.close(cmd_w)
            closed.append(cmd_w)
        finally:
            reports.close()

    gc.enable()
    t = threading.Thread(target=server)
    t.start()
    try:
        with contextlib.suppress(EOFError):
            rounds.serve(Channel(cmd_r, rep_w), call, lambda msg: [[3]], save, lambda: None,
                         contextlib.nullcontext)
    finally:
        gc.enable()
        os.close(rep_w)  # the server thread's read ends if the child side stopped early
        t.join(timeout=30)
        for fd in (cmd_r, cmd_w):
            if fd not in closed:
                os.close(fd)
    assert seen == {"forward": False, "after_done": False, "save": True}, seen
