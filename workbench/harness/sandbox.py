"""OS isolation of the candidate process: namespaces, a read-only file system, its own uid, rlimits.

The candidate process is hostile. These calls run in it *before* any candidate code, as root, and
leave it unable to reach anything that decides a verdict:

- new PID, mount, network, IPC and UTS namespaces (`unshare`, through libc: Python 3.11 has no
  `os.unshare`), so it sees no other process, no network, no System V IPC;
- a private `/proc` for its PID namespace (no other process's `environ`, `mem` or `fd/`);
- every mount read-only (`mount_setattr(AT_RECURSIVE)`), then fresh empty tmpfs over `/tmp`,
  `/var/tmp`, `/run/lock` and `/dev/shm` (the harness's input cache and other jobs' sandboxes live
  there), with only its own sandbox bound read-write and the job's staged inputs bound read-only;
- an `/etc` of its own: an empty tmpfs with only the entries the loader, libc and the C compiler read
  (`_ETC_BOUND`, `_ETC_LINKS`) brought back, and a `passwd`/`group` written for root and its uid alone;
- an unprivileged uid/gid of its own (one per harness server, claimed with a lock), no supplementary
  groups, `PR_SET_NO_NEW_PRIVS`, the parent-death signal, rlimits on file size, processes, open files
  and core dumps.

At the end of a job the server kills the namespace's init (the kernel then kills every process in it)
and every process of the uid (`kill(-1)` from a helper that became that uid).

Each step that the kernel refuses is recorded in `Isolation.missing` and reported in the result's
`isolation` field with a warning, never silently skipped.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import errno
import fcntl
import logging
import os
import resource
import secrets
import signal
import stat
import sys
from dataclasses import dataclass, field
from pathlib import Path

log = logging.getLogger(__name__)

CLONE_NEWNS = 0x00020000
CLONE_NEWUTS = 0x04000000
CLONE_NEWIPC = 0x08000000
CLONE_NEWPID = 0x20000000
CLONE_NEWNET = 0x40000000
_NAMESPACES = (("pid", CLONE_NEWPID), ("mount", CLONE_NEWNS), ("net", CLONE_NEWNET), ("ipc", CLONE_NEWIPC),
               ("uts", CLONE_NEWUTS))
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8
MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 32, 4096, 16384, 1 << 18
PR_SET_PDEATHSIG, PR_SET_NO_NEW_PRIVS, PR_SET_CHILD_SUBREAPER = 1, 38, 36
_SYS_MOUNT_SETATTR = 442  # x86_64 and aarch64 (the unified syscall table)
_AT_FDCWD, _AT_RECURSIVE, _MOUNT_ATTR_RDONLY = -100, 0x8000, 0x1
_SYS_KEYCTL = {"x86_64": 250, "aarch64": 219}
_KEYCTL_JOIN_SESSION_KEYRING = 1
_MNT_DETACH = 2
# Candidate uids: a fresh one per job, drawn at random from UID_BASE .. UID_BASE + UID_SLOTS - 1 (not
# guessable from a PID, never two live jobs on one: each is held with a lock for its job).
UID_BASE = 2_000_000
UID_SLOTS = 1 << 20
SANDBOX_MOUNT = "/tmp/wb-sandbox"  # where the candidate sees its sandbox
STAGE_MOUNT = "/tmp/wb-stage"      # where it sees the job's staged inputs (read-only)

_libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)


@dataclass
class Isolation:
    """What the kernel granted; `missing` names each protection it refused, with the errno."""

    uid: int | None = None
    namespaces: list[str] = field(default_factory=list)
    readonly_root: bool = False
    private_proc: bool = False
    private_tmp: bool = False
    no_new_privs: bool = False
    fresh_keyring: bool = False
    closed_fds: int = 0
    code_under_tmp: list[str] = field(default_factory=list)  # bound back read-only over the private /tmp
    masked: list[str] = field(default_factory=list)  # host directories hidden under an empty tmpfs
    missing: list[str] = field(default_factory=list)

    def to_dict(self) -> dict:
        return {"uid": self.uid, "namespaces": list(self.namespaces), "readonly_root": self.readonly_root,
                "private_proc": self.private_proc, "private_tmp": self.private_tmp,
                "no_new_privs": self.no_new_privs, "fresh_keyring": self.fresh_keyring,
                "closed_fds": self.closed_fds, "code_under_tmp": list(self.code_under_tmp),
                "masked": list(self.masked), "missing": list(self.missing)}


def _err(what: str) -> str:
    e = ctypes.get_errno()
    return f"{what}: {errno.errorcode.get(e, e)}"


def _mount(src: str | None, target: str, fstype: str | None, flags: int, data: str | None = None) -> bool:
    rc = _libc.mount(src.encode() if src else None, target.encode(), fstype.encode() if fstype else None,
                     ctypes.c_ulong(flags), data.encode() if data else None)
    return rc == 0


def can_isolate() -> bool:
    """True when this process may build the sandbox (root: it needs CAP_SYS_ADMIN and setuid)."""
    return os.geteuid() == 0


def unshare_namespaces(iso: Isolation) -> None:
    """Enter new namespaces, all at once when the kernel allows it, else each it grants."""
    flags = 0
    for _, f in _NAMESPACES:
        flags |= f
    if _libc.unshare(flags) == 0:
        iso.namespaces = [n for n, _ in _NAMESPACES]
        return
    for name, f in _NAMESPACES:
        if _libc.unshare(f) == 0:
            iso.namespaces.append(name)
        else:
            iso.missing.append(_err(f"unshare {name}"))


def after_pid_fork(iso: Isolation) -> None:
    """In the first process of the new PID namespace: private mounts and a /proc of its own."""
    if _libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) != 0:
        iso.missing.append(_err("pdeathsig"))
    if "mount" not in iso.namespaces:
        return
    if not _mount(None, "/", None, MS_REC | MS_PRIVATE):
        iso.missing.append(_err("mount private"))
        return
    if "pid" in iso.namespaces:
        if _mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC):
            iso.private_proc = True
        else:
            iso.missing.append(_err("mount /proc"))


class _MountAttr(ctypes.Structure):
    _fields_ = [("attr_set", ctypes.c_uint64), ("attr_clr", ctypes.c_uint64),
                ("propagation", ctypes.c_uint64), ("userns_fd", ctypes.c_uint64)]


def _readonly_everything(iso: Isolation) -> None:
    attr = _MountAttr(_MOUNT_ATTR_RDONLY, 0, 0, 0)
    rc = _libc.syscall(_SYS_MOUNT_SETATTR, _AT_FDCWD, b"/", _AT_RECURSIVE, ctypes.byref(attr),
                       ctypes.sizeof(attr))
    if rc == 0:
        iso.readonly_root = True
        return
    iso.missing.append(_err("mount_setattr read-only"))
    # Older kernels: remount each mount point read-only (a bind remount keeps the other flags).
    ok = True
    with open("/proc/self/mountinfo") as f:
        points = [line.split()[4] for line in f]
    for mp in points:
        if mp.startswith(("/proc", "/sys", "/dev")):
            continue
        if not _mount(None, mp, None, MS_REMOUNT | MS_BIND | MS_RDONLY):
            ok = False
    iso.readonly_root = ok


# Private temp dirs that may hold code (a clone and its venv in /tmp): /dev/shm and /run/lock never do, and
# hold the input cache and other jobs' sandboxes.
_CODE_MASKED = ("/tmp", "/var/tmp")


def under_masked_tmp(paths: list[str], masked: tuple[str, ...] = _CODE_MASKED) -> list[str]:
    """The entries of `paths` (from `code_paths`: the interpreter's prefixes whole, a repository's packages
    and modules one by one) that lie under a temp dir the sandbox replaces with an empty tmpfs, so must be
    bound back over it; never a temp dir itself."""
    return [p for p in paths if any(p.startswith(m + os.sep) for m in masked)]


# Top-level directories the candidate sees whole (read-only): the system's programs, libraries and
# configuration, devices (the GPU's nodes), its own /proc, sysfs (the CUDA driver reads it), and the temp
# dirs, which get private tmpfs below. Every other top-level directory (/home, /root, /work, /srv, /opt,
# /var, /mnt...) is an empty tmpfs with only the interpreter's and the harness's code bound back into it.
_HOST_VISIBLE = frozenset({"usr", "bin", "sbin", "lib", "lib32", "lib64", "libx32", "dev", "proc", "sys", "tmp"})

# /etc is an allow-list, not the host's (a registry's credentials sit in /etc/pip.conf or /etc/npmrc, world-
# readable): an empty tmpfs with only what was seen read there, by strace, in the candidate's process and the
# C compiler Triton runs (the loader's cache and preload list, libc's name-service switch and time zone), bound
# back read-only, and the loader's configuration, which a linker other than this machine's may read to find a
# library's own libraries (GNU ld does where its built-in paths miss: the H200 image's /opt/gcc); entries that
# are links (the time zone, `mtab`) made again as links, the `alternatives` directory as its links alone (`cc`
# may resolve through it), `ld.so.conf.d` as its `*.conf` files and links alone, never a file planted beside.
_ETC_BOUND = ("ld.so.cache", "ld.so.preload", "ld.so.conf", "nsswitch.conf", "localtime", "timezone")
_ETC_LINKS = ("localtime", "mtab", "alternatives", "ld.so.conf.d")
_ETC_CONF_DIRS = ("ld.so.conf.d",)  # their regular `*.conf` files are bound back one by one
_ETC_VISIBLE = frozenset(_ETC_BOUND + _ETC_LINKS + ("passwd", "group"))


# Temp dirs every confined process gets an empty private tmpfs over (`confine_filesystem`).
_PRIVATE_TMP = ("/tmp", "/var/tmp", "/run/lock", "/dev/shm")


def seen_when_confined(path: str, code: list[str]) -> bool:
    """Whether a confined process sees `path` (the host's own directories, or under one of `code`, what
    `code_paths` binds back): the reference asks before it lets the candidate make inputs from a spec whose
    `get_inputs()` opens files (data beside the spec is out of the candidate's sight)."""
    real = os.path.realpath(path)
    parts = real.split(os.sep)
    if len(parts) > 1 and parts[1] in _HOST_VISIBLE and real not in _PRIVATE_TMP and \
            not any(real.startswith(m + os.sep) for m in _PRIVATE_TMP):
        return True
    if len(parts) > 2 and parts[1] == "etc" and parts[2] in _ETC_BOUND:
        return True
    return any(real == c or real.startswith(c + os.sep) for c in code)


def compiler_prefixes(environ: "os._Environ[str] | dict[str, str] | None" = None) -> set[str]:
    """The install prefix of the C compiler Triton builds its launchers with (Triton's rule: `$CC`, else gcc,
    else clang on `PATH`), when it lies outside the host directories the candidate sees: a toolchain under
    /opt (the H200 image's `/opt/gcc/bin/gcc`) needs its whole prefix (cc1 in libexec, its libraries)."""
    import shutil

    env = os.environ if environ is None else environ
    path = env.get("PATH")
    found = [env["CC"]] if env.get("CC") else [shutil.which("gcc", path=path), shutil.which("clang", path=path)]
    cc = next((c for c in found if c), None)
    if cc is None:
        return set()
    real = os.path.realpath(shutil.which(cc, path=path) or cc)
    parts = real.split(os.sep)
    hidden = parts[1] not in _HOST_VISIBLE or any(real.startswith(m + os.sep) for m in _CODE_MASKED)
    if len(parts) < 4 or parts[-2] != "bin" or not hidden:  # /usr/bin/gcc: the candidate sees it already
        return set()
    return {os.path.dirname(os.path.dirname(real))}  # /opt/gcc/bin/gcc -> /opt/gcc


def code_paths(extra_modules: list[str] | tuple[str, ...] = ()) -> list[str]:
    """What the candidate's process needs to go on importing: the interpreter's prefixes (the standard
    library, the venv's site-packages with torch and Triton) whole, and from any other `sys.path` entry
    (a repository root, where a `.env` may sit beside the code) only its Python packages (directories
    with an `__init__.py`), its modules and whatever was already imported from it: no dotfile, no data.
    Real paths, outermost first, none inside another."""
    prefixes = {os.path.realpath(p) for p in (sys.prefix, sys.exec_prefix, sys.base_prefix) if p}
    for var in ("CUDA_HOME", "CUDA_PATH"):
        if os.environ.get(var) and os.path.isdir(os.environ[var]):
            prefixes.add(os.path.realpath(os.environ[var]))
    wanted = set(prefixes) | compiler_prefixes()
    entries = {os.path.realpath(p) for p in sys.path if p and os.path.isdir(p)}
    inside = {e for e in entries if any(e == q or e.startswith(q + os.sep) for q in prefixes)}
    wanted |= inside
    outside = entries - inside
    for e in outside:  # a project's packages and modules (a spec's trusted package imports its siblings)
        if e == "/" or e in _CODE_MASKED:  # a shared temp dir on sys.path: what was imported from it, no more
            continue
        try:
            names = os.listdir(e)
        except OSError:
            continue
        for name in names:
            full = os.path.join(e, name)
            if name.startswith(".") or os.path.islink(full):
                continue
            if (name.endswith(".py") and os.path.isfile(full)) or os.path.isfile(os.path.join(full, "__init__.py")):
                wanted.add(full)
    for mod in list(sys.modules.values()):
        f = getattr(mod, "__file__", None)
        if not f:
            continue
        f = os.path.realpath(f)
        for e in outside:
            if f.startswith(e + os.sep):
                top = f[len(e) + 1:].split(os.sep)[0]
                wanted.add(os.path.join(e, top))
    # a spec's trusted packages (`ALLOWED_IMPORTS`), which the candidate imports once confined
    import importlib.util

    for name in extra_modules:
        try:
            found = importlib.util.find_spec(str(name).split(".")[0])
        except (ImportError, ValueError):
            continue
        if found is None:
            continue
        for loc in list(found.submodule_search_locations or []) or ([found.origin] if found.origin else []):
            if loc and os.path.exists(loc):
                wanted.add(os.path.realpath(loc))
    out: list[str] = []
    for p in sorted(wanted, key=lambda q: (len(q), q)):
        if os.path.exists(p) and not any(p == r or p.startswith(r + os.sep) for r in out):
            out.append(p)
    return out


def _bind_back(iso: Isolation, path: str, fd: int) -> bool:
    """Bind the file or directory held by `fd` (opened before a mask hid `path`) read-only at `path`, making
    its mount point (a directory, or an empty file for a file) in the fresh tmpfs above it."""
    if os.path.isdir(f"/proc/self/fd/{fd}"):
        os.makedirs(path, exist_ok=True)
    else:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        open(path, "a").close()  # noqa: SIM115 - a mount point for one file
    if _mount(f"/proc/self/fd/{fd}", path, None, MS_BIND | MS_REC) and \
            _mount(None, path, None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV):
        return True
    iso.missing.append(_err(f"bind code {path}"))
    return False


class _EtcHeld:
    """What the candidate's `/etc` gets back (`_ETC_BOUND`, `_ETC_LINKS`), held before the mask hides it: a
    descriptor per regular file, the text of each link."""

    def __init__(self, etc: str = "/etc") -> None:
        self.files: list[tuple[str, int]] = []
        self.links: list[tuple[str, str]] = []
        for name in dict.fromkeys(_ETC_BOUND + _ETC_LINKS):
            path = os.path.join(etc, name)
            try:
                st = os.lstat(path)
            except OSError:
                continue
            if stat.S_ISLNK(st.st_mode):
                if name in _ETC_LINKS or name in _ETC_BOUND:
                    self.links.append((name, os.readlink(path)))
            elif stat.S_ISREG(st.st_mode) and name in _ETC_BOUND:
                self.files.append((name, os.open(path, os.O_PATH | os.O_NOFOLLOW)))
            elif stat.S_ISDIR(st.st_mode) and name in _ETC_LINKS:  # its links alone, never a file in it
                try:
                    entries = sorted(os.listdir(path))
                except OSError:
                    continue
                for e in entries[:4096]:
                    sub = os.path.join(path, e)
                    if os.path.islink(sub):
                        self.links.append((os.path.join(name, e), os.readlink(sub)))
                    elif name in _ETC_CONF_DIRS and e.endswith(".conf") and os.path.isfile(sub):
                        self.files.append((os.path.join(name, e), os.open(sub, os.O_PATH | os.O_NOFOLLOW)))

    def fill(self, iso: Isolation, uid: int, etc: str = "/etc") -> None:
        """Into the fresh tmpfs at `etc`: the held files bound read-only, the links made again, and a
        `passwd` and `group` naming root and the candidate's uid alone (the host's users stay unseen)."""
        for name, fd in self.files:
            _bind_back(iso, os.path.join(etc, name), fd)
            os.close(fd)
        self.files = []
        for name, target in self.links:
            dst = os.path.join(etc, name)
            try:
                os.makedirs(os.path.dirname(dst), exist_ok=True)
                os.symlink(target, dst)
            except OSError as exc:
                iso.missing.append(f"etc link {name}: {errno.errorcode.get(exc.errno or 0, exc.errno)}")
        users = ["root:x:0:0:root:/root:/usr/sbin/nologin"]
        groups = ["root:x:0:"]
        if uid:
            users.append(f"wb-candidate:x:{uid}:{uid}:candidate:{SANDBOX_MOUNT}:/usr/sbin/nologin")
            groups.append(f"wb-candidate:x:{uid}:")
        for name, lines in (("passwd", users), ("group", groups)):
            with open(os.path.join(etc, name), "w") as f:
                f.write("\n".join(lines) + "\n")
            os.chmod(os.path.join(etc, name), 0o644)


def _mask_host(iso: Isolation, held: list[tuple[str, int]], etc: _EtcHeld | None = None, uid: int = 0) -> None:
    """Hide every top-level directory outside `_HOST_VISIBLE` under an empty read-only tmpfs, binding back
    the code paths in `held` (opened before: the masks hide their paths) read-only; `/etc` gets `etc`'s
    allowed entries back (`_EtcHeld.fill`)."""
    for entry in sorted(os.listdir("/")):
        top = "/" + entry
        if entry in _HOST_VISIBLE or os.path.islink(top) or not os.path.isdir(top):
            continue
        if not _mount("tmpfs", top, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755,size=1m,nr_inodes=4096"):
            iso.missing.append(_err(f"mask {top}"))
            continue
        iso.masked.append(top)
        for path, fd in held:
            if path.startswith(top + os.sep):
                _bind_back(iso, path, fd)
        if top == "/etc" and etc is not None:
            etc.fill(iso, uid)
        _mount(None, top, None, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV, "mode=0755,size=1m")


def confine_filesystem(iso: Isolation, sandbox: Path, stage: Path | None, uid: int,
                       modules: list[str] | tuple[str, ...] = ()) -> None:
    """Read-only view of everything, empty private temp dirs, the sandbox writable, the stage read-only."""
    if "mount" not in iso.namespaces:
        iso.missing.append("read-only view: no mount namespace")
        return
    # Hold the sandbox and the stage by descriptor: the tmpfs mounts below may hide their paths.
    held = [os.open(p, os.O_PATH | os.O_DIRECTORY) for p in (sandbox, stage) if p is not None]
    # Code under /tmp (a clone there, its venv) stays importable: the candidate's lazy imports (torch's
    # submodules, the harness's own) would fail in the empty tmpfs. The same paths as elsewhere are bound
    # back read-only (a venv's prefix whole, a repository's packages and modules one by one), never the
    # repository's root: a `.env` beside the code stays out of sight wherever the clone lives.
    wanted = code_paths(modules)
    tmp_code = under_masked_tmp(wanted)
    roots = [(p, os.open(p, os.O_PATH)) for p in tmp_code]
    code = [(p, os.open(p, os.O_PATH)) for p in wanted if p not in tmp_code]
    etc = _EtcHeld()
    _readonly_everything(iso)
    _mask_host(iso, code, etc, uid)
    for _, fd in code:
        os.close(fd)
    private = True
    for d in _PRIVATE_TMP:
        if os.path.isdir(d) and not _mount("tmpfs", d, "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777,size=64m"):
            private = False
            iso.missing.append(_err(f"tmpfs {d}"))
    iso.private_tmp = private
    for path, fd in roots:  # mount points inside the fresh tmpfs, owned by root
        if _bind_back(iso, path, fd):
            iso.code_under_tmp.append(path)
        os.close(fd)
    os.makedirs(SANDBOX_MOUNT, exist_ok=True)
    if not _mount(f"/proc/self/fd/{held[0]}", SANDBOX_MOUNT, None, MS_BIND) or \
            not _mount(None, SANDBOX_MOUNT, None, MS_REMOUNT | MS_BIND | MS_NOSUID | MS_NODEV):
        iso.missing.append(_err("bind sandbox"))
    if stage is not None:
        os.makedirs(STAGE_MOUNT, exist_ok=True)
        if not _mount(f"/proc/self/fd/{held[1]}", STAGE_MOUNT, None, MS_BIND) or \
                not _mount(None, STAGE_MOUNT, None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV):
            iso.missing.append(_err("bind stage"))
    for fd in held:
        os.close(fd)
    os.chown(SANDBOX_MOUNT, uid, uid)


def set_limits(file_size_gb: float = 8.0, processes: int = 64, open_files: int = 1024) -> None:
    """File size, process count (for the uid: Triton's ptxas needs a few), open files, no core dumps."""
    fsize = int(file_size_gb * 2**30)
    for res, val in ((resource.RLIMIT_FSIZE, fsize), (resource.RLIMIT_NPROC, processes),
                     (resource.RLIMIT_NOFILE, open_files), (resource.RLIMIT_CORE, 0)):
        soft, hard = resource.getrlimit(res)
        cap = val if hard == resource.RLIM_INFINITY else min(val, hard)
        resource.setrlimit(res, (cap, cap))


def drop_privileges(iso: Isolation, uid: int) -> None:
    """Become `uid` (its own group, no supplementary groups) for good; no privileges can come back."""
    os.setgroups([])
    os.setresgid(uid, uid, uid)
    os.setresuid(uid, uid, uid)
    iso.uid = uid
    if _libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0:
        iso.no_new_privs = True
    else:
        iso.missing.append(_err("no_new_privs"))
    # A session keyring of its own, empty: nothing another job (or the server) keeps there is reachable.
    nr = _SYS_KEYCTL.get(os.uname().machine)
    if nr is not None and _libc.syscall(nr, _KEYCTL_JOIN_SESSION_KEYRING, None) >= 0:
        iso.fresh_keyring = True
    else:
        iso.missing.append(_err("keyctl join session keyring"))
    # a credential change clears the parent-death signal: set it again
    if _libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) != 0:
        iso.missing.append(_err("pdeathsig after setuid"))


class UidLease:
    """A fresh candidate uid for one job: random, held with an flock so no other live job has it. Its
    persistent keyring and anything else the kernel keeps per uid start empty."""

    def __init__(self, lock_dir: Path = Path("/dev/shm/wb-harness-uids"), tries: int = 64) -> None:
        lock_dir.mkdir(mode=0o700, exist_ok=True)
        for _ in range(tries):
            uid = UID_BASE + secrets.randbelow(UID_SLOTS)
            path = lock_dir / f"{uid}.lock"
            fd = os.open(path, os.O_CREAT | os.O_RDWR | os.O_CLOEXEC, 0o600)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                os.close(fd)
                continue
            self.uid, self._fd, self._path = uid, fd, path
            return
        raise RuntimeError(f"no free candidate uid in {UID_BASE}..{UID_BASE + UID_SLOTS - 1} after {tries} draws")

    def release(self) -> None:
        try:
            self._path.unlink(missing_ok=True)
            os.close(self._fd)
        except OSError:
            pass


def kill_uid(uid: int) -> None:
    """SIGKILL every process of `uid`, wherever it hides (another session, a daemon, a new PID namespace).

    A forked helper becomes `uid` and calls kill(-1): that reaches exactly the processes the uid owns.
    """
    pid = os.fork()
    if pid == 0:
        try:
            os.setresgid(uid, uid, uid)
            os.setresuid(uid, uid, uid)
            try:
                os.kill(-1, signal.SIGKILL)  # the helper is among them: it dies here
            except ProcessLookupError:
                pass
        finally:
            os._exit(0)
    os.waitpid(pid, 0)


def become_subreaper() -> bool:
    """Orphans of this process's descendants are re-parented here (to be reaped), not to the host's init."""
    return _libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0


def child_pids(pid: int) -> list[int]:
    """The direct children of `pid`, read from /proc (the namespace init below the intermediate)."""
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            return [int(x) for x in f.read().split()]
    except OSError:
        return []


def private_mounts() -> bool:
    """The server's own mount namespace: the tmpfs it mounts for jobs are invisible to the host and go
    with it when it exits."""
    return _libc.unshare(CLONE_NEWNS) == 0 and _mount(None, "/", None, MS_REC | MS_PRIVATE)


def resize_box(path: Path, size_mb: int, inodes: int = 4096) -> bool:
    """Set the sandbox tmpfs's bound for this job (the candidate's mount namespace shares its superblock):
    the outbox's bytes, which the reference laid out, plus the candidate's own writable space."""
    return _mount(None, str(path), None, MS_REMOUNT | MS_NOSUID | MS_NODEV,
                  f"mode=0700,size={max(1, int(size_mb))}m,nr_inodes={int(inodes)}")


def mount_box(path: Path, size_mb: int, inodes: int = 4096) -> bool:
    """A size-bounded tmpfs at `path`: a candidate's writable space (its sandbox), mode 0700 of root."""
    return _mount("tmpfs", str(path), "tmpfs", MS_NOSUID | MS_NODEV,
                  f"mode=0700,size={int(size_mb)}m,nr_inodes={int(inodes)}")


def unmount(path: Path) -> None:
    _libc.umount2(str(path).encode(), _MNT_DETACH)


def close_inherited_fds(keep: set[int], iso: Isolation | None = None) -> int:
    """Close every descriptor that reaches a file, directory or socket outside what `keep` names: a lock
    file, a log or a socket the server held would otherwise be writable from the candidate. Devices (the
    GPU's), pipes the runtime uses and anonymous inodes stay."""
    closed = 0
    try:
        fds = [int(x) for x in os.listdir("/proc/self/fd")]
    except OSError:
        return 0
    for fd in fds:
        if fd in keep or fd <= 2:
            continue
        try:
            mode = os.fstat(fd).st_mode
        except OSError:
            continue
        if stat.S_ISSOCK(mode) or stat.S_ISREG(mode) or stat.S_ISDIR(mode):
            try:
                os.close(fd)
                closed += 1
            except OSError:
                pass
    if iso is not None:
        iso.closed_fds = closed
    return closed
