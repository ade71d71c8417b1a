"""Everything that depends on the Proton output format version lives here, and only here.

Checked against Triton 3.6 (files recorded on an H200, `tests/profiling/fixtures/`):
- `.hatchet`: JSON `[tree, device_info]`; nodes `{"frame": {"name", "type"}, "metrics", "children"}`.
  Kernel-level leaves carry `"time (ns)"` (summed over launches) and `"count"`; probe regions carry
  `"cycles"` (summed over CTAs, warps and launches) and `"normalized_cycles"` (per CTA x warp,
  summed over launches). `device_info = {"CUDA": {"0": {"arch", "num_sms", "clock_rate" (kHz), ...}}}`.
- Kernel-level chrome trace: `{"traceEvents": [{"cat": "kernel", "ts", "dur" (us), "tid": stream}]}`;
  several streams may be written as JSON lines, one object per line.
- Probe chrome trace: one event per region per warp, `pid = "<kernel> Core<sm> CTA<id>"`,
  `tid = "warp <n> (line <k>)"`, `ts`/`dur` = cycles / `Frequency (MHz)` (Proton writes 1000 MHz,
  not the real clock: multiply by the frequency to get cycles back).
Triton 3.7+ can write msgpack instead of JSON; it is decoded when the `msgpack` package is present.
"""

from __future__ import annotations

import json
import logging
import re
from pathlib import Path
from typing import Any

from .errors import TraceFileError, TraceVersionError

log = logging.getLogger(__name__)

# Triton versions (major.minor) whose Proton formats were checked against real files.
CHECKED_TRITON_VERSIONS = ("3.6",)

TIME_NS_KEYS = ("time (ns)",)  # kernel-level time, summed over launches
COUNT_KEYS = ("count",)
CYCLES_KEY = "cycles"
NORMALIZED_CYCLES_KEY = "normalized_cycles"
BYTES_KEY = "bytes"
# flops metric name -> the dtype family whose ceiling applies (workbench.platforms peak_tflops keys)
FLOPS_KEYS = {"flops8": "fp8", "flops16": "fp16", "flops32": "fp32", "flops64": "fp64", "flops": "fp32"}
# what a session records for a dtype: Proton has one metric per bit width (fp16 and bf16 share a ceiling)
FLOPS_METRIC_FOR_DTYPE = {
    "fp8": "flops8",
    "fp16": "flops16",
    "bf16": "flops16",
    "fp32": "flops32",
    "fp64": "flops64",
}
# metrics that are bookkeeping, not measurements
NON_METRIC_KEYS = ("device_id", "device_type")

PROBE_FREQUENCY_ARG = "Frequency (MHz)"
PROBE_DEFAULT_FREQUENCY_MHZ = 1000.0
_PID_RE = re.compile(r"^(?P<kernel>.*?)\s+Core(?P<sm>\d+)\s+CTA(?P<cta>\d+)$")
_TID_RE = re.compile(r"^warp\s+(?P<warp>\d+)(?:\s+\(line\s+(?P<line>\d+)\))?$")

KIND_HATCHET_KERNEL = "hatchet-kernel"
KIND_HATCHET_PROBES = "hatchet-probes"
KIND_CHROME_KERNEL = "chrome-kernel"
KIND_CHROME_PROBES = "chrome-probes"

SIDECAR_SUFFIX = ".meta.json"


def sidecar_path(path: str | Path) -> Path:
    """Where a session writes its metadata next to a trace file: `<file>.meta.json`."""
    return Path(str(path) + SIDECAR_SUFFIX)


def read_document(path: str | Path) -> Any:
    """Read a Proton output (JSON, JSON lines or msgpack) with a clear error for every bad case."""
    p = Path(path)
    if not p.exists():
        raise TraceFileError(
            f"trace file {p} does not exist (was the profiling session finalized, "
            "and did the kernel run while it was active?)"
        )
    raw = p.read_bytes()
    if not raw.strip():
        raise TraceFileError(
            f"trace file {p} is empty: the session that wrote it was probably not "
            "finalized, or no kernel ran while it was active"
        )
    head = raw.lstrip()[:1]
    if head not in (b"{", b"["):
        return _read_msgpack(p, raw)
    text = raw.decode("utf-8", errors="replace")
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        if exc.msg == "Extra data":
            return _read_json_lines(p, text)
        raise TraceFileError(
            f"trace file {p} is truncated or not valid JSON ({exc.msg} at line {exc.lineno}, "
            f"column {exc.colno}, file size {len(raw)} bytes): re-record it and make sure the "
            "session is finalized before the file is read"
        ) from exc


def _read_json_lines(p: Path, text: str) -> dict[str, Any]:
    """Several streams make Proton write one chrome-trace object per line: merge their events."""
    events: list[dict[str, Any]] = []
    unit = None
    for i, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            raise TraceFileError(f"trace file {p}: line {i} is truncated or not JSON ({exc.msg})") from exc
        if not isinstance(obj, dict) or "traceEvents" not in obj:
            raise TraceFileError(f"trace file {p}: line {i} is not a chrome-trace object")
        events.extend(obj["traceEvents"])
        unit = unit or obj.get("displayTimeUnit")
    return {"displayTimeUnit": unit or "us", "traceEvents": events}


def _read_msgpack(p: Path, raw: bytes) -> Any:
    try:
        import msgpack  # optional: only Triton >= 3.7 writes it
    except ImportError as exc:
        raise TraceVersionError(
            f"trace file {p} is not JSON; it looks like a msgpack profile written by Triton >= 3.7. "
            "Install `msgpack` to read it, or re-record with output_format='hatchet' "
            f"(this package checked the JSON formats of Triton {', '.join(CHECKED_TRITON_VERSIONS)})"
        ) from exc
    try:
        return msgpack.unpackb(raw, raw=False, strict_map_key=False)
    except Exception as exc:  # msgpack raises several unrelated types for corrupt data
        raise TraceFileError(
            f"trace file {p} is neither JSON nor msgpack ({type(exc).__name__}: {exc})"
        ) from exc


def _walk(node: dict[str, Any]):
    yield node
    for child in node.get("children", []) or []:
        if isinstance(child, dict):
            yield from _walk(child)


def split_hatchet(doc: Any, path: str | Path = "<memory>") -> tuple[dict[str, Any], dict[str, Any]]:
    """Return (tree, device_info) from a hatchet document of any known layout."""
    if isinstance(doc, list) and doc and isinstance(doc[0], dict) and "frame" in doc[0]:
        device = doc[1] if len(doc) > 1 and isinstance(doc[1], dict) else {}
        return doc[0], device
    if isinstance(doc, dict) and "frame" in doc:  # a bare tree, without device info
        return doc, {}
    raise TraceVersionError(
        f"{path}: not a Proton hatchet tree (expected `[tree, device_info]` with `frame` "
        f"nodes, got {_shape(doc)}); it may come from another Triton/Proton version "
        f"(formats checked: Triton {', '.join(CHECKED_TRITON_VERSIONS)})"
    )


def classify(doc: Any, path: str | Path = "<memory>") -> str:
    """Which of the four Proton outputs `doc` is (see the module docstring)."""
    if isinstance(doc, dict) and "traceEvents" in doc:
        events = doc["traceEvents"]
        if not isinstance(events, list):
            raise TraceFileError(f"{path}: `traceEvents` is not a list")
        if not events:
            raise TraceFileError(
                f"{path}: the chrome trace holds no events (no kernel ran while the session "
                "was active, or the buffer dropped every event)"
            )
        if any(isinstance(e.get("pid"), str) and "CTA" in e["pid"] for e in events[:50]):
            return KIND_CHROME_PROBES
        if any(e.get("cat") == "kernel" or "dur" in e for e in events[:50]):
            return KIND_CHROME_KERNEL
        raise TraceVersionError(
            f"{path}: chrome trace events have neither `CTA` pids nor kernel events "
            f"(first event: {json.dumps(events[0])[:200]}); another Proton version?"
        )
    tree, _ = split_hatchet(doc, path)
    has_time = has_cycles = False
    for node in _walk(tree):
        m = node.get("metrics", {}) or {}
        has_time = has_time or any(k in m for k in TIME_NS_KEYS)
        has_cycles = has_cycles or CYCLES_KEY in m or NORMALIZED_CYCLES_KEY in m
    if has_cycles:
        return KIND_HATCHET_PROBES
    if has_time:
        return KIND_HATCHET_KERNEL
    raise TraceFileError(
        f"{path}: the hatchet tree holds neither kernel times nor probe cycles "
        "(no kernel ran while the session was active?)"
    )


def _shape(doc: Any) -> str:
    if isinstance(doc, list):
        return f"a list of {len(doc)} items"
    if isinstance(doc, dict):
        return "an object with keys " + ", ".join(list(doc)[:6])
    return type(doc).__name__


def metric(m: dict[str, Any], keys: tuple[str, ...]) -> float | None:
    for k in keys:
        if k in m:
            return float(m[k])
    return None


def device_from_info(info: dict[str, Any]) -> dict[str, Any]:
    """First device in a hatchet `device_info`: arch as `sm_90`/`gfx942`, clock in MHz."""
    for backend, devices in (info or {}).items():
        if not isinstance(devices, dict) or not devices:
            continue
        _, d = sorted(devices.items())[0]
        arch = str(d.get("arch", ""))
        if backend.upper() == "CUDA" and arch.isdigit():
            arch = f"sm_{arch}"
        clock_khz = d.get("clock_rate")
        return {
            "backend": backend,
            "arch": arch,
            "num_sms": d.get("num_sms"),
            "clock_mhz": float(clock_khz) / 1e3 if clock_khz else None,
            "memory_clock_mhz": float(d["memory_clock_rate"]) / 1e3 if d.get("memory_clock_rate") else None,
            "bus_width_bits": d.get("bus_width"),
        }
    return {}


def parse_probe_pid(pid: str) -> tuple[str, int, int]:
    """`"k Core0 CTA116"` -> (kernel, sm, cta)."""
    m = _PID_RE.match(str(pid))
    if not m:
        raise TraceVersionError(
            f"probe trace pid {pid!r} does not read as '<kernel> Core<sm> CTA<id>' (another Proton version?)"
        )
    return m["kernel"], int(m["sm"]), int(m["cta"])


def parse_probe_tid(tid: str) -> tuple[int, int]:
    """`"warp 3 (line 1)"` -> (warp, line)."""
    m = _TID_RE.match(str(tid))
    if not m:
        raise TraceVersionError(
            f"probe trace tid {tid!r} does not read as 'warp <n> (line <k>)' "
            "(another Proton version, or a granularity other than warp?)"
        )
    return int(m["warp"]), int(m["line"] or 0)


def probe_event_cycles(event: dict[str, Any]) -> tuple[float, float]:
    """(start, duration) in cycles of one probe event: Proton divides cycles by its frequency arg."""
    freq = float((event.get("args") or {}).get(PROBE_FREQUENCY_ARG, PROBE_DEFAULT_FREQUENCY_MHZ))
    return float(event["ts"]) * freq, float(event["dur"]) * freq


def version_warning(recorded: str | None) -> str | None:
    """A message when a file's sidecar says it was recorded with an unchecked Triton version."""
    if not recorded:
        return None
    mm = ".".join(str(recorded).split(".")[:2])
    if mm in CHECKED_TRITON_VERSIONS:
        return None
    return (
        f"recorded with Triton {recorded}; this parser was checked against the Proton formats of Triton "
        f"{', '.join(CHECKED_TRITON_VERSIONS)}: numbers may be misread"
    )
