"""Proton sessions as context managers that always finalize and refuse to nest.

```python
with profiling.kernel_session("out/run", data="tree", hook="triton") as s:   # CUPTI: kernel times
    with s.scope("add", bytes=3 * 4 * n):
        add_kernel[grid](...)
with profiling.probe_session("out/probes", options=ProbeOptions(buffer_size=8192)) as s:
    add_kernel[grid](..., PROBES=True)                                           # intra-kernel cycles
```
Rules that come from Proton itself (../shared/PROTON_NOTES.md):
- only one instrumentation hook may be active, and a session left open breaks the next one: every
  session here finalizes in `finally`, and a second session while one is open raises SessionActiveError;
- never time a kernel while a probe session is open (host work per launch inflates any host-side
  timer): `assert_not_instrumenting()` guards timing helpers; the kernel times that go with a probe
  run come from a CUPTI session opened alongside (`kernel_times=True`), which measures on the device;
- every kernel compiled while a probe session is open is instrumented and cached separately:
  compile and autotune before the session.
Each session writes `<output>.meta.json` beside its output (Triton version, options, launches per
kernel, SM clock, dropped-event lines, the error if the body raised): the trace model reads it.
"""

from __future__ import annotations

import datetime as _dt
import json
import logging
import os
import sys
import tempfile
import threading
import time
from collections import Counter
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from . import formats as F
from .errors import ProfilingUnavailable, SessionActiveError

log = logging.getLogger(__name__)

_LOCK = threading.Lock()
_ACTIVE: "_Session | None" = None

BUFFER_TYPES = ("shared", "global")
BUFFER_STRATEGIES = ("circular", "flush")
OPTIMIZATIONS = ("clock32", "time_shift", "sched_stores", "sched_barriers")


def _proton():
    """The Proton module; tests replace this function to exercise session logic without a GPU."""
    import triton.profiler as proton

    return proton


def _check_can_profile() -> None:
    if os.environ.get("TRITON_INTERPRET") == "1":
        raise ProfilingUnavailable(
            "TRITON_INTERPRET=1: kernels run in Triton's CPU interpreter, which Proton "
            "cannot profile; read recorded traces with profiling.load(...) instead"
        )
    try:
        import triton

        backend = triton.runtime.driver.active.get_current_target().backend
    except Exception as exc:  # triton raises RuntimeError("0 active drivers ...") and others without a GPU
        raise ProfilingUnavailable(
            f"Proton needs a GPU driver and found none ({type(exc).__name__}: "
            f"{str(exc)[:160]}); read recorded traces with profiling.load(...)"
        ) from exc
    if backend not in ("cuda", "hip"):
        raise ProfilingUnavailable(f"Proton profiles CUDA and HIP targets, not {backend!r}")


def active_session() -> "_Session | None":
    """The open session, if any."""
    return _ACTIVE


def assert_not_instrumenting(what: str = "timing") -> None:
    """Raise when a probe session is open: timings taken now would include Proton's host work."""
    if isinstance(_ACTIVE, ProbeSession):
        raise SessionActiveError(
            f"refusing {what} while probe session {_ACTIVE.name!r} is open: instrumented "
            "launches carry Proton's buffer handling; time outside the session"
        )


@dataclass(frozen=True)
class ProbeOptions:
    """Proton instrumentation mode, with its knobs spelled out (Triton 3.6 `proton.mode.Default`).

    buffer_type: "shared" (per-CTA shared memory, default) or "global" (for kernels short of smem).
    buffer_size: bytes per CTA; 0 lets Proton choose. A circular buffer keeps the newest events only.
    buffer_strategy: "circular" (overwrite) or "flush".
    warps: sample only these warp ids (selective sampling), e.g. (0, 2); None records every warp.
    optimizations: any of "clock32" (32-bit clock reads), "time_shift" (subtract probe cost),
        "sched_stores", "sched_barriers" (AMD).
    """

    buffer_type: str = "shared"
    buffer_size: int = 0
    buffer_strategy: str = "circular"
    warps: tuple[int, ...] | None = None
    optimizations: tuple[str, ...] = ()
    granularity: str = "warp"  # the only granularity that worked on Triton 3.6 (PROTON_NOTES)

    def __post_init__(self) -> None:
        if self.buffer_type not in BUFFER_TYPES:
            raise ValueError(f"buffer_type must be one of {BUFFER_TYPES}, not {self.buffer_type!r}")
        if self.buffer_strategy not in BUFFER_STRATEGIES:
            raise ValueError(
                f"buffer_strategy must be one of {BUFFER_STRATEGIES}, not {self.buffer_strategy!r}"
            )
        if self.buffer_size < 0:
            raise ValueError("buffer_size must be >= 0 (0: Proton's default)")
        bad = [o for o in self.optimizations if o not in OPTIMIZATIONS]
        if bad:
            raise ValueError(f"unknown optimizations {bad}; known: {OPTIMIZATIONS}")
        if self.granularity != "warp":
            raise ValueError("only granularity='warp' works with Triton 3.6's instrumentation backend")
        if self.warps is not None and (not self.warps or any(w < 0 for w in self.warps)):
            raise ValueError("warps must be None (all warps) or a non-empty tuple of warp ids >= 0")

    def to_mode(self) -> Any:
        mode = _proton().mode
        return mode.Default(
            buffer_type=self.buffer_type,
            buffer_size=self.buffer_size,
            buffer_strategy=self.buffer_strategy,
            granularity=self.granularity,
            sampling_strategy="selective" if self.warps is not None else "none",
            sampling_options=",".join(str(w) for w in self.warps) if self.warps is not None else "",
            optimizations=",".join(self.optimizations),
        )


def _strip_suffix(name: str | Path) -> Path:
    p = Path(name)
    return p.with_suffix("") if p.suffix in (".hatchet", ".chrome_trace") else p


def _device_info() -> dict[str, Any]:
    try:
        import triton

        drv = triton.runtime.driver.active
        props = drv.utils.get_device_properties(drv.get_current_device())
        return {
            "clock_mhz": props.get("sm_clock_rate", 0) / 1e3 or None,
            "num_sms": props.get("multiprocessor_count"),
        }
    except Exception as exc:  # device info is a nicety: a session must not fail for it
        log.debug("no device properties: %s", exc)
        return {}


class _Session:
    """Common lifecycle: guard, start, finalize in `finally`, sidecar."""

    data_suffix = {"tree": ".hatchet", "trace": ".chrome_trace"}

    def __init__(self, name: str | Path, data: str = "tree"):
        if data not in self.data_suffix:
            raise ValueError(f"data must be 'tree' or 'trace', not {data!r}")
        self.base = _strip_suffix(name)
        self.name = str(self.base)
        self.data = data
        self.path = Path(str(self.base) + self.data_suffix[data])
        self.outputs: list[Path] = [self.path]
        self.launches: Counter[str] = Counter()
        self.error: str | None = None
        self._ids: list[int] = []
        self._t0 = 0.0
        self._started = ""
        self.closed = False

    # lifecycle -----------------------------------------------------------------------------------
    def __enter__(self) -> "_Session":
        self.start()
        return self

    def __exit__(self, exc_type, exc, tb) -> bool:
        if exc is not None:
            self.error = f"{type(exc).__name__}: {exc}"
        self.close()
        return False

    def start(self) -> "_Session":
        global _ACTIVE
        with _LOCK:
            if _ACTIVE is not None:
                raise SessionActiveError(
                    f"a profiling session is already open ({_ACTIVE.kind} session writing {_ACTIVE.path}, "
                    f"started {_ACTIVE._started}); close it (leave its `with` block or call .close()) "
                    "before starting another"
                )
            _check_can_profile()
            self.base.parent.mkdir(parents=True, exist_ok=True)
            _ACTIVE = self
        self._started = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
        self._t0 = time.perf_counter()
        try:
            self._start()
            self._install_counter()
        except BaseException:
            self._finalize_quietly()
            with _LOCK:
                _ACTIVE = None
            raise
        log.info("%s session started: %s", self.kind, self.path)
        return self

    def close(self) -> None:
        """Finalize Proton (always), release the guard, write the sidecar. Safe to call twice."""
        global _ACTIVE
        if self.closed:
            return
        try:
            self._remove_counter()
            self._finalize()
        finally:
            self.closed = True
            with _LOCK:
                if _ACTIVE is self:
                    _ACTIVE = None
            self._write_sidecars()
        if self.error:
            log.warning(
                "%s session %s closed after an error in its body: %s", self.kind, self.path, self.error
            )

    # pieces subclasses fill in --------------------------------------------------------------------
    kind = "base"

    def _start(self) -> None:
        raise NotImplementedError

    def _finalize(self) -> None:
        proton = _proton()
        errors = []
        for sid in reversed(self._ids):
            try:
                proton.finalize(sid)
            except Exception as exc:  # keep finalizing the others; report after
                errors.append(exc)
        self._ids.clear()
        if errors:
            raise errors[0]

    def _finalize_quietly(self) -> None:
        try:
            self._remove_counter()
            self._finalize()
        except Exception as exc:
            log.warning("finalizing a half-started session failed: %s", exc)

    def _counter(self, metadata: Any) -> None:
        name = getattr(metadata, "data", {}).get("name") if metadata is not None else None
        self.launches[name or "?"] += 1

    def _install_counter(self) -> None:
        import triton

        triton.knobs.runtime.launch_enter_hook.add(self._counter)

    def _remove_counter(self) -> None:
        try:
            import triton

            triton.knobs.runtime.launch_enter_hook.remove(self._counter)
        except Exception as exc:
            log.debug("launch counter not removed: %s", exc)

    def _meta(self) -> dict[str, Any]:
        try:
            import triton

            tv = triton.__version__
        except ImportError:
            tv = None
        return {
            "kind": self.kind,
            "data": self.data,
            "triton": tv,
            "started": self._started,
            "wall_s": round(time.perf_counter() - self._t0, 3),
            "launches": dict(self.launches),
            "device": _device_info(),
            "error": self.error,
        }

    def _write_sidecars(self) -> None:
        meta = self._meta()
        for out in self.outputs:
            try:
                F.sidecar_path(out).write_text(json.dumps(meta, indent=1, default=str))
            except OSError as exc:
                log.warning("could not write %s: %s", F.sidecar_path(out), exc)


class KernelSession(_Session):
    """Kernel-level profiling through CUPTI (roctracer on AMD): per-kernel device time and count."""

    kind = "kernel"

    def __init__(self, name: str | Path, data: str = "tree", hook: str | None = "triton"):
        super().__init__(name, data)
        self.hook = hook

    def _start(self) -> None:
        self._ids.append(_proton().start(self.name, data=self.data, hook=self.hook))

    def scope(
        self,
        name: str,
        bytes: float | None = None,
        flops: float | None = None,
        flops_dtype: str = "fp16",
        **metrics: float,
    ) -> Any:
        """A named scope; `bytes`/`flops` become GB/s and TFLOP/s of the kernels under it."""
        m = dict(metrics)
        if bytes is not None:
            m[F.BYTES_KEY] = float(bytes)
        if flops is not None:
            if flops_dtype not in F.FLOPS_METRIC_FOR_DTYPE:
                raise ValueError(
                    f"flops_dtype must be one of {sorted(F.FLOPS_METRIC_FOR_DTYPE)}, not {flops_dtype!r}"
                )
            m[F.FLOPS_METRIC_FOR_DTYPE[flops_dtype]] = float(flops)
        return _proton().scope(name, m or None)


class ProbeSession(_Session):
    """Intra-kernel probes (Proton's instrumentation backend): cycles per named region per warp.

    kernel_times=True opens a CUPTI session beside it (`<name>_kernels.hatchet`), so the device
    time of the instrumented launches is known without timing anything on the host.
    """

    kind = "probes"

    def __init__(
        self,
        name: str | Path,
        data: str = "tree",
        options: ProbeOptions | None = None,
        kernel_times: bool = False,
        capture_stderr: bool = True,
    ):
        super().__init__(name, data)
        self.options = options or ProbeOptions()
        self.kernel_times = kernel_times
        self.kernels_path = Path(str(self.base) + "_kernels.hatchet")
        if kernel_times:
            self.outputs.append(self.kernels_path)
        self.capture_stderr = capture_stderr
        self.dropped_lines = 0
        self._stderr: _Fd2Capture | None = None

    def _start(self) -> None:
        proton = _proton()
        if self.capture_stderr:
            self._stderr = _Fd2Capture().start()
        if self.kernel_times:
            self._ids.append(proton.start(str(self.base) + "_kernels", data="tree"))
        self._ids.append(
            proton.start(self.name, data=self.data, backend="instrumentation", mode=self.options.to_mode())
        )

    def scope(self, name: str) -> Any:
        """A host-side scope: region rows of kernels launched inside carry it in their `scope` column."""
        return _proton().scope(name)

    def _finalize(self) -> None:
        try:
            super()._finalize()
        finally:
            if self._stderr is not None:
                lines = self._stderr.stop()
                self.dropped_lines = sum("dropped" in line for line in lines)
                other = [line for line in lines if "dropped" not in line]
                if self.dropped_lines:
                    log.warning(
                        "Proton dropped events in %d warps' buffers (circular buffer overflow): "
                        "early regions may be missing; raise buffer_size or sample fewer warps",
                        self.dropped_lines,
                    )
                for line in other[:50]:
                    sys.stderr.write(line + "\n")
                self._stderr = None

    def _meta(self) -> dict[str, Any]:
        meta = super()._meta()
        meta.update(
            options=asdict(self.options),
            dropped_event_lines=self.dropped_lines,
            kernel_times=str(self.kernels_path) if self.kernel_times else None,
        )
        return meta


class _Fd2Capture:
    """Send file descriptor 2 to a temporary file: Proton prints one line per warp that dropped events."""

    def __init__(self) -> None:
        self._saved: int | None = None
        self._tmp: Any = None

    def start(self) -> "_Fd2Capture":
        try:
            sys.stderr.flush()
            self._tmp = tempfile.TemporaryFile(mode="w+b")
            self._saved = os.dup(2)
            os.dup2(self._tmp.fileno(), 2)
        except (OSError, ValueError) as exc:  # no real fd 2 (some notebook front ends): do without
            log.debug("stderr not captured: %s", exc)
            self._saved = None
        return self

    def stop(self) -> list[str]:
        if self._saved is None:
            return []
        os.dup2(self._saved, 2)
        os.close(self._saved)
        self._saved = None
        self._tmp.seek(0)
        text = self._tmp.read().decode("utf-8", errors="replace")
        self._tmp.close()
        return [line for line in text.splitlines() if line.strip()]


def kernel_session(name: str | Path, data: str = "tree", hook: str | None = "triton") -> KernelSession:
    """A kernel-level (CUPTI) session; use as a context manager."""
    return KernelSession(name, data=data, hook=hook)


def probe_session(
    name: str | Path,
    data: str = "tree",
    options: ProbeOptions | None = None,
    kernel_times: bool = False,
    capture_stderr: bool = True,
) -> ProbeSession:
    """An intra-kernel probe session; use as a context manager. Launch kernels with PROBES=True inside."""
    return ProbeSession(
        name, data=data, options=options, kernel_times=kernel_times, capture_stderr=capture_stderr
    )
