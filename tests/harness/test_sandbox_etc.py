"""The candidate's /etc is an allow-list (issue 32): a world-readable secret planted anywhere under the host's
/etc (beside the allowed entries, inside a directory whose links are brought back, in a directory of its own)
is not there for the candidate, its `passwd` names no host user, and what the loader, libc and the C compiler
read is still there (an honest candidate passes, a program runs).

The files are planted in the host's real /etc, so these tests need root (as the sandbox does) and remove
what they planted.
"""
from __future__ import annotations

import os
import subprocess
import sys
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.harness.devices import DEVICES, sized
from workbench.harness import Harness, sandbox
from workbench.result import Status

HERE = Path(__file__).parent
ROOT = HERE.parents[1]
SPEC = ROOT / "examples" / "vector_add" / "spec.py"
CANARY = "wb-etc-canary-" + os.urandom(6).hex()  # the planted files' names
SECRET = "wb-etc-secret-" + os.urandom(6).hex()  # their content
ROOT_ONLY = pytest.mark.skipif(os.geteuid() != 0, reason="the sandbox, and planting in /etc, need root")


@contextmanager
def planted():
    """World-readable canaries: top level, among `alternatives`' links, beside `ld.so.conf.d`'s `*.conf` files,
    in a directory of their own."""
    tag = f"{CANARY}-{os.getpid()}"
    paths = [Path("/etc") / f"{tag}.conf", Path("/etc") / "alternatives" / tag, Path("/etc") / tag / "token",
             Path("/etc") / "ld.so.conf.d" / f"{tag}.secret"]
    made: list[Path] = []
    try:
        for p in paths:
            if not p.parent.is_dir():
                p.parent.mkdir(mode=0o755)
                made.append(p.parent)
            p.write_text(f"TOKEN={SECRET}\n")
            p.chmod(0o644)
            made.append(p)
        yield paths
    finally:
        for p in reversed(made):
            if p.is_dir():
                p.rmdir()
            else:
                p.unlink(missing_ok=True)


def test_etc_entries_the_candidate_sees_are_named_not_filtered() -> None:
    assert "etc" not in sandbox._HOST_VISIBLE
    assert sandbox._ETC_VISIBLE >= {"ld.so.cache", "nsswitch.conf", "passwd", "group"}
    assert not sandbox.seen_when_confined("/etc/pip.conf", []) and sandbox.seen_when_confined("/etc/ld.so.cache", [])


@ROOT_ONLY
def test_a_confined_process_sees_only_the_allowed_etc(tmp_path: Path) -> None:
    box = Path("/dev/shm") / f"wb-etc-sb-{os.getpid()}"
    box.mkdir(exist_ok=True)
    uid = 2_000_123
    script = f"""
import os, subprocess, sys
from pathlib import Path
from workbench.harness import sandbox as sb
iso = sb.Isolation()
sb.unshare_namespaces(iso)
pid = os.fork()
if pid == 0:
    sb.after_pid_fork(iso)
    sb.confine_filesystem(iso, Path({str(box)!r}), None, {uid})
    seen = sorted(os.listdir("/etc"))
    leaked = [p for p in sys.argv[1:-1] if os.path.exists(p)]
    passwd = open("/etc/passwd").read().split()
    ran = subprocess.run(["/bin/sh", "-c", "echo ran"], capture_output=True, text=True).stdout.strip()
    bad = {{"extra": sorted(set(seen) - set(sb._ETC_VISIBLE)), "leaked": leaked, "ran": ran,
            "passwd": [ln.split(":")[0] for ln in passwd], "ldcache": os.path.isfile("/etc/ld.so.cache"),
            "ldconf": sorted(os.listdir("/etc/ld.so.conf.d")) if os.path.isdir("/etc/ld.so.conf.d") else [],
            "rw": os.access("/etc", os.W_OK) and not iso.missing}}
    ok = (not bad["extra"] and not leaked and ran == "ran" and bad["passwd"] == ["root", "wb-candidate"]
          and bad["ldcache"] == os.path.isfile("/proc/1/root/etc/ld.so.cache")
          and bad["ldconf"] == (sorted(sys.argv[-1].split(",")) if sys.argv[-1] else []))
    print(bad, iso.missing, file=sys.stderr)
    try:
        open("/etc/x", "w")
        ok = False
    except OSError:
        pass
    os._exit(0 if ok else 3)
_, status = os.waitpid(pid, 0)
sys.exit(os.waitstatus_to_exitcode(status))
"""
    with planted() as paths:
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        conf = Path("/etc/ld.so.conf.d")
        confs = ",".join(sorted(p.name for p in conf.iterdir() if p.suffix == ".conf")) if conf.is_dir() else ""
        res = subprocess.run([sys.executable, "-c", script, *map(str, paths), confs], env=env, capture_output=True,
                             text=True, timeout=120)
    subprocess.run(["rm", "-rf", str(box)], check=False)
    assert res.returncode == 0, res.stderr[-3000:]


@ROOT_ONLY
@pytest.mark.parametrize("device", DEVICES)
def test_secrets_planted_in_etc_do_not_reach_the_candidate(device: str, monkeypatch: pytest.MonkeyPatch) -> None:
    with planted() as paths:
        monkeypatch.setenv("WB_GUARDS", "off")  # the sandbox alone: no audit hook, no allow-list
        monkeypatch.setenv("WB_TEST_ETC", ",".join(map(str, paths)))
        with Harness(device=device) as h:
            res = h.evaluate(SPEC, HERE / "construction" / "reads_etc.py", **sized(device, 1), policy=False)
    assert res.status == Status.PASSED, (res.status, res.error[-2000:])
    assert SECRET not in res.to_json(), res.stdout_tail
    reads = [ln for ln in res.stdout_tail.splitlines() if ln.startswith("ETCREAD")]
    assert len(reads) >= len(paths) and all("open: FileNotFoundError" in ln for ln in reads), reads
    listing = next(ln for ln in res.stdout_tail.splitlines() if ln.startswith("ETCLIST")).split()[1:]
    assert set(listing) <= sandbox._ETC_VISIBLE, listing
    passwd = next(ln for ln in res.stdout_tail.splitlines() if ln.startswith("PASSWD"))
    passwd = passwd.split(" | ")[0]  # what `open` read (the 16 bytes `from_file` read follow)
    assert "root:x:0:0" in passwd and "wb-candidate" in passwd and passwd.count(":x:") == 2, passwd
