"""ipywidgets views of Proton profiles, built from files (no GPU needed).

```python
from profiling.widgets import TraceInspector, KernelView
TraceInspector("results/profiling/h200/matmul_probes.hatchet",
               "results/profiling/h200/matmul_probes.chrome_trace")      # displays itself in Jupyter
KernelView("results/profiling/h200/")
```
Unreadable files do not stop a view: it shows what it could read and lists the problems.
"""

from __future__ import annotations

import contextlib
import html
import logging
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pandas as pd

from .errors import ProfilingError
from .figure_style import fmt_int, fmt_num, table_html
from .summary import summarize
from .trace import Profile, load
from .widgets_figures import display_with_static, figure_png, image_widget, new_figure

log = logging.getLogger(__name__)

_REGION_TABLE_COLUMNS = [
    "region",
    "depth",
    "launches",
    "cycles_per_launch",
    "ns_per_launch",
    "share",
    "dur_median",
    "dur_p10",
    "dur_p90",
    "cta_cv",
    "warp_spread",
    "n_ctas",
    "n_warps",
]
_KERNEL_TABLE_COLUMNS = [
    "kernel",
    "scope",
    "launches",
    "time_per_launch_us",
    "gbps",
    "bw_fraction",
    "tflops",
    "tflops_fraction",
]


class _Quiet(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return record.levelno >= logging.ERROR


@contextlib.contextmanager
def _quiet_loader() -> Iterator[None]:
    """While a view loads its files, the loader's warnings stay out of the log: the view lists each one
    in its own status line, and logging them too printed every problem twice (once as stderr)."""
    logger = logging.getLogger(load.__module__)
    quiet = _Quiet()
    logger.addFilter(quiet)
    try:
        yield
    finally:
        logger.removeFilter(quiet)


def _load_for_view(sources: tuple[Any, ...], clock_mhz: float | None) -> tuple[Profile | None, list[str]]:
    if len(sources) == 1 and isinstance(sources[0], Profile):
        return sources[0], list(sources[0].warnings)
    try:
        with _quiet_loader():
            prof = load(*sources, clock_mhz=clock_mhz, on_error="warn")
        return prof, list(prof.warnings)
    except ProfilingError as exc:
        return None, [str(exc)]


def _guarded(out: Any, status: Any, fn: Callable[[], None]) -> None:
    """Run a view's redraw inside its own Output: whatever the callback prints, warns or raises lands in
    the widget, never in JupyterLab's log console. A failure also shows as one line in the status."""
    with out:
        try:
            fn()
        except Exception as exc:  # a redraw that fails must say why in the view, and keep the view alive
            log.exception("redraw failed")
            status.value = _messages_html([f"redraw failed: {type(exc).__name__}: {exc}"])


def _messages_html(messages: list[str]) -> str:
    if not messages:
        return ""
    items = "".join(f"<li>{html.escape(m)}</li>" for m in messages)
    return f"<div style='color:#a15c00'><b>could not read everything:</b><ul>{items}</ul></div>"


# cycles are counts: integers with separators, never `1.45e+04` (the durations dur_* are cycles too)
_INT_COLUMNS = ("cycles_per_launch", "dur_median", "dur_p10", "dur_p90", "launches", "depth", "n_ctas", "n_warps")


def _table_html(df: pd.DataFrame, columns: list[str]) -> str:
    cols = [c for c in columns if c in df.columns]
    if not len(df):
        return "<i>no rows</i>"
    fmts = {c: (fmt_int if c in _INT_COLUMNS else fmt_num) for c in cols}
    # a horizontal scroll bar instead of a clipped last column when the view is narrower than the table
    return f"<div style='overflow-x:auto; max-width:100%'>{table_html(df[cols], fmts)}</div>"


def _sidecar_provenance(prof: Profile) -> dict[str, Any]:
    """The provenance recorded beside the profile's files (`selfcheck.json` or `provenance.json` in the
    same folder, as `profiling.selfcheck` and the benchmark drivers write it); empty when there is none."""
    import json

    for folder in dict.fromkeys(Path(s).parent for s in prof.sources):
        for name in ("selfcheck.json", "provenance.json"):
            f = folder / name
            try:
                doc = json.loads(f.read_text())
            except (OSError, ValueError):
                continue
            return dict(doc.get("provenance", doc))
    return {}


def recorded_on(prof: Profile) -> str:
    """`NVIDIA H200 (sm_90, 132 SMs), recorded 2026-11-29 21:01 UTC`: which GPU and when, from the
    provenance beside the files, else the device info inside them and the sidecar's start time."""
    prov = _sidecar_provenance(prof)
    dev = prof.device
    gpu = prov.get("gpu") or dev.get("name") or "GPU not recorded"
    details = [str(dev.get("arch") or prov.get("sm") or ""), f"{dev['num_sms']} SMs" if dev.get("num_sms") else ""]
    details = [d for d in details if d]
    started = [str(m.get("started")) for m in prof.meta.values() if isinstance(m, dict) and m.get("started")]
    date = (min(started) if started else str(prov.get("date") or ""))[:16].replace("T", " ")
    when = f", recorded {date} UTC" if date else ", date not recorded"
    return gpu + (f" ({', '.join(details)})" if details else "") + when


class TraceInspector:
    """Pick a kernel and a region; see one CTA's per-warp timeline, the region table, and the
    distribution of region durations across CTAs."""

    def __init__(self, *sources: str | Path | Profile, clock_mhz: float | None = None):
        import ipywidgets as W

        self.profile, self.messages = _load_for_view(sources, clock_mhz)
        prof = self.profile
        kernels = prof.kernel_names if prof else []
        probe_kernels = [
            k for k in kernels if prof and k in set(prof.regions["kernel"]) | set(prof.events["kernel"])
        ]
        self.kernel = W.Dropdown(options=probe_kernels or kernels or ["(none)"], description="kernel")
        self.region = W.Dropdown(options=["(all)"], description="region")
        self.cta = W.Dropdown(options=[], description="CTA")
        self.header = W.HTML()
        self.table = W.HTML()
        # plots are PNG bytes in Image widgets: they render under any backend, and a redraw sets a value
        # instead of displaying into an Output from a callback (which JupyterLab could route elsewhere)
        self.timeline_img = image_widget()
        self.dist_img = image_widget()
        self.timeline_note = W.HTML()
        self.out = W.Output()  # anything a callback prints, warns or raises
        self.status = W.HTML(_messages_html(self.messages))
        self._updating = False
        self.region.observe(self._on_change, names="value")
        self.cta.observe(self._on_cta_change, names="value")
        self.kernel.observe(lambda _c: _guarded(self.out, self.status, self._kernel_changed), names="value")
        self.widget = W.VBox(
            [
                self.status,
                self.header,
                W.HBox([self.kernel, self.region, self.cta]),
                self.table,
                self.timeline_note,
                self.timeline_img,
                self.dist_img,
                self.out,
            ]
        )
        _guarded(self.out, self.status, self._kernel_changed)

    def _on_change(self, _change: Any) -> None:
        if not self._updating:
            _guarded(self.out, self.status, self.refresh)

    def _on_cta_change(self, _change: Any) -> None:
        # the distribution is across all CTAs: a CTA change redraws the timeline alone (half the time)
        if not self._updating:
            _guarded(self.out, self.status, lambda: self.refresh(distribution=False))

    def _kernel_changed(self) -> None:
        prof, k = self.profile, self.kernel.value
        if prof is not None:
            self._updating = True  # one redraw for the whole change, not one per dropdown
            try:
                self.region.options = ["(all)"] + prof.region_names(k)
                ctas = prof.ctas(k)
                self.cta.options = ctas
                self.cta.value = ctas[0] if ctas else None
            finally:
                self._updating = False
        self.refresh()

    def tables(self) -> dict[str, pd.DataFrame]:
        """The data behind the view for the current selection (also used by tests)."""
        prof, k = self.profile, self.kernel.value
        if prof is None:
            return {"regions": pd.DataFrame(), "timeline": pd.DataFrame()}
        reg = prof.regions[prof.regions["kernel"] == k]
        if self.region.value not in (None, "(all)"):
            reg = reg[reg["region"] == self.region.value]
        tl = prof.timeline(self.cta.value, k) if self.cta.value is not None else prof.events.iloc[0:0]
        return {"regions": reg, "timeline": tl}

    def refresh(self, distribution: bool = True) -> None:
        from . import plots

        prof = self.profile
        if prof is None:
            self.header.value = "<b>nothing to show</b>"
            return
        t = self.tables()
        clock = f"{prof.clock_mhz:,.0f} MHz" if prof.clock_mhz else "not recorded"
        self.header.value = (
            f"<b>{html.escape(recorded_on(prof))}</b><br>{len(prof.sources)} file(s): "
            + ", ".join(html.escape(s.name) for s in prof.sources)
            + f" &nbsp; SM clock: {clock}"
        )
        self.table.value = _table_html(t["regions"], _REGION_TABLE_COLUMNS)
        region = None if self.region.value in (None, "(all)") else self.region.value
        if self.cta.value is None:
            self.timeline_note.value = "<i>no per-warp timeline: load the kernel's probe chrome trace as well</i>"
            self.timeline_img.layout.display = "none"
        else:
            n_warps = max(t["timeline"]["warp"].nunique(), 1) if len(t["timeline"]) else 1
            fig = new_figure(9, 0.5 + 0.45 * n_warps)
            plots.warp_timeline(prof, self.cta.value, self.kernel.value, ax=fig.add_subplot(), highlight=region)
            self.timeline_img.value = figure_png(fig)
            self.timeline_note.value = ""
            self.timeline_img.layout.display = None
        if distribution:
            fig = new_figure(7, 3)
            plots.region_distribution(prof, region, self.kernel.value, ax=fig.add_subplot())
            self.dist_img.value = figure_png(fig)

    def static_copy(self) -> tuple[list[bytes], str]:
        """What an export shows in place of the live view: the header, the table and both figures as
        they are now."""
        pngs = [bytes(self.timeline_img.value), bytes(self.dist_img.value)]
        return pngs, self.status.value + self.header.value + self.table.value

    def _ipython_display_(self) -> None:
        display_with_static(self.widget, *self.static_copy())


class KernelView:
    """Kernel-level view: top kernels by time, achieved bandwidth against the roofline, the summary."""

    def __init__(self, *sources: str | Path | Profile, top: int = 10):
        import ipywidgets as W

        self.profile, self.messages = _load_for_view(sources, None)
        self.top = top
        self.table = W.HTML()
        self.summary = W.HTML()
        self.overview_img = image_widget()
        self.roofline_img = image_widget()
        self.out = W.Output()
        self.status = W.HTML(_messages_html(self.messages))
        self.widget = W.VBox(
            [self.status, self.summary, self.table, self.overview_img, self.roofline_img, self.out]
        )
        _guarded(self.out, self.status, self.refresh)

    def refresh(self) -> None:
        from . import plots

        prof = self.profile
        if prof is None:
            self.table.value = "<b>nothing to show</b>"
            return
        self.summary.value = "<pre>" + html.escape(summarize(prof)) + "</pre>"
        self.table.value = _table_html(prof.kernels.head(self.top), _KERNEL_TABLE_COLUMNS)
        fig = new_figure(11, 0.8 + 0.4 * max(min(len(prof.kernels), self.top), 1))
        plots.kernel_overview(prof, top=self.top, axes=fig.subplots(1, 2))
        self.overview_img.value = figure_png(fig)
        if prof.kernels["flops"].notna().any():
            fig = new_figure(6, 4)
            plots.roofline(prof, ax=fig.add_subplot())
            self.roofline_img.value = figure_png(fig)
            self.roofline_img.layout.display = None
        else:
            self.roofline_img.layout.display = "none"

    def static_copy(self) -> tuple[list[bytes], str]:
        """What an export shows in place of the live view: the summary, the table and the figures."""
        pngs = [bytes(self.overview_img.value)]
        if self.roofline_img.layout.display != "none":
            pngs.append(bytes(self.roofline_img.value))
        return pngs, self.status.value + self.summary.value + self.table.value

    def _ipython_display_(self) -> None:
        display_with_static(self.widget, *self.static_copy())
