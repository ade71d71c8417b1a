"""Line-delimited JSON between the trusted server and a child process, every message tagged with the job's nonce.

The child side (`Channel`) blocks on its command pipe; the server side (`Link`) reads with a deadline and a
resident-memory watch. A message without the job's nonce, or not the one the server expects next, is a
forgery (`ProtocolError`): the only writer of a child's report pipe is that child, so a forged line can only
come from the candidate itself.
"""
from __future__ import annotations

import json
import os
import select
import time
from typing import Any

from workbench.harness import messages


class ProtocolError(Exception):
    """A child sent something other than the message the protocol expects."""


class ChildGone(Exception):
    """The child's pipe closed, it overran its deadline or its memory: `why` says which."""

    def __init__(self, why: str) -> None:
        super().__init__(why)
        self.why = why


# Bound at import, before any candidate code exists: the candidate's process runs `Channel` after `done`.
_os_read, _os_write, _loads, _dumps = os.read, os.write, json.loads, json.dumps


def _write_all(fd: int, data: bytes) -> None:
    while data:
        n = _os_write(fd, data)
        data = data[n:]


class Channel:
    """The child's end: `recv()` blocks on the command pipe; `send()` tags every report with the nonce."""

    def __init__(self, cmd_fd: int, report_fd: int) -> None:
        self.cmd_fd = cmd_fd
        self.report_fd = report_fd
        self._buf = b""
        self.nonce = ""

    def recv(self) -> dict[str, Any]:
        while b"\n" not in self._buf:
            chunk = _os_read(self.cmd_fd, 1 << 16)
            if not chunk:
                raise EOFError("the server closed the command pipe")
            self._buf += chunk
        line, _, self._buf = self._buf.partition(b"\n")
        msg = _loads(line)
        if "n" in msg:
            self.nonce = msg["n"]
        return msg

    def send(self, msg: dict[str, Any]) -> None:
        _write_all(self.report_fd, (_dumps({**msg, "n": self.nonce}) + "\n").encode())


# The harness calls these, never `chan.recv`: a method the candidate put on the class is not looked up.
channel_recv, channel_send = Channel.recv, Channel.send


def rss_bytes(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


class Link:
    """The server's end of one child: commands out, reports in, each report checked against the nonce."""

    def __init__(self, pid: int, cmd_w: int, report_r: int, nonce: str, strict: bool = False) -> None:
        self.pid = pid              # the process the server forked (for the candidate: the namespace's parent)
        self.watch_pid = pid        # whose memory to watch and whose syscall to read (the namespace's init)
        self.cmd_w = cmd_w
        self.report_r = report_r
        self.nonce = nonce
        self._buf = b""
        self.rss_limit = 0
        self.strict = strict        # a candidate's link: every line goes through `messages.parse_candidate`

    def send(self, msg: dict[str, Any]) -> None:
        try:
            _write_all(self.cmd_w, (json.dumps({**msg, "n": self.nonce}) + "\n").encode())
        except (BrokenPipeError, OSError) as e:
            raise ChildGone("exited") from e

    def recv(self, deadline: float, expect: str | None = None) -> dict[str, Any]:
        """The next report; `expect` names the key it must carry (any report may be a `failure`)."""
        while b"\n" not in self._buf:
            left = deadline - time.monotonic()
            if left <= 0:
                raise ChildGone("timeout")
            ready, _, _ = select.select([self.report_r], [], [], min(left, 0.2))
            if ready:
                chunk = os.read(self.report_r, 1 << 16)
                if not chunk:
                    raise ChildGone("exited")
                self._buf += chunk
                if self.strict and len(self._buf) > messages.MAX_LINE and b"\n" not in self._buf:
                    raise ProtocolError(f"a report line over {messages.MAX_LINE} bytes")
            if self.rss_limit and rss_bytes(self.watch_pid) > self.rss_limit:
                raise ChildGone("memory")
        line, _, self._buf = self._buf.partition(b"\n")
        if self.strict:
            try:
                return messages.parse_candidate(line, self.nonce, expect)
            except messages.SchemaError as e:
                raise ProtocolError(str(e)) from e
        try:
            msg = json.loads(line)
        except json.JSONDecodeError as e:
            raise ProtocolError(f"unparseable report {line[:80]!r}") from e
        if not isinstance(msg, dict) or msg.get("n") != self.nonce:
            raise ProtocolError(f"report without this job's nonce: {line[:80]!r}")
        if expect is not None and expect not in msg and "failure" not in msg:
            raise ProtocolError(f"expected {expect!r}, got keys {sorted(msg)[:6]}")
        return msg
