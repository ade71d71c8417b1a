"""Guards installed in the candidate's child process before the candidate is imported.

Threat model: the candidate is untrusted Python. The guards refuse the Python routes to cheating
(writing outside the sandbox directory, new processes, network, ctypes, threads, side streams,
gc walks, killing other processes, monkeypatching torch/triton/time/the harness) and record each
attempt as a named violation. Native code that the candidate cannot load (ctypes is refused) is
out of scope; the reference output never exists in this process, so there is nothing to steal.
"""
from __future__ import annotations

import os
import sys
import sysconfig
import threading
from pathlib import Path
from types import FrameType, ModuleType
from typing import Any, Callable

_STDLIB = (sysconfig.get_paths()["stdlib"], sysconfig.get_paths()["platstdlib"])
_HARNESS_DIR = str(Path(__file__).resolve().parent)
_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND
# Attribute reads that hand out a frame (the harness's locals, its report, the guard itself).
_FRAME_ATTRS = frozenset({"tb_frame", "gi_frame", "cr_frame", "ag_frame", "f_code"})
# Standard-library modules that read frames for their own bookkeeping (a namedtuple's module name,
# a warning's registry, a log record's caller) and hand no frame back to their caller.
_FRAME_SAFE_STDLIB = tuple(os.sep + m for m in ("collections" + os.sep + "__init__.py", "typing.py", "enum.py",
                                                "warnings.py", "logging" + os.sep + "__init__.py",
                                                "dataclasses.py", "abc.py", "functools.py", "traceback.py",
                                                "linecache.py"))


class Guard:
    """Records violations; the audit hook and wrappers call `refuse`."""

    def __init__(self, sandbox: Path, candidate_file: Path, private_paths: list[Path]) -> None:
        self.sandbox = str(sandbox.resolve())
        self.candidate_file = str(candidate_file.resolve())
        self.private = [str(p.resolve()) for p in private_paths]
        self.violations: list[str] = []
        self.active = False
        self._busy = False  # walking the stack raises audit events itself: no re-entry
        self._snapshot: dict[tuple[str, str], int] = {}
        self._watched: list[tuple[str, Any]] = []

    # -- who is asking ---------------------------------------------------------------------
    def _candidate_initiated(self, frame: FrameType | None) -> bool:
        """True when the first frame outside the standard library belongs to the candidate."""
        while frame is not None:
            fn = frame.f_code.co_filename
            if fn.startswith(self.sandbox) or fn == self.candidate_file or fn.startswith("<"):
                if fn.startswith("<frozen") :
                    frame = frame.f_back
                    continue
                return True
            if fn.startswith(_HARNESS_DIR):
                return False
            if "site-packages" in fn or not fn.startswith(_STDLIB):
                return False
            frame = frame.f_back
        return False

    def _spec_reads_itself(self, frame: FrameType | None) -> bool | str:
        """True when the spec's own code (the trusted reference's module, which the candidate cannot import)
        is on the stack below the read before any candidate frame: a warning raised while the spec makes
        inputs reads the spec's line through linecache. Otherwise the innermost non-stdlib frames, for the
        refusal's one line (who read it)."""
        chain: list[str] = []
        while frame is not None:
            fn = frame.f_code.co_filename
            if fn in self.private or os.path.realpath(fn) in self.private:
                return True
            if fn.startswith(self.sandbox) or fn == self.candidate_file or fn.startswith("<"):
                if not fn.startswith("<frozen"):
                    break
            elif not fn.startswith(_STDLIB) and len(chain) < 3:
                chain.append(f"{Path(fn).name}:{frame.f_lineno}")
            frame = frame.f_back
        return " <- ".join(chain) or "the candidate"

    def refuse(self, name: str, detail: str) -> None:
        tag = f"{name}:{detail}"[:160]
        if tag not in self.violations:
            self.violations.append(tag)
        raise PermissionError(f"refused by the kernel harness: {name} ({detail})")

    def _inside_sandbox(self, path: Any) -> bool:
        if isinstance(path, int):
            return True  # an already-open descriptor: its open was checked
        try:
            p = os.path.realpath(os.fsdecode(path))
        except (TypeError, ValueError):
            return False
        return p == "/dev/null" or p.startswith(self.sandbox + os.sep) or p == self.sandbox

    # -- the audit hook ----------------------------------------------------------------------
    def audit(self, event: str, args: tuple) -> None:
        if not self.active or self._busy:
            return
        self._busy = True
        try:
            self._rules(event, args)
        finally:
            self._busy = False

    def _rules(self, event: str, args: tuple) -> None:  # noqa: C901 - one table of rules
        if event == "open":
            path, mode, flags = (list(args) + [None, None])[:3]
            if isinstance(path, int) or path is None:
                return
            real = os.path.realpath(os.fsdecode(path))
            if any(real.startswith(p) for p in self.private):
                reader = self._spec_reads_itself(sys._getframe(2))
                if reader is not True:
                    self.refuse("read_private", f"{Path(real).name}, read by {reader}")
            if real.startswith("/proc/") and real.endswith("/mem"):
                self.refuse("proc_mem", real)
            writing = (isinstance(mode, str) and any(c in mode for c in "wax+")) or (
                isinstance(flags, int) and flags & _WRITE_FLAGS)
            if writing and not self._inside_sandbox(path):
                self.refuse("file_write", real)
        elif event in ("os.remove", "os.rmdir", "os.mkdir", "os.chmod", "os.chown", "os.truncate",
                       "os.utime", "shutil.rmtree", "os.link", "os.symlink"):
            if not self._inside_sandbox(args[0]):
                self.refuse("file_write", f"{event} {args[0]}")
        elif event == "os.rename":
            if not (self._inside_sandbox(args[0]) and self._inside_sandbox(args[1])):
                self.refuse("file_write", f"rename {args[0]} -> {args[1]}")
        elif event in ("subprocess.Popen", "os.system", "os.exec", "os.posix_spawn", "os.spawn", "os.fork",
                       "os.forkpty", "pty.spawn", "os.startfile"):
            # Triton itself runs ptxas/gcc through subprocess when it compiles: allowed when a
            # library frame, not the candidate, made the call.
            if self._candidate_initiated(sys._getframe(2)):
                self.refuse("subprocess", f"{event} {str(args[:2])[:80]}")
        elif event in ("socket.connect", "socket.bind", "socket.sendto", "socket.getaddrinfo"):
            self.refuse("network", f"{event} {str(args[1:2])[:80]}")
        elif event.startswith("ctypes.") or event in ("gc.get_objects", "gc.get_referrers", "gc.get_referents",
                                                        "sys._current_frames", "sys.addaudithook"):
            if self._candidate_initiated(sys._getframe(2)):
                self.refuse("forbidden_introspection" if not event.startswith("ctypes") else "ctypes", event)
        elif event in ("sys._getframe", "sys.settrace", "sys.setprofile") or (
                event == "object.__getattr__" and len(args) > 1 and args[1] in _FRAME_ATTRS):
            # Frames lead to the harness's locals (the guard, the report being built), and `f_back`
            # is not audited: once the candidate holds any frame, it can walk the whole stack.
            caller = sys._getframe(2)
            if caller.f_code.co_filename.endswith(_FRAME_SAFE_STDLIB):
                return
            if self._candidate_initiated(caller):
                self.refuse("frame_introspection", event if event != "object.__getattr__" else str(args[1]))
        elif event in ("os.kill", "os.killpg", "signal.pthread_kill"):
            # pid 0 is the whole process group: in a PID namespace getppid() is 0, so "kill my parent"
            # lands there.
            if event != "os.kill" or args[0] != os.getpid():
                self.refuse("kill", f"{event} {args[:2]}")

    # -- monkeypatch detection -----------------------------------------------------------------
    def watch(self, label: str, obj: Any) -> None:
        self._watched.append((label, obj))

    def snapshot(self) -> None:
        self._snapshot = {}
        self._keys: dict[str, frozenset[str]] = {}
        for label, obj in self._watched:
            for k, v in list(vars(obj).items()):
                if callable(v) or isinstance(v, (type, staticmethod, classmethod, property)):
                    self._snapshot[(label, k)] = id(v)
            if isinstance(obj, type):
                self._keys[label] = frozenset(vars(obj))

    def check_patches(self) -> None:
        objs = dict(self._watched)
        for (label, k), ident in self._snapshot.items():
            cur = vars(objs[label]).get(k, None)
            if id(cur) != ident:
                tag = f"monkeypatch:{label}.{k}"
                if tag not in self.violations:
                    self.violations.append(tag)
        # A name added to a watched class shadows what its base defines (`torch.Tensor.detach` over
        # `TensorBase.detach`): a patch too, though no key it had changed.
        for label, keys in getattr(self, "_keys", {}).items():
            added = vars(objs[label])
            for k in set(added) - keys:
                v = added.get(k)
                if not (callable(v) or hasattr(type(v), "__get__")):  # a cache (`__slotnames__`), no code
                    continue
                tag = f"monkeypatch:{label}.{k}"
                if tag not in self.violations:
                    self.violations.append(tag)

    def install(self) -> None:
        sys.addaudithook(self.audit)
        self.active = True


def wrap_thread_start(guard: Guard) -> None:
    """Threads can hide work from timing: refuse any thread the candidate starts."""
    import _thread

    orig_start = threading.Thread.start

    def start(self: threading.Thread) -> None:
        if guard.active and guard._candidate_initiated(sys._getframe(1)):
            guard.refuse("thread", self.name)
        orig_start(self)

    threading.Thread.start = start  # type: ignore[method-assign]
    for name in ("start_new_thread", "start_new", "start_joinable_thread"):
        orig = getattr(_thread, name, None)
        if orig is None:
            continue

        def make(orig_fn: Callable) -> Callable:
            def guarded(*a: Any, **k: Any) -> Any:
                if guard.active and guard._candidate_initiated(sys._getframe(1)):
                    guard.refuse("thread", "_thread")
                return orig_fn(*a, **k)
            return guarded

        setattr(_thread, name, make(orig))


def wrap_side_streams(guard: Guard, torch: ModuleType) -> None:
    """Work on a side CUDA stream escapes the events timing the default stream."""
    orig_new = torch.cuda.Stream.__new__

    def new(cls: type, *a: Any, **k: Any) -> Any:
        if guard.active and guard._candidate_initiated(sys._getframe(1)):
            guard.refuse("side_stream", "torch.cuda.Stream")
        return orig_new(cls, *a, **k)

    torch.cuda.Stream.__new__ = new  # type: ignore[method-assign]
    for name in ("set_stream", "stream"):
        orig = getattr(torch.cuda, name)

        def make(orig_fn: Callable, nm: str) -> Callable:
            def guarded(*a: Any, **k: Any) -> Any:
                if guard.active and guard._candidate_initiated(sys._getframe(1)):
                    guard.refuse("side_stream", f"torch.cuda.{nm}")
                return orig_fn(*a, **k)
            return guarded

        setattr(torch.cuda, name, make(orig, name))
