"""Code that lives under /tmp (a clone and its venv there) stays importable inside the sandbox."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from workbench.harness.sandbox import code_roots


def test_code_roots_are_the_outermost_dirs_under_a_private_temp_dir(tmp_path):
    base = Path("/tmp") / f"wb-roots-{os.getpid()}"
    (base / "venv" / "lib" / "site-packages").mkdir(parents=True, exist_ok=True)
    (base / "repo").mkdir(exist_ok=True)
    try:
        paths = [str(base / "venv"), str(base / "venv" / "lib" / "site-packages"), str(base / "repo"),
                 "/usr/lib", "/tmp", "", str(base / "missing")]
        assert code_roots(paths) == [str(base / "repo"), str(base / "venv")]  # outermost first, then by name
        assert code_roots(["/tmp", "/var/tmp", "/usr"]) == []  # never a whole temp dir
        assert code_roots([str(base / "repo")], masked=("/var/tmp",)) == []
    finally:
        subprocess.run(["rm", "-rf", str(base)], check=False)


@pytest.mark.skipif(os.geteuid() != 0, reason="the sandbox needs root")
def test_a_module_under_tmp_imports_lazily_inside_the_sandbox():
    """The candidate's process imports lazily after the sandbox is built (torch's submodules): with a package
    on sys.path under /tmp, an import after `confine_filesystem` must still find it."""
    base = Path("/tmp") / f"wb-lazy-{os.getpid()}"
    (base / "lazy_pkg_wb").mkdir(parents=True, exist_ok=True)
    (base / "lazy_pkg_wb" / "__init__.py").write_text("VALUE = 42\n")
    sandbox = Path("/dev/shm") / f"wb-lazy-sb-{os.getpid()}"
    sandbox.mkdir(exist_ok=True)
    script = f"""
import os, sys
sys.path.insert(0, {str(base)!r})
from pathlib import Path
from workbench.harness import sandbox as sb
iso = sb.Isolation()
sb.unshare_namespaces(iso)
pid = os.fork()
if pid == 0:
    sb.after_pid_fork(iso)
    sb.confine_filesystem(iso, Path({str(sandbox)!r}), None, 0)
    import lazy_pkg_wb
    ok = lazy_pkg_wb.VALUE == 42 and {str(base)!r} in iso.code_under_tmp and not os.path.exists("/tmp/wb-lazy-probe")
    os._exit(0 if ok else 3)
_, status = os.waitpid(pid, 0)
sys.exit(os.waitstatus_to_exitcode(status))
"""
    try:
        (Path("/tmp") / "wb-lazy-probe").write_text("another job's file in /tmp: hidden in the sandbox\n")
        env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
        res = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=60)
        assert res.returncode == 0, res.stderr[-2000:]
    finally:
        subprocess.run(["rm", "-rf", str(base), str(sandbox), "/tmp/wb-lazy-probe"], check=False)
