"""Matplotlib/seaborn figures of a Profile (imported lazily: the GPU machine may lack them)."""

from __future__ import annotations

from typing import Any

from .figure_style import legend_outside
from .trace import Profile


def _plt():
    import matplotlib.pyplot as plt  # matplotlib picks Agg by itself when there is no display

    return plt


def region_palette(names: list[str]) -> dict[str, Any]:
    import seaborn as sns

    colors = sns.color_palette("tab10", n_colors=max(len(names), 1))
    return {n: colors[i % len(colors)] for i, n in enumerate(names)}


def warp_timeline(
    prof: Profile,
    cta: int,
    kernel: str | None = None,
    ax: Any = None,
    unit: str = "auto",
    highlight: str | None = None,
) -> Any:
    """One lane per warp of one CTA; each probe region a coloured bar (nested regions drawn thinner)."""
    plt = _plt()
    ev = prof.timeline(cta, kernel)
    if ax is None:
        _, ax = plt.subplots(figsize=(9, 0.5 + 0.45 * max(ev["warp"].nunique(), 1)))
    if not len(ev):
        ax.text(0.5, 0.5, f"no probe events for CTA {cta}", ha="center", va="center", transform=ax.transAxes)
        ax.set_axis_off()
        return ax
    use_ns = unit == "ns" or (unit == "auto" and ev["start_ns"].notna().all())
    start = ev["start_ns"] if use_ns else ev["start_cycles"]
    dur = ev["dur_ns"] if use_ns else ev["dur_cycles"]
    palette = region_palette(prof.region_names(kernel))
    warps = sorted(ev["warp"].unique())
    lane = {w: i for i, w in enumerate(warps)}
    ev = ev.assign(_s=start.to_numpy(), _d=dur.clip(lower=1e-9).to_numpy())
    for (warp, region, depth), g in ev.groupby(["warp", "region", "line"]):  # one artist per lane/region
        h = 0.8 / (1 + int(depth))
        alpha = 1.0 if highlight in (None, region) else 0.25
        ax.broken_barh(
            list(zip(g["_s"], g["_d"], strict=False)),
            (lane[warp] - h / 2, h),
            facecolors=palette[region],
            edgecolor="black",
            linewidth=0.3,
            alpha=alpha,
        )
    ax.set_yticks(range(len(warps)), [f"warp {w}" for w in warps])
    ax.invert_yaxis()
    ax.set_xlabel("time since CTA start [ns]" if use_ns else "time since CTA start [cycles]")
    name = kernel or (ev["kernel"].iloc[0] if len(ev) else "")
    ax.set_title(f"{name}: CTA {cta} (SM {int(ev['sm'].iloc[0])})")
    from matplotlib.patches import Patch

    ax.legend(
        handles=[Patch(color=c, label=n) for n, c in palette.items()],
        loc="upper left",
        bbox_to_anchor=(1.01, 1.0),
        fontsize=8,
        frameon=False,
    )
    return ax


def region_distribution(
    prof: Profile, region: str | None = None, kernel: str | None = None, ax: Any = None
) -> Any:
    """Distribution across CTAs (and sampled warps) of the cycles spent in each region (or one region)."""
    import seaborn as sns

    plt = _plt()
    ev = prof.events if kernel is None else prof.events[prof.events["kernel"] == kernel]
    if ax is None:
        _, ax = plt.subplots(figsize=(7, 3))
    if not len(ev):
        ax.text(
            0.5,
            0.5,
            "no probe trace loaded (distributions need a chrome trace)",
            ha="center",
            va="center",
            transform=ax.transAxes,
        )
        ax.set_axis_off()
        return ax
    per = ev.groupby(["region", "cta", "warp"], as_index=False)["dur_cycles"].sum()
    if region is not None:
        per = per[per["region"] == region]
    palette = region_palette(prof.region_names(kernel))
    sns.boxplot(
        data=per,
        x="dur_cycles",
        y="region",
        hue="region",
        palette=palette,
        ax=ax,
        legend=False,
        fliersize=1.5,
        orient="h",
    )
    sns.stripplot(
        data=per, x="dur_cycles", y="region", color="black", size=1.5, alpha=0.35, ax=ax, orient="h"
    )
    ax.set_xlabel("time in region per (CTA, warp) [cycles]")
    ax.set_ylabel("")
    ax.set_title(f"region durations across {per['cta'].nunique()} CTAs")
    return ax


def kernel_overview(prof: Profile, top: int = 10, axes: Any = None) -> Any:
    """Left: top kernels by GPU time. Right: achieved bandwidth against the device's ceiling (roofline)."""
    import numpy as np

    plt = _plt()
    k = prof.kernels
    if axes is None:
        _, axes = plt.subplots(1, 2, figsize=(11, 0.8 + 0.4 * max(min(len(k), top), 1)))
    if not len(k):
        for ax in axes:
            ax.text(
                0.5, 0.5, "no kernel-level profile loaded", ha="center", va="center", transform=ax.transAxes
            )
            ax.set_axis_off()
        return axes
    d = k.head(top).copy()
    d["label"] = [f"{r.kernel}" + (f" [{r.scope}]" if r.scope else "") for r in d.itertuples()]
    axes[0].barh(d["label"], d["time_ns"] / 1e3, color="tab:blue")
    axes[0].invert_yaxis()
    axes[0].set_xlabel("GPU time [us], all launches")
    axes[0].set_title("top kernels by time")
    ceiling = float(d["bw_ceiling_gbps"].max()) if d["bw_ceiling_gbps"].notna().any() else np.nan
    gb = d["gbps"].fillna(0.0)
    axes[1].barh(d["label"], gb, color="tab:green")
    axes[1].invert_yaxis()
    if not np.isnan(ceiling):
        axes[1].axvline(ceiling, color="red", linestyle="--", label=f"ceiling {ceiling:,.0f} GB/s")
        legend_outside(axes[1])
    for y, (g, f) in enumerate(zip(gb, d["bw_fraction"], strict=False)):
        if g > 0 and f == f:
            # inside the bar once it nears the ceiling, where a label past its end would sit on the red line
            inside = f > 0.5
            axes[1].text(g, y, f"{100 * f:.0f}% " if inside else f" {100 * f:.0f}%", va="center", fontsize=8,
                         ha="right" if inside else "left", color="white" if inside else "black")
    axes[1].set_xlabel("achieved bandwidth [GB/s] (bytes from scope metadata)")
    axes[1].set_title("bandwidth vs roofline")
    axes[1].set_yticks([])
    return axes


def roofline(prof: Profile, dtype: str | None = None, ax: Any = None) -> Any:
    """Achieved TFLOP/s against arithmetic intensity (FLOP/byte) under the device's roofs.

    Only kernels whose scope recorded both `bytes` and `flops` appear; the roof is
    min(peak TFLOP/s of the kernel's dtype, intensity x memory bandwidth).
    """
    import numpy as np

    plt = _plt()
    k = prof.kernels
    d = k[k["bytes"].notna() & k["flops"].notna()] if len(k) else k
    if ax is None:
        _, ax = plt.subplots(figsize=(6, 4))
    bw = float(k["bw_ceiling_gbps"].max()) if len(k) and k["bw_ceiling_gbps"].notna().any() else np.nan
    if not len(d) or np.isnan(bw):
        ax.text(
            0.5,
            0.5,
            "no kernel with bytes, flops and known ceilings",
            ha="center",
            va="center",
            transform=ax.transAxes,
        )
        ax.set_axis_off()
        return ax
    ai = d["flops"] / d["bytes"]
    x = np.logspace(np.log10(max(ai.min() / 10, 1e-2)), np.log10(ai.max() * 10), 200)
    for dt, peak in sorted(
        {
            (r.flops_dtype, r.tflops_ceiling)
            for r in d.itertuples()
            if isinstance(r.flops_dtype, str) and r.tflops_ceiling == r.tflops_ceiling
        }
    ):
        if dtype is None or dt == dtype:
            ax.plot(x, np.minimum(peak, x * bw / 1e3), label=f"roof {dt}: {peak:.0f} TFLOP/s, {bw:.0f} GB/s")
    ax.scatter(ai, d["tflops"], color="black", zorder=3)
    for a, t, name in zip(ai, d["tflops"], d["kernel"], strict=False):
        ax.annotate(name, (a, t), textcoords="offset points", xytext=(4, -10), fontsize=8)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("arithmetic intensity [FLOP/byte]")
    ax.set_ylabel("achieved [TFLOP/s]")
    ax.set_title("roofline")
    legend_outside(ax)
    return ax
