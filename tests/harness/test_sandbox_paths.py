"""Code that lives under /tmp (a clone and its venv there) stays importable inside the sandbox, and only the
code: a repository root under /tmp is never bound back whole (a `.env` beside the code stays hidden)."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from workbench.harness.sandbox import under_masked_tmp


def test_only_code_under_a_private_temp_dir_is_bound_back_over_it():
    paths = ["/usr/lib/python3", "/tmp/x/venv", "/tmp/x/repo/workbench", "/tmp/x/repo/conftest.py",
             "/var/tmp/y/pkg", "/dev/shm/z/pkg", "/work/repo/workbench"]
    assert under_masked_tmp(paths) == ["/tmp/x/venv", "/tmp/x/repo/workbench", "/tmp/x/repo/conftest.py",
                                       "/var/tmp/y/pkg"]
    assert under_masked_tmp(["/tmp", "/var/tmp", "/tmpfoo/pkg"]) == []  # never a temp dir itself
    assert under_masked_tmp(["/tmp/x/pkg"], masked=("/var/tmp",)) == []


def _confined(sandbox: Path, body: str, prelude: str = "") -> str:
    """A script that confines a forked child to `sandbox` as the candidate's process is, then runs `body` in
    it (indented four spaces; it ends with `os._exit`); the script exits with the child's status."""
    return f"""
import os, subprocess, sys
{prelude}
from pathlib import Path
from workbench.harness import sandbox as sb
iso = sb.Isolation()
sb.unshare_namespaces(iso)
pid = os.fork()
if pid == 0:
    sb.after_pid_fork(iso)
    sb.confine_filesystem(iso, Path({str(sandbox)!r}), None, 0)
{body}
_, status = os.waitpid(pid, 0)
sys.exit(os.waitstatus_to_exitcode(status))
"""


@pytest.mark.skipif(os.geteuid() != 0, reason="the sandbox needs root")
def test_a_module_under_tmp_imports_lazily_inside_the_sandbox_and_nothing_beside_it_shows():
    """The candidate's process imports lazily after the sandbox is built (torch's submodules): with a package
    and a module on sys.path under /tmp, an import after `confine_filesystem` must still find them; a `.env`
    and a data file beside them (the root of a clone under /tmp) must not be there."""
    base = Path("/tmp") / f"wb-lazy-{os.getpid()}"
    (base / "lazy_pkg_wb").mkdir(parents=True, exist_ok=True)
    (base / "lazy_pkg_wb" / "__init__.py").write_text("VALUE = 42\n")
    (base / "lazy_mod_wb.py").write_text("VALUE = 7\n")
    (base / ".env").write_text("API=wb-canary\n")
    (base / "data.txt").write_text("host data\n")
    sandbox = Path("/dev/shm") / f"wb-lazy-sb-{os.getpid()}"
    sandbox.mkdir(exist_ok=True)
    script = _confined(sandbox, f"""\
    import lazy_pkg_wb, lazy_mod_wb
    base = {str(base)!r}
    checks = {{
        "pkg": lazy_pkg_wb.VALUE == 42, "mod": lazy_mod_wb.VALUE == 7,
        "bound": base + "/lazy_pkg_wb" in iso.code_under_tmp and base not in iso.code_under_tmp,
        "env hidden": not os.path.exists(base + "/.env"), "data hidden": not os.path.exists(base + "/data.txt"),
        "probe hidden": not os.path.exists("/tmp/wb-lazy-probe"),
    }}
    bad = [k for k, v in checks.items() if not v]
    print("FAILED", bad, iso.code_under_tmp, iso.missing, file=sys.stderr) if bad else None
    os._exit(3 if bad else 0)""", prelude=f"sys.path.insert(0, {str(base)!r})")
    try:
        (Path("/tmp") / "wb-lazy-probe").write_text("another job's file in /tmp: hidden in the sandbox\n")
        env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
        res = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=60)
        assert res.returncode == 0, res.stderr[-2000:]
    finally:
        subprocess.run(["rm", "-rf", str(base), str(sandbox), "/tmp/wb-lazy-probe"], check=False)


def test_the_c_compiler_triton_uses_is_bound_whole_when_the_host_hides_it(tmp_path, monkeypatch):
    """Triton builds its launchers with `$CC` (else gcc, else clang on PATH) inside the candidate's process: a
    toolchain the sandbox would hide (the H200 image's /opt/gcc/bin/gcc) comes back with its whole prefix
    (cc1 under libexec); one the candidate sees already (/usr/bin/gcc) adds nothing."""
    from workbench.harness.sandbox import code_paths, compiler_prefixes

    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "gcc").write_text("#!/bin/sh\nexit 0\n")
    (tmp_path / "bin" / "gcc").chmod(0o755)
    assert compiler_prefixes({"CC": str(tmp_path / "bin" / "gcc")}) == {str(tmp_path.resolve())}
    assert compiler_prefixes({"PATH": str(tmp_path / "bin")}) == {str(tmp_path.resolve())}
    assert compiler_prefixes({"CC": "/usr/bin/gcc"}) == set()
    assert compiler_prefixes({"PATH": "/nonexistent"}) == set()
    monkeypatch.setenv("CC", str(tmp_path / "bin" / "gcc"))
    assert str(tmp_path.resolve()) in code_paths()


@pytest.mark.skipif(os.geteuid() != 0, reason="the sandbox needs root")
def test_a_hidden_toolchain_runs_inside_the_sandbox():
    base = Path("/tmp") / f"wb-cc-{os.getpid()}"
    (base / "bin").mkdir(parents=True, exist_ok=True)
    (base / "libexec").mkdir(exist_ok=True)
    (base / "libexec" / "cc1").write_text("compiler part\n")
    (base / "bin" / "gcc").write_text(f"#!/bin/sh\ntest -f {base}/libexec/cc1 && echo compiled\n")
    (base / "bin" / "gcc").chmod(0o755)
    sandbox = Path("/dev/shm") / f"wb-cc-sb-{os.getpid()}"
    sandbox.mkdir(exist_ok=True)
    script = _confined(sandbox, """\
    out = subprocess.run([os.environ["CC"]], capture_output=True, text=True).stdout.strip()
    os._exit(0 if out == "compiled" else 3)""")
    try:
        env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2]), "CC": str(base / "bin" / "gcc")}
        res = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=60)
        assert res.returncode == 0, res.stderr[-2000:]
    finally:
        subprocess.run(["rm", "-rf", str(base), str(sandbox)], check=False)
