"""The case-study notebooks' speedup charts, built as PNG-ready figures (no pyplot state)."""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pandas as pd

from profiling.figure_style import legend_outside
from profiling.widgets_figures import new_figure


def paper_speedup_figure(paper: pd.DataFrame, ours_label: str = "ours (H200)",
                         paper_label: str = "paper (H100)", title: str = "our speedup against the paper's") -> Any:
    """Our speedup per (shape, dtype, mode, contender) beside the low end of the paper's range.

    `paper`: `case_studies.common.report.paper_comparison` rows (shape, dtype, mode, versus, paper_low,
    paper_high, ours). Horizontal bars: a long label ("n24_k16 float16 graph vs eager") sits on the y axis,
    one per line, so labels cannot overlap however many cells there are."""
    shown = paper.dropna(subset=["ours"]).reset_index(drop=True)
    fig = new_figure(7, 0.9 + 0.3 * max(len(shown), 1))
    ax = fig.add_subplot()
    if not len(shown):
        ax.text(0.5, 0.5, "no recorded cell matches the paper's", ha="center", va="center", transform=ax.transAxes)
        ax.set_axis_off()
        return fig
    y = list(range(len(shown)))
    ax.barh(y, shown["ours"], color="tab:blue", label=ours_label)
    ax.scatter(shown["paper_low"], y, color="tab:red", marker="|", s=220, zorder=3, label=f"{paper_label}, low")
    ax.hlines(y, shown["paper_low"], shown["paper_high"], color="tab:red", lw=1, zorder=3)
    ax.axvline(1.0, color="gray", lw=0.8)
    ax.set_yticks(y, [f"{r.shape} {r.dtype} {r.mode} vs {r.versus}" for r in shown.itertuples()], fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel("speedup [x] (contender time / ours)")
    ax.set_title(title)
    legend_outside(ax)
    return fig


def exact_speedup_figure(table: pd.DataFrame, paper_rows: Sequence[dict[str, Any]], platform: str) -> Any:
    """The preprocessing studies' chart: per shape, ours over the paper's baseline and over the strongest
    PyTorch contender (log scale), the paper's reported ranges as bands. `table`: a
    `case_studies.common.preprocessing.speedup_frame`; graph mode when recorded, else plain."""
    mode = "graph" if (table["mode"] == "graph").any() else "plain"
    g = table[table["mode"] == mode].reset_index(drop=True)
    fig = new_figure(8, 3.2)
    ax = fig.add_subplot()
    x = list(range(len(g)))
    ax.bar(x, g["x_eager"], color="tab:blue", label=f"ours over the paper's baseline (H200, {mode})")
    ax.bar(x, g["x_best"], color="tab:orange", alpha=0.7, width=0.4, label="ours over the strongest PyTorch contender")
    for r in paper_rows:
        ax.axhspan(r["low"], r["high"] + 0.02, alpha=0.15, color="tab:red")
    ax.axhline(1.0, color="gray", lw=0.8)
    ax.set_xticks(x, g["shape"], rotation=60, ha="right", fontsize=8)
    ax.set_yscale("log")
    from matplotlib.ticker import FuncFormatter

    # "20x", not the log axis' "2 x 10^1"; minor ticks labelled at 2 and 5 only, or they overprint
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _pos: f"{v:g}x"))
    ax.yaxis.set_minor_formatter(FuncFormatter(lambda v, _pos: f"{v:g}x" if f"{v:.0e}"[0] in "25" else ""))
    ax.set_ylabel("speedup [x]")
    ax.set_title(f"speedup per shape; red bands: the paper's range ({platform})")
    legend_outside(ax)
    return fig
