"""A table a person can sort and filter in a notebook, with a static copy for exports.

```python
from workbench.notebook import TableExplorer
TableExplorer(df, filters=["level", "status"], sort="speedup_vs_eager", chart=png_bytes)   # displays itself
```
Live: a sort dropdown with an order switch, a dropdown per `filters` column and a text box that keeps
rows containing the text anywhere (a problem name, a word of a failure reason). Exported (nbconvert HTML,
a notebook viewer): the whole table as sorted at display time, numbers rounded by the package's style
(`profiling.figure_style`), and `chart` (PNG bytes) when given.
"""
from __future__ import annotations

import html
from collections.abc import Sequence
from typing import Any

import pandas as pd

from profiling.figure_style import table_html

_ALL = "(all)"


def filter_rows(df: pd.DataFrame, filters: dict[str, Any] | None = None, text: str = "",
                sort: str | None = None, ascending: bool = True) -> pd.DataFrame:
    """The rows the explorer shows: equal to each filter value (`(all)`/None: no filter), containing
    `text` (case-insensitive) in any column, sorted by `sort` (absent values last)."""
    out = df
    for col, val in (filters or {}).items():
        if val not in (None, _ALL):
            out = out[out[col].astype(str) == str(val)]
    if text.strip():
        needle = text.strip().lower()
        hit = out.astype(str).apply(lambda c: c.str.lower().str.contains(needle, regex=False)).any(axis=1)
        out = out[hit]
    if sort in out.columns:
        out = out.sort_values(sort, ascending=ascending, na_position="last", kind="stable")
    return out


class TableExplorer:
    """Sort and filter a DataFrame in place; `rows()` is what the view shows (tests read it)."""

    def __init__(self, df: pd.DataFrame, filters: Sequence[str] = (), sort: str | None = None,
                 ascending: bool = False, chart: bytes | None = None, caption: str = "", max_rows: int = 400):
        import ipywidgets as W

        self.df = df.reset_index(drop=True)
        self.chart = chart
        self.caption = caption
        self.max_rows = max_rows
        cols = list(self.df.columns)
        self.sort = W.Dropdown(options=cols, value=sort if sort in cols else (cols[0] if cols else None),
                               description="sort by")
        self.ascending = W.ToggleButtons(options=[("descending", False), ("ascending", True)], value=ascending)
        self.filters = {c: W.Dropdown(options=[_ALL, *sorted({str(v) for v in self.df[c].dropna()})],
                                      description=c) for c in filters if c in cols}
        self.text = W.Text(placeholder="keep rows containing...", description="filter")
        self.count = W.HTML()
        self.table = W.HTML(layout=W.Layout(max_height="520px", overflow="auto"))
        for w in (self.sort, self.ascending, self.text, *self.filters.values()):
            w.observe(lambda _c: self.refresh(), names="value")
        self.widget = W.VBox([W.HBox([self.sort, self.ascending]), W.HBox([*self.filters.values(), self.text]),
                              self.count, self.table])
        self.refresh()

    def rows(self) -> pd.DataFrame:
        return filter_rows(self.df, {c: w.value for c, w in self.filters.items()}, self.text.value,
                           self.sort.value, self.ascending.value)

    def refresh(self) -> None:
        t = self.rows()
        shown = t.head(self.max_rows)
        more = f" (first {self.max_rows} shown)" if len(t) > self.max_rows else ""
        self.count.value = f"<small>{len(t)} of {len(self.df)} rows{more}</small>"
        self.table.value = table_html(shown, caption=self.caption or None)

    def static_copy(self) -> tuple[list[bytes], str]:
        note = (f"<small>{html.escape(self.caption)}: all {len(self.df)} rows, sorted by "
                f"{html.escape(str(self.sort.value))}</small>" if self.caption else "")
        sorted_all = filter_rows(self.df, sort=self.sort.value, ascending=self.ascending.value)
        return ([self.chart] if self.chart else []), note + table_html(sorted_all)

    def _ipython_display_(self) -> None:
        from profiling.widgets_figures import display_with_static

        display_with_static(self.widget, *self.static_copy())
