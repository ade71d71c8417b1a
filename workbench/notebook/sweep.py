"""Explore a case study's recorded sweep (`results/case_studies/<name>/bench.csv`): pick a shape, a dtype
and a launch mode, see every contender's median time (p20-p80) and our kernel's speedup over each.

```python
from workbench.notebook import SweepExplorer
SweepExplorer("results/case_studies/mapid/bench.csv", ours="triton_bucket")   # displays itself
```
The CSV is the one the benchmark runners write (one row per shape x dtype x contender x mode, with
`role` baseline | pytorch | kernel and `status` ok | incorrect | skipped). A contender measured in two
sweeps keeps its faster median, as the case studies' README tables do.
"""
from __future__ import annotations

import html
import json
import logging
from pathlib import Path
from typing import Any

import pandas as pd

log = logging.getLogger(__name__)

_COLUMNS = ["contender", "role", "status", "median_us", "p20_us", "p80_us", "ours_speedup", "sweep", "note"]
_ROLE_COLOURS = {"kernel": "tab:blue", "baseline": "tab:red", "pytorch": "tab:grey"}


def read_sweep(csv_path: str | Path) -> pd.DataFrame:
    """The recorded rows, with a one-line reason for a CSV that is not a benchmark sweep."""
    path = Path(csv_path)
    if not path.is_file():
        raise FileNotFoundError(f"no recorded sweep at {path}")
    df = pd.read_csv(path, keep_default_na=False, na_values=[""])
    missing = {"shape", "params", "dtype", "contender", "role", "mode", "status", "median_us"} - set(df.columns)
    if missing:
        raise ValueError(f"{path.name} is not a benchmark sweep: no column(s) {', '.join(sorted(missing))}")
    return df


def sweep_cell(df: pd.DataFrame, shape: str, dtype: str, mode: str, ours: str) -> pd.DataFrame:
    """Every contender of one (shape, dtype, mode): its fastest correct timing, else why it has none, and
    our kernel's speedup over it (its median / ours)."""
    cell = df[(df["shape"] == shape) & (df["dtype"] == dtype) & (df["mode"] == mode)]
    rows = []
    for contender, g in cell.groupby("contender", sort=False):
        ok = g[(g["status"] == "ok") & g["median_us"].notna()]
        if len(ok):
            r = ok.loc[ok["median_us"].idxmin()]
            note = ""
        else:
            r = g.iloc[0]
            note = str(r.get("error", "") or "")[:120]
        rows.append({"contender": contender, "role": r["role"], "status": r["status"],
                     "median_us": float(r["median_us"]) if len(ok) else None,
                     "p20_us": float(r["p20_us"]) if len(ok) and "p20_us" in r else None,
                     "p80_us": float(r["p80_us"]) if len(ok) and "p80_us" in r else None,
                     "sweep": r.get("sweep", ""), "note": note})
    out = pd.DataFrame(rows, columns=[c for c in _COLUMNS if c != "ours_speedup"])
    mine = out.loc[out["contender"] == ours, "median_us"]
    base = float(mine.iloc[0]) if len(mine) and pd.notna(mine.iloc[0]) else None
    out["ours_speedup"] = [m / base if base and m is not None and pd.notna(m) else None for m in out["median_us"]]
    return out[_COLUMNS].sort_values("median_us", na_position="last", kind="stable").reset_index(drop=True)


def _fmt(v: Any, spec: str) -> str:
    return "–" if v is None or (isinstance(v, float) and v != v) else format(v, spec)


def _cell_html(t: pd.DataFrame, ours: str) -> str:
    head = "".join(f"<th style='text-align:left; padding:0 8px'>{c}</th>" for c in
                   ("contender", "role", "status", "median us", "p20-p80 us", f"{ours} speedup", "sweep", "note"))
    body = []
    for r in t.itertuples():
        style = " style='font-weight:bold'" if r.contender == ours else ""
        spread = f"{_fmt(r.p20_us, ',.1f')} – {_fmt(r.p80_us, ',.1f')}" if r.median_us is not None else "–"
        speed = "(ours)" if r.contender == ours else (_fmt(r.ours_speedup, '.2f') + "x" if r.ours_speedup else "–")
        cells = [r.contender, r.role, r.status, _fmt(r.median_us, ",.1f"), spread, speed, r.sweep, r.note]
        body.append(f"<tr{style}>" + "".join(f"<td style='padding:0 8px'>{html.escape(str(c))}</td>"
                                             for c in cells) + "</tr>")
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"


def sweep_figure(t: pd.DataFrame, ours: str, title: str) -> Any:
    """Horizontal bars of the medians (p20-p80 whiskers), our kernel's speedup over each written beside it."""
    from profiling.widgets_figures import new_figure

    timed = t[t["median_us"].notna()]
    fig = new_figure(7.5, 0.9 + 0.32 * max(len(timed), 1))
    ax = fig.add_subplot()
    if not len(timed):
        ax.text(0.5, 0.5, "no correct timing in this cell", ha="center", va="center", transform=ax.transAxes)
        ax.set_axis_off()
        return fig
    y = range(len(timed))
    med = timed["median_us"].astype(float)
    err = [(med - timed["p20_us"].astype(float)).clip(lower=0), (timed["p80_us"].astype(float) - med).clip(lower=0)]
    colours = [_ROLE_COLOURS.get(r, "tab:grey") for r in timed["role"]]
    ax.barh(list(y), med, xerr=err, color=colours, alpha=0.85, error_kw={"lw": 0.8})
    ax.set_yticks(list(y), [f"{c} *" if c == ours else c for c in timed["contender"]])
    ax.invert_yaxis()
    right = timed["p80_us"].astype(float).where(timed["p80_us"].notna(), med).clip(lower=med)
    for i, (x, s, c) in enumerate(zip(right, timed["ours_speedup"], timed["contender"])):
        if c != ours and s:
            ax.text(x, i, f"  {s:.2f}x", va="center", fontsize=8)  # past the whisker, so it stays legible
    if med.max() > 20 * med.min():  # a 500x spread would squash every fast bar to a sliver
        ax.set_xscale("log")
        ax.set_xlim(med.min() / 2, med.max() * 3)
    else:
        ax.set_xlim(0, med.max() * 1.25)
    ax.set_xlabel("median time per call [us] (whiskers p20-p80); label: ours' speedup over it")
    ax.set_title(title)
    return fig


class SweepExplorer:
    """Dropdowns for shape, dtype, launch mode and which of our kernel variants counts as 'ours'; a table
    and a PNG chart of the contenders in that cell."""

    def __init__(self, csv_path: str | Path, ours: str | None = None):
        import ipywidgets as W

        from profiling.widgets_figures import image_widget

        self.df = read_sweep(csv_path)
        has_name = "benchmark" in self.df and len(self.df)
        self.name = str(self.df["benchmark"].iloc[0]) if has_name else Path(csv_path).stem
        kernels = list(dict.fromkeys(self.df.loc[self.df["role"] == "kernel", "contender"]))
        if ours is not None and ours not in set(self.df["contender"]):
            raise ValueError(f"ours={ours!r} is not a contender of {Path(csv_path).name}: "
                             f"{', '.join(dict.fromkeys(self.df['contender']))}")
        choices = kernels if ours is None or ours in kernels else [ours, *kernels]
        self.ours = W.Dropdown(options=choices, value=ours or (choices[0] if choices else None), description="ours")
        self.shape = W.Dropdown(options=list(dict.fromkeys(self.df["shape"])), description="shape")
        self.dtype = W.Dropdown(description="dtype")
        self.mode = W.Dropdown(description="mode")
        self.params = W.HTML()
        self.table = W.HTML()
        self.plot = image_widget()
        self.out = W.Output()
        self._updating = False
        self.shape.observe(lambda _c: self._guarded(self._shape_changed), names="value")
        self.dtype.observe(lambda _c: self._guarded(self._dtype_changed), names="value")
        for w in (self.mode, self.ours):
            w.observe(lambda _c: self._guarded(self.refresh), names="value")
        self.widget = W.VBox([W.HBox([self.shape, self.dtype, self.mode, self.ours]), self.params, self.table,
                              self.plot, self.out])
        self._guarded(self._shape_changed)

    def _guarded(self, fn: Any) -> None:
        if self._updating:
            return
        with self.out:  # a failing redraw says why inside the widget, not in the log console
            try:
                fn()
            except Exception as exc:  # the reason goes to the view; the widget stays usable
                log.exception("sweep explorer redraw failed")
                self.params.value = f"<b style='color:#cf222e'>redraw failed: {html.escape(str(exc))}</b>"

    def _set(self, dropdown: Any, options: list[str], prefer: list[str] | None = None) -> None:
        first = next(iter(prefer or []), options[0] if options else None)
        keep = dropdown.value if dropdown.value in options else first
        self._updating = True  # one redraw for the whole change, not one per dropdown
        try:
            dropdown.options = options
            dropdown.value = keep
        finally:
            self._updating = False

    def _shape_changed(self) -> None:
        sel = self.df[self.df["shape"] == self.shape.value]
        self._set(self.dtype, list(dict.fromkeys(sel["dtype"])))
        self._dtype_changed()

    def _dtype_changed(self) -> None:
        sel = self.df[(self.df["shape"] == self.shape.value) & (self.df["dtype"] == self.dtype.value)]
        timed = sel[(sel["contender"] == self.ours.value) & (sel["status"] == "ok")]
        # a mode where our kernel has a time comes first (Event Truncate's exact kernel has no graph mode)
        self._set(self.mode, list(dict.fromkeys(sel["mode"])), prefer=list(dict.fromkeys(timed["mode"])))
        self.refresh()

    def cell(self) -> pd.DataFrame:
        """The data behind the view for the current selection (also used by tests)."""
        return sweep_cell(self.df, self.shape.value, self.dtype.value, self.mode.value, self.ours.value)

    def refresh(self) -> None:
        t = self.cell()
        raw = self.df.loc[self.df["shape"] == self.shape.value, "params"].iloc[0]
        try:
            params = ", ".join(f"{k} {v}" for k, v in json.loads(raw).items())
        except (TypeError, ValueError):
            params = str(raw)
        self.params.value = (f"<b>{html.escape(self.name)}</b> {html.escape(self.shape.value)}: "
                             f"{html.escape(params)}; {html.escape(self.dtype.value)}, {html.escape(self.mode.value)} "
                             "launches (graph: one CUDA-graph replay per call)")
        self.table.value = _cell_html(t, self.ours.value)
        from profiling.widgets_figures import figure_png

        title = f"{self.name} {self.shape.value} {self.dtype.value} {self.mode.value}"
        self.plot.value = figure_png(sweep_figure(t, self.ours.value, title))

    def static_copy(self) -> tuple[list[bytes], str]:
        """What an export shows in place of the live view: the selection, its table and its chart."""
        return [bytes(self.plot.value)], self.params.value + self.table.value

    def _ipython_display_(self) -> None:
        from profiling.widgets_figures import display_with_static

        display_with_static(self.widget, *self.static_copy())
