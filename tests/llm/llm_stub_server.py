"""A scripted OpenAI-compatible HTTP server on a thread, for the retry/auth/timeout tests.

Each request pops the next scripted `Reply` (the last one repeats), so a test states exactly what the
endpoint does: "429 with Retry-After: 1, then 200". Every request is recorded with its headers.
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Reply:
    status: int = 200
    body: Any = None  # dict -> JSON; str -> raw text; None -> a chat completion
    headers: dict[str, str] = field(default_factory=dict)
    delay_s: float = 0.0


def completion(
    text: str = "```python\nclass ModelNew:\n    pass\n```",
    prompt_tokens: int = 11,
    completion_tokens: int = 7,
    model: str = "stub-model",
    finish: str = "stop",
) -> dict:
    return {
        "id": "cmpl-1",
        "object": "chat.completion",
        "model": model,
        "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": finish}],
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        },
    }


@dataclass
class Recorded:
    method: str
    path: str
    headers: dict[str, str]
    body: Any
    t: float


class StubServer:
    def __init__(self) -> None:
        self.script: list[Reply] = [Reply()]
        self.requests: list[Recorded] = []
        self._lock = threading.Lock()
        stub = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:  # keep pytest output clean
                pass

            def _serve(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                try:
                    body = json.loads(raw) if raw else None
                except ValueError:
                    body = raw.decode(errors="replace")
                with stub._lock:
                    stub.requests.append(
                        Recorded(self.command, self.path, dict(self.headers.items()), body, time.monotonic())
                    )
                    reply = stub.script.pop(0) if len(stub.script) > 1 else stub.script[0]
                if reply.delay_s:
                    time.sleep(reply.delay_s)
                payload = reply.body if reply.body is not None else completion()
                data = payload.encode() if isinstance(payload, str) else json.dumps(payload).encode()
                try:
                    self.send_response(reply.status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    for k, v in reply.headers.items():
                        self.send_header(k, v)
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):  # the client timed out and left
                    pass

            do_GET = _serve
            do_POST = _serve

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        self._thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self._thread.start()

    def set(self, *replies: Reply) -> None:
        with self._lock:
            self.script = list(replies)
            self.requests.clear()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
