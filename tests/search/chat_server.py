"""A minimal OpenAI-compatible chat endpoint on a thread: each request gets the next scripted reply
text (the last repeats). The search's LLM tests drive the real `openai` provider through it."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class ChatServer:
    def __init__(self, replies: list[str], status: int = 200) -> None:
        self.replies = list(replies)
        self.status = status
        self.requests: list[dict] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *a) -> None:  # keep pytest output clean
                pass

            def do_GET(self) -> None:  # /v1/models
                self._send({"object": "list", "data": [{"id": "stub", "object": "model"}]})

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
                outer.requests.append(body)
                if outer.status != 200:
                    return self._send({"error": {"message": "denied", "type": "auth"}}, outer.status)
                text = outer.replies[min(len(outer.requests) - 1, len(outer.replies) - 1)]
                self._send(
                    {
                        "id": "c",
                        "object": "chat.completion",
                        "model": "stub",
                        "choices": [
                            {
                                "index": 0,
                                "message": {"role": "assistant", "content": text},
                                "finish_reason": "stop",
                            }
                        ],
                        "usage": {"prompt_tokens": 100, "completion_tokens": 50, "total_tokens": 150},
                    }
                )

            def _send(self, obj: dict, status: int = 200) -> None:
                data = json.dumps(obj).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self) -> "ChatServer":
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
