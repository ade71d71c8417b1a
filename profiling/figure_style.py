"""The package's one figure and table style: every plot and table the workbench draws goes through here.

```python
from profiling.figure_style import apply, legend_outside, fmt_num, styled_table
apply()                       # matplotlib rcParams and pandas display options (setup() and new_figure() call it)
legend_outside(ax)            # the legend to the right of the axes, never over the data
styled_table(df)              # rounded numbers, units in the headers, no index, long text wrapped
```
Rules (issue 36): a title on every figure, axis labels with their unit in brackets (`time [us]`,
`speedup [x]`), legends outside the data, fonts readable at 100% zoom (9-11 pt at 110 dpi), numbers
rounded to what the measurement supports (3-4 significant digits; a microsecond is never `53.631999`).
It lives in `profiling` (the ground floor of the figures: profiling, the workbench and the case studies
all draw through `widgets_figures.new_figure`), so no library has to import its caller to use it.
"""
from __future__ import annotations

import html
import math
from collections.abc import Mapping
from typing import Any

DPI = 110
RC: dict[str, Any] = {
    "figure.dpi": DPI,
    "savefig.dpi": DPI,
    "savefig.bbox": "tight",
    "font.size": 10,
    "axes.titlesize": 11,
    "axes.titleweight": "bold",
    "axes.labelsize": 10,
    "xtick.labelsize": 9,
    "ytick.labelsize": 9,
    "legend.fontsize": 9,
    "legend.title_fontsize": 9,
    "legend.frameon": False,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.grid": True,
    "grid.alpha": 0.3,
    "grid.linewidth": 0.6,
    "axes.formatter.useoffset": False,   # no "+1.7e9" offset above an axis: the ticks say the value
    "axes.formatter.limits": (-4, 6),    # plain numbers from 1e-4 to 1e6, scientific beyond
}
# the smallest font a figure may use (tick labels of a crowded axis); tests read it
MIN_FONT_PT = 8


def apply() -> None:
    """Set the style on matplotlib's rcParams and pandas' display options (idempotent, cheap). Text is
    styled when it is created, so this runs before a figure is made: `new_figure` and the notebooks'
    `setup()` call it."""
    import matplotlib

    matplotlib.rcParams.update(RC)
    try:
        import pandas as pd
    except ImportError:  # the GPU machine may have matplotlib without pandas: figures still get the style
        return
    pd.set_option("display.float_format", fmt_num)
    pd.set_option("display.max_colwidth", 120)
    pd.set_option("display.width", 160)


def fmt_num(v: Any) -> str:
    """A float rounded for a reader: thousands separated, 3-4 significant digits, no scientific notation
    between 1e-4 and 1e9 (`53.631999` -> `53.63`, `2732.26` -> `2,732`, `0.0182476` -> `0.0182`)."""
    if v is None:
        return "–"
    try:
        x = float(v)
    except (TypeError, ValueError):
        return str(v)
    if math.isnan(x):
        return "–"
    if math.isinf(x) or x == 0:
        return f"{x:g}"
    a = abs(x)
    if a >= 1e9 or a < 1e-4:
        return f"{x:.2e}"
    if a >= 100:
        return f"{x:,.0f}"
    if a >= 10:
        return f"{x:.1f}"
    if a >= 1:
        return f"{x:.2f}"
    return f"{x:.3g}"


def fmt_int(v: Any) -> str:
    """A count or cycle number as an integer with thousands separated (`1.2345e5` -> `123,450`)."""
    try:
        x = float(v)
    except (TypeError, ValueError):
        return str(v)
    return "–" if math.isnan(x) else f"{round(x):,}"


def fmt_speedup(v: Any) -> str:
    """`1.266` -> `1.27x`; absent -> `–`."""
    s = fmt_num(v)
    return s if s == "–" else f"{float(v):.2f}x"


# column-name endings and the formatter they get; the first match wins
_FORMATS: tuple[tuple[tuple[str, ...], Any], ...] = (
    (("speedup", "vs_eager", "vs_compile", "[x]"), fmt_speedup),
    (("cycles", "launches", "n_ctas", "n_warps", "problems", "count", "kernels", "tokens"), fmt_int),
)


def column_formatter(name: str, integer: bool = False) -> Any:
    """The formatter of a column by its name (`speedup`, `x_eager_*`, `... vs eager`: `1.27x`; counts and
    cycles: integers); an integer column otherwise stays an integer, any other number gets `fmt_num`."""
    low = name.lower().replace(" ", "_")
    if low.startswith("x_"):
        return fmt_speedup
    for parts, fn in _FORMATS:
        if any(e in low for e in parts):
            return fn
    return fmt_int if integer else fmt_num


def styled_table(df: Any, formats: Mapping[str, Any] | None = None, caption: str | None = None,
                 wrap: tuple[str, ...] = ("reason", "diagnosis", "note", "error")) -> Any:
    """A pandas Styler of `df`: numbers rounded by their column's kind (counts and cycles as integers,
    speedups as `1.27x`, times and others to 3-4 digits), no index, long text columns wrapped at 60 em
    (the table stays within the page and a failure reason is shown in full)."""
    import pandas as pd

    fmts = {c: (formats or {}).get(c) or column_formatter(str(c), pd.api.types.is_integer_dtype(df[c]))
            for c in df.columns if pd.api.types.is_numeric_dtype(df[c]) and not pd.api.types.is_bool_dtype(df[c])}
    sty = df.style.format(fmts, na_rep="–").hide(axis="index")
    long_text = [c for c in df.columns if any(w in str(c).lower() for w in wrap)]
    if long_text:
        sty = sty.set_properties(subset=long_text, **{"white-space": "normal", "min-width": "24em",
                                                       "max-width": "60em", "text-align": "left"})
    sty = sty.set_table_styles([{"selector": "th", "props": [("text-align", "left"), ("padding", "2px 8px")]},
                                {"selector": "td", "props": [("padding", "2px 8px")]}])
    if caption:
        sty = sty.set_caption(caption)
    return sty


def table_html(df: Any, formats: Mapping[str, Any] | None = None, caption: str | None = None) -> str:
    """`styled_table` as an HTML string (for an `ipywidgets.HTML` or a static fallback)."""
    if not len(df.columns):
        return "<i>no rows</i>"
    return styled_table(df, formats, caption).to_html()


def legend_outside(ax: Any, title: str | None = None, **kw: Any) -> Any:
    """The axes' legend to the right of the plot, outside the data (None when nothing is labelled)."""
    handles, labels = ax.get_legend_handles_labels()
    if not handles:
        return None
    kw = {"loc": "upper left", "bbox_to_anchor": (1.01, 1.0), "borderaxespad": 0.0, **kw}
    return ax.legend(handles, labels, title=title, **kw)


def provenance_line(prov: Mapping[str, Any] | None) -> str:
    """One readable line from a provenance record: `NVIDIA H200 (driver 580.159, CUDA 13.0), torch 2.11.0,
    triton 3.6.0, commit fc843a2, 2026-12-02 06:25 UTC`; a CPU run says `CPU (x86_64, Triton's
    interpreter)`. Absent fields are left out, never printed as None."""
    p = dict(prov or {})
    gpu = p.get("gpu")
    if gpu:
        extras = [f"driver {p['driver']}" if p.get("driver") else "", f"CUDA {p['cuda']}" if p.get("cuda") else ""]
        where = gpu + (f" ({', '.join(e for e in extras if e)})" if any(extras) else "")
    else:
        where = f"CPU ({p['cpu']}, Triton's interpreter)" if p.get("cpu") else "CPU (Triton's interpreter)"
    parts = [where]
    for key in ("torch", "triton"):
        if p.get(key):
            parts.append(f"{key} {p[key]}")
    if p.get("commit"):
        parts.append(f"commit {str(p['commit'])[:7]}")
    date = str(p.get("date") or "")
    if date:
        parts.append(date[:16].replace("T", " ") + (" UTC" if date.endswith(("Z", "+00:00")) else ""))
    return ", ".join(parts)


def provenance_html(prov: Mapping[str, Any] | None, label: str = "") -> str:
    head = f"<b>{html.escape(label)}</b>: " if label else ""
    return f"<div style='font-size:90%'>{head}{html.escape(provenance_line(prov))}</div>"
