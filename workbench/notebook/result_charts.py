"""The GPU reports as pictures, per level: fast_p over p and the speedup distributions against eager and
torch.compile. Both take a tidy frame (`workbench.notebook.results`: one row per problem, `level`,
`correct`, speedup columns absent when not correct) and a {label: column} map of the speedups to draw.

fast_p (KernelBench's metric): the share of *all* problems of a level that are correct and faster than
the baseline by more than p; at p = 0 it is the share correct.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd

from profiling.figure_style import legend_outside
from profiling.widgets_figures import new_figure

_STYLES = ("-", "--", ":", "-.")
# one colour per verdict in every correctness chart: green passes, red is wrong, grey never ran
_VERDICT_COLOURS = {"passed": "tab:green", "incorrect": "tab:red", "failed": "tab:red", "error": "tab:orange",
                    "timeout": "gold", "compile_error": "tab:pink", "not_run": "tab:gray",
                    "not_lowered": "tab:gray", "rejected": "tab:brown"}


def fast_p(df: pd.DataFrame, column: str, p: float) -> float:
    """Share of the rows that are correct with `column` > p (NaN speedups count as not faster)."""
    if not len(df):
        return float("nan")
    return float((df["correct"] & (df[column] > p)).sum() / len(df))


def _x_formatter(ax: Any, axis: str = "y") -> None:
    from matplotlib.ticker import FuncFormatter, LogLocator

    # "0.5x", "2x": not the log axis' "5 x 10^-1"; minor ticks at 2 and 5 only, or they overprint
    a = ax.yaxis if axis == "y" else ax.xaxis
    a.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
    a.set_major_formatter(FuncFormatter(lambda v, _pos: f"{v:g}x"))
    a.set_minor_formatter(FuncFormatter(lambda v, _pos: ""))


def fast_p_figure(df: pd.DataFrame, speedups: Mapping[str, str], title: str, p_max: float = 3.0) -> Any:
    """One panel per level: fast_p over p for each speedup column (one line style each). The vertical
    line at p = 1 is labelled (as fast as the baseline); the panel title gives the level's problem count."""
    levels = sorted(df["level"].unique(), key=lambda v: (len(v), v)) if len(df) else []
    fig = new_figure(3.4 * max(len(levels), 1) + 2.4, 3.6)
    fig.set_layout_engine("constrained")  # the suptitle above the panels' titles, not over them
    axes = fig.subplots(1, max(len(levels), 1), sharey=True, squeeze=False)[0]
    ps = np.linspace(0, p_max, 241)
    cols = [c for c in speedups.values() if c in df and df[c].notna().any()]
    for ax, level in zip(axes, levels):
        sub = df[df["level"] == level]
        for (label, col), ls in zip(speedups.items(), _STYLES):
            if col in cols:
                ax.step(ps, [fast_p(sub, col, p) for p in ps], where="post", ls=ls, lw=1.6, label=label)
        ax.axvline(1.0, color="grey", lw=0.8, ls=":", label="p = 1: as fast as the baseline")
        ax.set_title(f"level {level} ({len(sub)} problems)")
        ax.set_xlabel("speedup threshold p [x]")
        ax.set_xlim(0, p_max)
        ax.set_ylim(-0.02, 1.02)
    if not levels:
        axes[0].text(0.5, 0.5, "no problem recorded", ha="center", va="center", transform=axes[0].transAxes)
    axes[0].set_ylabel("fast_p [share of all problems]")
    legend_outside(axes[-1])
    fig.suptitle(title, fontweight="bold")
    return fig


def speedup_distribution_figure(df: pd.DataFrame, speedups: Mapping[str, str], title: str) -> Any:
    """One panel per level: the correct problems' speedups (log scale) for each speedup column, a box
    (quartiles) and every problem as a dot, the geomean written above; the 1x line labelled."""
    levels = sorted(df["level"].unique(), key=lambda v: (len(v), v)) if len(df) else []
    labels = [lab for lab, col in speedups.items() if col in df and df[col].notna().any()]
    fig = new_figure(max(3.0, 1.3 * len(labels) + 1.0) * max(len(levels), 1) + 1.5, 4.2)
    fig.set_layout_engine("constrained")
    axes = fig.subplots(1, max(len(levels), 1), sharey=True, squeeze=False)[0]
    rng = np.random.default_rng(0)  # a fixed jitter: the same picture on every run
    for ax, level in zip(axes, levels):
        sub = df[df["level"] == level]
        ticks = []
        for i, label in enumerate(labels):
            v = sub[speedups[label]].dropna()
            v = v[v > 0]
            tick = label.replace(" vs ", "\nvs ")
            if len(v):
                ax.boxplot([v], positions=[i], widths=0.55, showfliers=False,
                           medianprops={"color": "black"}, boxprops={"color": "grey"})
                ax.scatter(i + rng.uniform(-0.18, 0.18, len(v)), v, s=10, alpha=0.55, zorder=3)
                tick += f"\ngeomean {float(np.exp(np.log(v).mean())):.2f}x\nn = {len(v)}"
            ticks.append(tick)
        ax.axhline(1.0, color="black", lw=0.8, label="1x: as fast as the baseline")
        ax.set_yscale("log")
        _x_formatter(ax)
        ax.set_xticks(range(len(labels)), ticks)
        ax.set_xlim(-0.6, len(labels) - 0.4)
        ax.set_title(f"level {level} ({len(sub)} problems)")
    if not levels:
        axes[0].text(0.5, 0.5, "no correct problem", ha="center", va="center", transform=axes[0].transAxes)
    axes[0].set_ylabel("speedup [x] (baseline time / ours)")
    legend_outside(axes[-1])
    fig.suptitle(title, fontweight="bold")
    return fig


def correctness_figure(df: pd.DataFrame, title: str, status: str = "verdict") -> Any:
    """A CPU (correctness) run: per level, how many problems ended in each verdict (stacked bars); no
    time is drawn, since interpreter times rank nothing."""
    counts = df.groupby(["level", status]).size().unstack(fill_value=0) if len(df) else pd.DataFrame()
    fig = new_figure(7, 0.9 + 0.5 * max(len(counts), 1))
    ax = fig.add_subplot()
    if not len(counts):
        ax.text(0.5, 0.5, "no problem recorded", ha="center", va="center", transform=ax.transAxes)
        ax.set_axis_off()
        return fig
    order = sorted(counts.columns, key=lambda c: (c != "passed", c))
    others = iter(["tab:purple", "tab:brown", "tab:pink", "tab:olive", "tab:cyan", "tab:blue"])
    colours = {v: _VERDICT_COLOURS.get(v) or next(others, "black") for v in order}
    names = [f"level {lvl}" if str(lvl).isdigit() else str(lvl) for lvl in counts.index]  # ATen: dtypes
    left = np.zeros(len(counts))
    for verdict in order:
        ax.barh(names, counts[verdict], left=left, label=verdict, color=colours[verdict])
        left += counts[verdict].to_numpy()
    ax.invert_yaxis()
    ax.set_xlabel("problems [count]")
    ax.set_title(title)
    legend_outside(ax, title="verdict")
    return fig
