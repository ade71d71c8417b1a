"""Trace model: Proton outputs (hatchet trees, chrome traces; kernel-level and probes) as tidy tables.

```python
prof = profiling.load("run.hatchet", "run_probes.hatchet", "run_probes.chrome_trace")
prof.kernels   # one row per (scope path, kernel): launches, time, bytes, GB/s, TFLOP/s vs ceilings
prof.regions   # one row per (kernel, probe region): cycles, per launch, share, CTA/warp spread, ns
prof.events    # one row per probe event (region x warp x CTA), cycles and ns
prof.overlap() # which regions of different warps of one CTA run at the same time
```
Format details (and their version differences) are in `profiling.formats`.
"""

from __future__ import annotations

import json
import logging
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Sequence

import numpy as np
import pandas as pd

from platforms import ceilings

from . import formats as F
from .errors import MissingRegionsError, ProfilingError, TraceFileError

log = logging.getLogger(__name__)

TRACE_SUFFIXES = (".hatchet", ".chrome_trace")  # what a directory expands to; files may have any name

KERNEL_COLUMNS = [
    "kernel",
    "scope",
    "launches",
    "time_ns",
    "time_per_launch_us",
    "bytes",
    "flops",
    "flops_dtype",
    "gbps",
    "tflops",
    "bw_ceiling_gbps",
    "bw_fraction",
    "tflops_ceiling",
    "tflops_fraction",
    "source",
]
REGION_COLUMNS = [
    "kernel",
    "scope",
    "region",
    "parent",
    "depth",
    "cycles",
    "normalized_cycles",
    "launches",
    "cycles_per_launch",
    "share",
    "ns_per_launch",
    "n_ctas",
    "n_warps",
    "n_events",
    "dur_median",
    "dur_p10",
    "dur_p90",
    "cta_cv",
    "warp_spread",
    "source",
]
EVENT_COLUMNS = [
    "kernel",
    "scope",
    "region",
    "sm",
    "cta",
    "warp",
    "line",
    "start_cycles",
    "dur_cycles",
    "end_cycles",
    "start_ns",
    "dur_ns",
    "source",
]




@dataclass
class Profile:
    """Tables read from one or more Proton outputs of the same run."""

    sources: list[Path] = field(default_factory=list)
    device: dict[str, Any] = field(default_factory=dict)
    kernels: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=KERNEL_COLUMNS))
    regions: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=REGION_COLUMNS))
    events: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=EVENT_COLUMNS))
    kernel_events: pd.DataFrame = field(
        default_factory=lambda: pd.DataFrame(
            columns=["kernel", "scope", "stream", "start_us", "dur_us", "source"]
        )
    )
    meta: dict[str, Any] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)

    @property
    def clock_mhz(self) -> float | None:
        return self.device.get("clock_mhz")

    @property
    def kernel_names(self) -> list[str]:
        names = list(self.kernels["kernel"]) + list(self.regions["kernel"]) + list(self.events["kernel"])
        return list(dict.fromkeys(names))

    def region_names(self, kernel: str | None = None) -> list[str]:
        r, e = self.regions, self.events
        if kernel is not None:
            r, e = r[r["kernel"] == kernel], e[e["kernel"] == kernel]
        return list(dict.fromkeys(list(r["region"]) + list(e["region"])))

    def ctas(self, kernel: str | None = None) -> list[int]:
        e = self.events if kernel is None else self.events[self.events["kernel"] == kernel]
        return sorted(int(c) for c in e["cta"].unique())

    def timeline(self, cta: int, kernel: str | None = None) -> pd.DataFrame:
        """Probe events of one CTA, one row per region instance, sorted by warp then start."""
        e = self.events[self.events["cta"] == cta]
        if kernel is not None:
            e = e[e["kernel"] == kernel]
        return e.sort_values(["warp", "start_cycles"]).reset_index(drop=True)

    def cta_durations(self, region: str, kernel: str | None = None) -> pd.DataFrame:
        """Per (CTA, warp): total cycles spent in `region` during the traced launch(es)."""
        e = self.events[self.events["region"] == region]
        if kernel is not None:
            e = e[e["kernel"] == kernel]
        g = e.groupby(["kernel", "cta", "warp"], as_index=False)[["dur_cycles", "dur_ns"]].sum()
        return g

    def overlap(self, kernel: str | None = None, max_ctas: int = 256) -> pd.DataFrame:
        """For each pair of regions (A, B): how much of A's time another warp of the same CTA is in B.

        `concurrent_share` = sum over A's events of min(dur_A, overlap with B events of other warps),
        divided by A's total duration: 1.0 means whenever a warp is in A, some other warp is in B.
        """
        return overlap_table(
            self.events if kernel is None else self.events[self.events["kernel"] == kernel], max_ctas=max_ctas
        )

    def check_regions(self, expected: Iterable[str], kernel: str | None = None) -> None:
        """Raise MissingRegionsError unless every expected region shows non-zero cycles."""
        expected = list(expected)
        r = self.regions if kernel is None else self.regions[self.regions["kernel"] == kernel]
        present = set(r.loc[r["cycles"] > 0, "region"])
        missing = [x for x in expected if x not in present]
        if missing:
            where = f"kernel {kernel!r}" if kernel else "the profile"
            hint = (
                ""
                if present
                else " (no probe regions at all: was the kernel launched with PROBES=True "
                "while a probe session was active?)"
            )
            if present:
                hint = (
                    " (a circular buffer keeps only the newest events: raise buffer_size, use "
                    "buffer_strategy='flush', or sample fewer warps)"
                )
            raise MissingRegionsError(
                f"{where} lacks probe regions {missing}; found {sorted(present)}{hint}", missing
            )


def load(
    *paths: str | Path,
    clock_mhz: float | None = None,
    launches: dict[str, int] | int | None = None,
    on_error: str = "raise",
) -> Profile:
    """Read Proton outputs (files or directories of them) into one Profile.

    clock_mhz: the SM clock used to turn cycles into ns; default: the file's device info or sidecar.
    launches: launches per kernel name (or one count for all) behind a probe tree; default: the sidecar
    written by `profiling.probe_session`, else the kernel-level profile's count, else 1 (with a warning).
    on_error: "raise" (default) or "warn": keep what could be read and list the rest in `.warnings`.
    """
    if on_error not in ("raise", "warn"):
        raise ValueError("on_error must be 'raise' or 'warn'")
    files = _expand(paths)
    if not files:
        raise TraceFileError(
            f"no trace files found in {', '.join(map(str, paths)) or 'nothing'} "
            f"(looked for {', '.join(TRACE_SUFFIXES)})"
        )
    prof = Profile()
    parsed: list[tuple[Path, str, Any]] = []
    for f in files:
        try:
            doc = F.read_document(f)
            kind = F.classify(doc, f)
        except ProfilingError as exc:
            if on_error == "raise":
                raise
            prof.warnings.append(str(exc))
            log.warning("%s", exc)
            continue
        meta = _read_sidecar(f)
        if meta:
            prof.meta[f.name] = meta
            if w := F.version_warning(meta.get("triton")):
                prof.warnings.append(f"{f.name}: {w}")
        parsed.append((f, kind, doc))
        prof.sources.append(f)
    if not parsed:
        raise TraceFileError(
            "no readable trace among " + ", ".join(map(str, files)) + ": " + "; ".join(prof.warnings)
        )
    # Device info first (hatchet files carry it), so chrome probe traces can use the clock.
    for f, kind, doc in parsed:
        if kind.startswith("hatchet") and not prof.device:
            prof.device = F.device_from_info(F.split_hatchet(doc, f)[1])
    for meta in prof.meta.values():
        for k, v in (meta.get("device") or {}).items():
            prof.device.setdefault(k, v)
            if prof.device.get(k) is None:
                prof.device[k] = v
    if clock_mhz:
        prof.device["clock_mhz"] = float(clock_mhz)
    kernels, regions, events, kevents = [], [], [], []
    for f, kind, doc in parsed:
        if kind == F.KIND_HATCHET_KERNEL:
            kernels.append(_kernels_from_hatchet(doc, f))
        elif kind == F.KIND_CHROME_KERNEL:
            ke = _kernel_events_from_chrome(doc, f)
            kevents.append(ke)
            kernels.append(_kernels_from_events(ke))
        elif kind == F.KIND_HATCHET_PROBES:
            regions.append(_regions_from_hatchet(doc, f))
        else:
            events.append(_events_from_chrome(doc, f))
    prof.kernels = _concat(kernels, KERNEL_COLUMNS)
    prof.kernel_events = _concat(kevents, list(prof.kernel_events.columns))
    prof.events = _concat(events, EVENT_COLUMNS)
    clock = prof.clock_mhz
    if len(prof.events):
        if clock:
            prof.events["start_ns"] = prof.events["start_cycles"] * 1e3 / clock
            prof.events["dur_ns"] = prof.events["dur_cycles"] * 1e3 / clock
        else:
            prof.warnings.append("no SM clock recorded: probe times stay in cycles (pass clock_mhz=...)")
    tree_regions = _concat(regions, REGION_COLUMNS)
    prof.regions = _finish_regions(tree_regions, prof, launches)
    _finish_kernels(prof)
    return prof


def _expand(paths: Sequence[str | Path]) -> list[Path]:
    out: list[Path] = []
    for p in map(Path, paths):
        if p.is_dir():
            out.extend(
                sorted(
                    q
                    for q in p.iterdir()
                    if q.suffix in TRACE_SUFFIXES and not q.name.endswith(F.SIDECAR_SUFFIX) and q.is_file()
                )
            )
        else:
            out.append(p)
    return out


def _read_sidecar(f: Path) -> dict[str, Any]:
    sc = F.sidecar_path(f)
    if not sc.exists():
        return {}
    try:
        return json.loads(sc.read_text())
    except json.JSONDecodeError:
        log.warning("ignoring unreadable sidecar %s", sc)
        return {}


def _concat(frames: list[pd.DataFrame], columns: list[str]) -> pd.DataFrame:
    frames = [f for f in frames if len(f)]
    if not frames:
        return pd.DataFrame(columns=columns)
    return pd.concat(frames, ignore_index=True).reindex(columns=columns)


def _is_time_node(n: dict[str, Any]) -> bool:
    m = n.get("metrics", {}) or {}
    return F.metric(m, F.TIME_NS_KEYS) is not None and (F.metric(m, F.COUNT_KEYS) or 0) > 0


def _kernels_from_hatchet(doc: Any, f: Path) -> pd.DataFrame:
    tree, _ = F.split_hatchet(doc, f)
    rows: list[dict[str, Any]] = []

    def visit(node: dict[str, Any], scopes: list[dict[str, Any]]) -> None:
        name = node.get("frame", {}).get("name", "?")
        kids = node.get("children", []) or []
        if _is_time_node(node) and not any(_is_time_node(c) for c in kids):
            m = node["metrics"]
            row = {
                "kernel": name,
                "scope": "/".join(s["frame"]["name"] for s in scopes if s["frame"]["name"] != "ROOT"),
                "launches": int(F.metric(m, F.COUNT_KEYS) or 0),
                "time_ns": F.metric(m, F.TIME_NS_KEYS),
                "source": f.name,
            }
            row.update(_work(m))
            rows.append(row)
            return
        for c in kids:
            visit(c, scopes + [node])

    visit(tree, [])
    df = pd.DataFrame(rows)
    if len(df):
        _inherit_scope_work(tree, df)
    return df


def _work(m: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if F.BYTES_KEY in m and m[F.BYTES_KEY]:
        out["bytes"] = float(m[F.BYTES_KEY])
    for key, dtype in F.FLOPS_KEYS.items():
        if m.get(key):
            out["flops"], out["flops_dtype"] = float(m[key]), dtype
            break
    return out


def _inherit_scope_work(tree: dict[str, Any], df: pd.DataFrame) -> None:
    """A scope's bytes/flops go to its kernel when exactly one kernel ran under that scope."""

    def visit(node: dict[str, Any], path: list[str]) -> None:
        name = node.get("frame", {}).get("name", "?")
        here = path + ([name] if name != "ROOT" else [])
        work = _work(node.get("metrics", {}) or {}) if not _is_time_node(node) else {}
        if work:
            prefix = "/".join(here)
            under = df[(df["scope"] == prefix) | df["scope"].str.startswith(prefix + "/")]
            if len(under) == 1:
                i = under.index[0]
                for k, v in work.items():
                    if k not in df.columns or pd.isna(df.at[i, k]):
                        df.loc[i, k] = v
        for c in node.get("children", []) or []:
            visit(c, here)

    visit(tree, [])


def _kernel_events_from_chrome(doc: dict[str, Any], f: Path) -> pd.DataFrame:
    rows = []
    for e in doc["traceEvents"]:
        if e.get("ph", "X") != "X" or "dur" not in e:
            continue
        stack = (e.get("args") or {}).get("call_stack") or []
        rows.append(
            {
                "kernel": e.get("name", "?"),
                "scope": "/".join(s for s in stack[1:-1]),
                "stream": e.get("tid"),
                "start_us": float(e["ts"]),
                "dur_us": float(e["dur"]),
                "source": f.name,
            }
        )
    return pd.DataFrame(rows)


def _kernels_from_events(ke: pd.DataFrame) -> pd.DataFrame:
    if not len(ke):
        return ke
    g = ke.groupby(["kernel", "scope", "source"], as_index=False).agg(
        launches=("dur_us", "size"), time_ns=("dur_us", "sum")
    )
    g["time_ns"] = g["time_ns"] * 1e3
    return g


def _regions_from_hatchet(doc: Any, f: Path) -> pd.DataFrame:
    tree, _ = F.split_hatchet(doc, f)
    rows: list[dict[str, Any]] = []

    def is_region(n: dict[str, Any]) -> bool:
        m = n.get("metrics", {}) or {}
        return F.CYCLES_KEY in m or F.NORMALIZED_CYCLES_KEY in m

    def visit(node: dict[str, Any], scopes: list[str], kernel: str | None, parents: list[str]) -> None:
        name = node.get("frame", {}).get("name", "?")
        kids = node.get("children", []) or []
        if is_region(node):
            m = node["metrics"]
            rows.append(
                {
                    "kernel": kernel or "?",
                    "scope": "/".join(scopes),
                    "region": name,
                    "parent": parents[-1] if parents else "",
                    "depth": len(parents),
                    "cycles": float(m.get(F.CYCLES_KEY, 0.0)),
                    "normalized_cycles": float(m.get(F.NORMALIZED_CYCLES_KEY, math.nan)),
                    "source": f.name,
                }
            )
            for c in kids:
                visit(c, scopes, kernel, parents + [name])
            return
        if any(is_region(c) for c in kids):  # the kernel node: its children are top-level regions
            for c in kids:
                visit(c, scopes, name, [])
            return
        for c in kids:
            visit(c, scopes + ([name] if name != "ROOT" else []), kernel, parents)

    visit(tree, [], None, [])
    return pd.DataFrame(rows)


def _events_from_chrome(doc: dict[str, Any], f: Path) -> pd.DataFrame:
    rows = []
    for e in doc["traceEvents"]:
        if "dur" not in e or "pid" not in e:
            continue
        kernel, sm, cta = F.parse_probe_pid(e["pid"])
        warp, line = F.parse_probe_tid(e.get("tid", "warp 0"))
        start, dur = F.probe_event_cycles(e)
        stack = (e.get("args") or {}).get("call_stack") or []
        rows.append((kernel, "/".join(stack[1:-1]), e.get("name", "?"), sm, cta, warp, line, start, dur))
    df = pd.DataFrame(rows, columns=EVENT_COLUMNS[:9])
    df["end_cycles"] = df["start_cycles"] + df["dur_cycles"]
    df["start_ns"] = np.nan
    df["dur_ns"] = np.nan
    df["source"] = f.name
    return df


def _launches_for(
    prof: Profile, kernel: str, scope: str, source: str, launches: dict[str, int] | int | None
) -> tuple[int, str]:
    if isinstance(launches, int):
        return launches, "given"
    if isinstance(launches, dict) and kernel in launches:
        return int(launches[kernel]), "given"
    own = (prof.meta.get(source) or {}).get("launches") or {}  # the sidecar of the file the row came from
    if kernel in own:
        return int(own[kernel]), "sidecar"
    k = prof.kernels[prof.kernels["kernel"] == kernel] if len(prof.kernels) else prof.kernels
    same_scope = k[k["scope"] == scope] if len(k) else k
    if len(same_scope):  # a kernel-level session ran alongside: its count for the same scope
        return int(same_scope["launches"].sum()), "kernel-level profile"
    if len(k) and not scope:
        return int(k["launches"].sum()), "kernel-level profile"
    return 1, "assumed"


def _finish_regions(tree: pd.DataFrame, prof: Profile, launches: dict[str, int] | int | None) -> pd.DataFrame:
    ev = prof.events
    if not len(tree) and len(ev):
        # No tree: build region totals from the trace (sampled warps only, as recorded).
        g = ev.groupby(["kernel", "scope", "region", "line", "source"], as_index=False).agg(
            cycles=("dur_cycles", "sum")
        )
        units = ev.groupby("kernel").apply(
            lambda d: len(d[["cta", "warp"]].drop_duplicates()), include_groups=False
        )
        g["normalized_cycles"] = g["cycles"] / g["kernel"].map(units)
        g["depth"] = g["line"].astype(int)
        g["parent"] = ""
        tree = (
            g.drop(columns="line")
            .groupby(["kernel", "scope", "region"], as_index=False)
            .agg(
                {
                    "cycles": "sum",
                    "normalized_cycles": "sum",
                    "depth": "min",
                    "parent": "first",
                    "source": "first",
                }
            )
        )
    if not len(tree):
        return pd.DataFrame(columns=REGION_COLUMNS)
    tree = tree.copy()
    assumed = []
    counts = []
    for k, s, src in zip(tree["kernel"], tree["scope"], tree["source"], strict=False):
        n, how = _launches_for(prof, k, s, src, launches)
        counts.append(n)
        if how == "assumed" and k not in assumed:
            assumed.append(k)
    if assumed:
        prof.warnings.append(
            f"launch count unknown for {assumed}: per-launch cycles assume 1 launch "
            "(record with profiling.probe_session or pass launches=...)"
        )
    tree["launches"] = counts
    tree["cycles_per_launch"] = tree["normalized_cycles"] / tree["launches"]
    top = tree[tree["depth"] == 0].groupby(["kernel", "scope"])["cycles"].sum()
    tree["share"] = [
        c / top.get((k, s), math.nan) if top.get((k, s), 0) else math.nan
        for k, s, c in zip(tree["kernel"], tree["scope"], tree["cycles"], strict=False)
    ]
    clock = prof.clock_mhz
    tree["ns_per_launch"] = tree["cycles_per_launch"] * 1e3 / clock if clock else math.nan
    if len(ev):
        tree = tree.drop(columns=[c for c in _SPREAD_COLUMNS if c in tree.columns])
        tree = tree.merge(_spread(ev), on=["kernel", "region"], how="left")
    return tree.reindex(columns=REGION_COLUMNS)


_SPREAD_COLUMNS = [
    "n_ctas",
    "n_warps",
    "n_events",
    "dur_median",
    "dur_p10",
    "dur_p90",
    "cta_cv",
    "warp_spread",
]


def _spread(ev: pd.DataFrame) -> pd.DataFrame:
    """Per region: distribution of per-(CTA, warp) cycles, CTA-to-CTA and warp-to-warp spread."""
    rows = []
    for (kernel, region), d in ev.groupby(["kernel", "region"]):
        per_unit = d.groupby(["cta", "warp"])["dur_cycles"].sum()
        per_cta = d.groupby("cta")["dur_cycles"].sum()
        per_warp = d.groupby("warp")["dur_cycles"].sum() / d["cta"].nunique()
        rows.append(
            {
                "kernel": kernel,
                "region": region,
                "n_ctas": d["cta"].nunique(),
                "n_warps": d["warp"].nunique(),
                "n_events": len(d),
                "dur_median": per_unit.median(),
                "dur_p10": per_unit.quantile(0.1),
                "dur_p90": per_unit.quantile(0.9),
                "cta_cv": per_cta.std(ddof=0) / per_cta.mean() if per_cta.mean() else math.nan,
                "warp_spread": (per_warp.max() - per_warp.min()) / per_warp.mean()
                if per_warp.mean()
                else math.nan,
            }
        )
    return pd.DataFrame(rows, columns=["kernel", "region"] + _SPREAD_COLUMNS)


def _finish_kernels(prof: Profile) -> None:
    k = prof.kernels
    if not len(k):
        return
    for col in ("bytes", "flops"):
        k[col] = pd.to_numeric(k[col], errors="coerce")
    k["time_per_launch_us"] = k["time_ns"] / k["launches"].clip(lower=1) / 1e3
    seconds = k["time_ns"] * 1e-9
    k["gbps"] = k["bytes"] / seconds / 1e9
    k["tflops"] = k["flops"] / seconds / 1e12
    ceil = ceilings(str(prof.device.get("arch", "")))
    bw = float(ceil.get("mem_bandwidth_gbs", math.nan))
    k["bw_ceiling_gbps"] = bw
    k["bw_fraction"] = k["gbps"] / bw
    peaks = ceil.get("peak_tflops", {})
    k["tflops_ceiling"] = [
        float(peaks.get(d, math.nan)) if isinstance(d, str) else math.nan for d in k["flops_dtype"]
    ]
    k["tflops_fraction"] = k["tflops"] / k["tflops_ceiling"]
    if not ceil and (k["bytes"].notna().any() or k["flops"].notna().any()):
        prof.warnings.append(f"no roofline ceilings known for arch {prof.device.get('arch') or '?'}")
    prof.kernels = k.sort_values("time_ns", ascending=False).reset_index(drop=True)


def overlap_table(ev: pd.DataFrame, max_ctas: int = 256) -> pd.DataFrame:
    cols = ["kernel", "region_a", "region_b", "a_cycles", "concurrent_cycles", "concurrent_share", "n_ctas"]
    if not len(ev):
        return pd.DataFrame(columns=cols)
    acc: dict[tuple[str, str, str], list[float]] = {}
    for kernel, dk in ev.groupby("kernel"):
        ctas = sorted(dk["cta"].unique())[:max_ctas]
        for cta in ctas:
            d = dk[dk["cta"] == cta]
            s, e = d["start_cycles"].to_numpy(), d["end_cycles"].to_numpy()
            w, r = d["warp"].to_numpy(), d["region"].to_numpy()
            inter = np.clip(np.minimum(e[:, None], e[None, :]) - np.maximum(s[:, None], s[None, :]), 0, None)
            inter[w[:, None] == w[None, :]] = 0.0  # only other warps count
            for rb in np.unique(r):
                conc = np.minimum(inter[:, r == rb].sum(axis=1), e - s)
                for ra in np.unique(r):
                    sel = r == ra
                    key = (kernel, ra, rb)
                    a = acc.setdefault(key, [0.0, 0.0, 0])
                    a[0] += float((e - s)[sel].sum())
                    a[1] += float(conc[sel].sum())
                    a[2] += 1
    rows = [
        {
            "kernel": k,
            "region_a": ra,
            "region_b": rb,
            "a_cycles": v[0],
            "concurrent_cycles": v[1],
            "concurrent_share": v[1] / v[0] if v[0] else math.nan,
            "n_ctas": v[2],
        }
        for (k, ra, rb), v in acc.items()
    ]
    return pd.DataFrame(rows, columns=cols)


def subsample_probe_trace(src: str | Path, dst: str | Path, max_ctas: int = 64) -> dict[str, int]:
    """Copy a probe chrome trace keeping `max_ctas` evenly spaced CTAs, so committed files stay small."""
    doc = F.read_document(src)
    if F.classify(doc, src) != F.KIND_CHROME_PROBES:
        raise TraceFileError(f"{src} is not a probe chrome trace")
    events = doc["traceEvents"]
    ctas = sorted({F.parse_probe_pid(e["pid"])[2] for e in events if "pid" in e})
    step = max(1, math.ceil(len(ctas) / max_ctas))
    keep = set(ctas[::step][:max_ctas])
    kept = [e for e in events if "pid" in e and F.parse_probe_pid(e["pid"])[2] in keep]
    out = dict(doc, traceEvents=kept)
    Path(dst).write_text(json.dumps(out, separators=(",", ":")))
    return {
        "ctas_total": len(ctas),
        "ctas_kept": len(keep),
        "events_total": len(events),
        "events_kept": len(kept),
    }
