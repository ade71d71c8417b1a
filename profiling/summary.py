"""`summarize(profile) -> str`: a few lines of profile feedback for the search's universal operator."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Sequence

from .trace import Profile, load


def _fmt_bw(gbps: float) -> str:
    return f"{gbps / 1e3:.2f} TB/s" if gbps >= 1000 else f"{gbps:.0f} GB/s"


def _fmt_time(us: float) -> str:
    return f"{us / 1e3:.2f} ms" if us >= 1000 else f"{us:.1f} us"


def summarize(
    profile: Profile | str | Path | Sequence[str | Path],
    max_kernels: int = 3,
    max_regions: int = 4,
    overhead: dict[str, float] | None = None,
) -> str:
    """Short text: where the cycles go, achieved bandwidth/TFLOP/s against the ceilings, launches.

    `profile`: a Profile or path(s) to Proton outputs. `overhead`: kernel -> fractional instrumentation
    overhead (0.08 = +8%); default: the `overhead` recorded in the files' sidecars, if any.
    Example line: "kernel `add`: 3 launches, 2.4 us each; 1.75 TB/s of 4.30 TB/s (41%)".
    """
    if not isinstance(profile, Profile):
        paths = [profile] if isinstance(profile, (str, Path)) else list(profile)
        profile = load(*paths, on_error="warn")
    lines: list[str] = []
    k = profile.kernels
    if len(k):
        agg = k.groupby("kernel", as_index=False, sort=False).agg(
            launches=("launches", "sum"),
            time_ns=("time_ns", "sum"),
            bytes=("bytes", "sum"),
            flops=("flops", "sum"),
            bw=("bw_ceiling_gbps", "first"),
            tf=("tflops_ceiling", "first"),
        )
        agg = agg.sort_values("time_ns", ascending=False)
        total = agg["time_ns"].sum()
        for _, r in agg.head(max_kernels).iterrows():
            per = r["time_ns"] / max(r["launches"], 1) / 1e3
            s = (
                f"kernel `{r['kernel']}`: {int(r['launches'])} launches, {_fmt_time(per)} each"
                f" ({100 * r['time_ns'] / total:.0f}% of GPU time)"
            )
            secs = r["time_ns"] * 1e-9
            if r["bytes"] > 0:
                g = r["bytes"] / secs / 1e9
                s += f"; {_fmt_bw(g)}" + (
                    f" of {_fmt_bw(r['bw'])} ({100 * g / r['bw']:.0f}%)" if r["bw"] > 0 else ""
                )
            if r["flops"] > 0:
                t = r["flops"] / secs / 1e12
                s += f"; {t:.1f} TFLOP/s" + (
                    f" of {r['tf']:.0f} ({100 * t / r['tf']:.0f}%)" if r["tf"] > 0 else ""
                )
            lines.append(s)
    reg = profile.regions
    if len(reg):
        for (kernel, scope), d in reg.groupby(["kernel", "scope"], sort=False):
            top = d[d["depth"] == 0].sort_values("cycles", ascending=False)
            parts = []
            for _, r in top.head(max_regions).iterrows():
                p = (
                    f"`{r['region']}` {100 * r['share']:.0f}%"
                    if not math.isnan(r["share"])
                    else f"`{r['region']}`"
                )
                if not math.isnan(r["ns_per_launch"]):
                    p += f" ({r['cycles_per_launch']:.0f} cycles = {r['ns_per_launch']:.0f} ns per warp)"
                else:
                    p += f" ({r['cycles_per_launch']:.0f} cycles per warp)"
                if (
                    not math.isnan(r.get("dur_p10", math.nan))
                    and r["dur_p10"] > 0
                    and r["dur_p90"] / r["dur_p10"] > 2
                ):
                    p += f", p90/p10 across CTAs {r['dur_p90'] / r['dur_p10']:.1f}x"
                parts.append(p)
            where = f"`{kernel}`" + (f" under scope `{scope}`" if scope else "")
            lines.append(f"probes in {where} (share of instrumented cycles): " + "; ".join(parts))
    ov = overhead if overhead is not None else _recorded_overhead(profile)
    for kernel, frac in ov.items():
        lines.append(
            f"instrumentation overhead for `{kernel}`: {100 * frac:+.0f}% device time with probes on"
        )
    if profile.warnings:
        lines.append("caveats: " + "; ".join(w[:160] for w in profile.warnings[:2]))
    return "\n".join(lines) if lines else "profile holds no kernel times and no probe regions"


def _recorded_overhead(profile: Profile) -> dict[str, float]:
    out: dict[str, float] = {}
    for meta in profile.meta.values():
        for kernel, frac in (meta.get("overhead") or {}).items():
            out[kernel] = float(frac)
    return out


def summary_record(profile: Profile) -> dict[str, Any]:
    """The same facts as `summarize`, as JSON-ready data."""
    return {
        "kernels": profile.kernels.to_dict(orient="records"),
        "regions": profile.regions.to_dict(orient="records"),
        "device": profile.device,
        "warnings": profile.warnings,
        "sources": [str(s) for s in profile.sources],
    }
