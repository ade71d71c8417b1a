"""The local-server watcher: a server that dies under a client is reported with its signal and log tail.

A stand-in server (plain Python, no llama.cpp) answers /v1/models, then kills itself with SIGSEGV on its
first chat request, as the natively built llama.cpp did at its first token.
"""

from __future__ import annotations

import signal
import sys
import textwrap
from pathlib import Path

import httpx
import pytest

from workbench.llm.local_server import LlamaServer, ServerDied, describe_exit

DYING_SERVER = textwrap.dedent('''
    import os, signal, sys
    from http.server import BaseHTTPRequestHandler, HTTPServer
    port = int(sys.argv[1])
    class H(BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(200); self.send_header("Content-Type", "application/json"); self.end_headers()
            self.wfile.write(b'{"data": [{"id": "fake"}]}')
        def do_POST(self):
            print("generating the first token", flush=True)
            os.kill(os.getpid(), signal.SIGSEGV)
    print("fake server listening", flush=True)
    HTTPServer(("127.0.0.1", port), H).serve_forever()
''')


def _dying(tmp_path: Path) -> LlamaServer:
    script = tmp_path / "dying_server.py"
    script.write_text(DYING_SERVER)
    srv = LlamaServer(tmp_path / "model.gguf", tmp_path / "server.log", ready_timeout_s=30)
    srv.cmd = [sys.executable, str(script), str(srv.port)]
    return srv


def test_describe_exit() -> None:
    assert describe_exit(-signal.SIGSEGV) == "killed by signal SIGSEGV (11)"
    assert describe_exit(3) == "exited with code 3"


def test_death_under_a_client_is_one_line_with_signal_and_log(tmp_path: Path) -> None:
    with _dying(tmp_path) as srv:
        assert srv.death() is None
        with pytest.raises(ServerDied) as ei:
            with srv.watch():
                httpx.post(f"{srv.url}/chat/completions", json={}, timeout=10)
        line = str(ei.value)
        assert "\n" not in line
        assert "killed by signal SIGSEGV (11)" in line
        assert "generating the first token" in line  # the log tail travels with it
        assert srv.death() == line  # still dead, same line


def test_death_after_a_block_that_swallowed_the_error(tmp_path: Path) -> None:
    # a search turns client errors into diagnoses and returns normally: watch() still says the server died
    with _dying(tmp_path) as srv:
        with pytest.raises(ServerDied, match="SIGSEGV"):
            with srv.watch():
                try:
                    httpx.post(f"{srv.url}/chat/completions", json={}, timeout=10)
                except httpx.HTTPError:
                    pass


def test_death_while_starting(tmp_path: Path) -> None:
    srv = LlamaServer(tmp_path / "model.gguf", tmp_path / "server.log", ready_timeout_s=30)
    srv.cmd = [sys.executable, "-c", "import sys; print('cannot load model'); sys.exit(3)"]
    with pytest.raises(ServerDied, match=r"exited with code 3 while starting; log tail: cannot load model"):
        srv.start()
    srv.stop()
