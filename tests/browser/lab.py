"""JupyterLab and headless Chromium for the browser tests: start both, drive a notebook through the UI,
and stop every process started, by PID.

The server runs from this checkout with a random token, on a free loopback port, with autosave off (Run
All must never write a notebook back) and without MPLBACKEND, as a user's `make lab` would. Its settings,
workspaces and runtime files live in a temporary folder.
"""
from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM_FLAGS = [  # what Chromium needs on these machines (no sandbox as root, no network but loopback)
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
    "--disable-dev-shm-usage", "--window-size=1400,1000",
]
# JupyterLab user settings: no autosave; every cell in the DOM (4.x renders only the visible ones by
# default, and the test reads every output); nothing that would reach the network.
LAB_SETTINGS = {
    "@jupyterlab/docmanager-extension/plugin.jupyterlab-settings": {"autosave": False},
    "@jupyterlab/notebook-extension/tracker.jupyterlab-settings": {"windowingMode": "none"},
    "@jupyterlab/apputils-extension/notification.jupyterlab-settings": {"fetchNews": "false",
                                                                        "checkForUpdates": False},
    "@jupyterlab/extensionmanager-extension/plugin.jupyterlab-settings": {"enabled": False},
}


def browser_tools() -> tuple[str | None, str | None]:
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    return chromium, shutil.which("chromedriver")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def descendants(pid: int) -> list[int]:
    """Every live process below `pid` (read from /proc), children first."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    out, todo = [], list(children.get(pid, []))
    while todo:
        p = todo.pop()
        out.append(p)
        todo += children.get(p, [])
    return out


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    stat = Path(f"/proc/{pid}/stat")
    return stat.exists() and stat.read_text().rsplit(")", 1)[1].split()[0] != "Z"


def stop_pids(pids: list[int], timeout: float = 10.0) -> list[int]:
    """SIGTERM each PID, then SIGKILL what is left after `timeout`; returns those still alive."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for p in pids:
            if alive(p):
                try:
                    os.kill(p, sig)
                except ProcessLookupError:
                    pass
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and any(alive(p) for p in pids):
            time.sleep(0.1)
    return [p for p in pids if alive(p)]


class Lab:
    """A JupyterLab server on a free port; `stop()` ends it, its kernels and anything else below it."""

    def __init__(self, workdir: Path):
        self.token = secrets.token_hex(16)
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        settings = workdir / "settings"
        for rel, value in LAB_SETTINGS.items():
            f = settings / rel
            f.parent.mkdir(parents=True, exist_ok=True)
            f.write_text(json.dumps(value))
        env = {k: v for k, v in os.environ.items() if k != "MPLBACKEND"}
        env.update(JUPYTERLAB_SETTINGS_DIR=str(settings), JUPYTERLAB_WORKSPACES_DIR=str(workdir / "workspaces"),
                   JUPYTER_RUNTIME_DIR=str(workdir / "runtime"), JUPYTER_CONFIG_DIR=str(workdir / "config"),
                   TRITON_INTERPRET=env.get("TRITON_INTERPRET", "1"))
        self.log_path = workdir / "lab.log"
        self._log = self.log_path.open("wb")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "jupyter", "lab", "--no-browser", f"--port={self.port}", "--ip=127.0.0.1",
             f"--IdentityProvider.token={self.token}", f"--ServerApp.root_dir={ROOT}",
             "--allow-root",  # CI runs as root
             "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
             "--LabApp.extension_manager=readonly", "--ServerApp.terminals_enabled=False"],
            cwd=ROOT, env=env, stdout=self._log, stderr=subprocess.STDOUT, start_new_session=True)
        self.pids = [self.proc.pid]

    def api(self, path: str, method: str = "GET") -> Any:
        req = urllib.request.Request(f"{self.url}{path}", method=method,
                                     headers={"Authorization": f"token {self.token}"})
        with urllib.request.urlopen(req, timeout=10) as r:
            body = r.read()
        return json.loads(body) if body else None

    def wait_ready(self, timeout: float = 120.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"jupyter lab exited with {self.proc.returncode}: {self.log_tail()}")
            try:
                self.api("/api/status")
                return
            except OSError:
                time.sleep(0.5)
        raise TimeoutError(f"jupyter lab not answering after {timeout:.0f} s: {self.log_tail()}")

    def lab_url(self, notebook: str) -> str:
        return f"{self.url}/lab/tree/{notebook}?token={self.token}&reset"

    def log_tail(self, n: int = 2000) -> str:
        self._log.flush()
        return self.log_path.read_text(errors="replace")[-n:]

    def shutdown_kernels(self) -> None:
        for k in self.api("/api/kernels"):
            self.api(f"/api/kernels/{k['id']}", method="DELETE")

    def stop(self) -> list[int]:
        """Shut the kernels down through the API, then the server; every PID below it is ended too.
        Returns the PIDs that survived (the test asserts there are none)."""
        try:
            self.shutdown_kernels()
        except OSError:
            pass
        below = descendants(self.proc.pid)
        self.pids += below
        left = stop_pids([self.proc.pid])
        self.proc.wait(timeout=10) if not left else None
        left += stop_pids(below)
        self._log.close()
        return left


class Browser:
    """Headless Chromium through chromedriver; `stop()` quits it and ends what is left of both, by PID."""

    def __init__(self, chromium: str, chromedriver: str, profile: Path):
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service

        opts = webdriver.ChromeOptions()
        opts.binary_location = chromium
        for flag in CHROMIUM_FLAGS:
            opts.add_argument(flag)
        opts.add_argument(f"--user-data-dir={profile}")
        opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
        self.service = Service(executable_path=chromedriver)
        self.driver = webdriver.Chrome(service=self.service, options=opts)
        self.pids = [self.service.process.pid, *descendants(self.service.process.pid)]

    def console(self) -> list[dict[str, Any]]:
        return self.driver.get_log("browser")

    def stop(self) -> list[int]:
        self.pids = list(dict.fromkeys(self.pids + descendants(self.service.process.pid)))
        try:
            self.driver.quit()
        finally:
            left = stop_pids(self.pids)
        return left


def wait_for(cond: Callable[[], Any], timeout: float, what: str, poll: float = 0.25) -> Any:
    """Poll `cond` until it is true. An element found and then replaced before it was read (a widget's
    HTML redrawn between `find_element` and `.text`) counts as not yet: the next poll finds the new one."""
    try:
        from selenium.common.exceptions import StaleElementReferenceException as Stale
    except ImportError:  # waits on the server alone need no browser
        Stale = LookupError  # noqa: N806 - an exception class, as the import's name
    deadline = time.monotonic() + timeout
    while True:
        try:
            got = cond()
        except Stale:
            got = None
        if got:
            return got
        if time.monotonic() > deadline:
            raise TimeoutError(f"after {timeout:.0f} s: {what}")
        time.sleep(poll)
