"""Figures as PNG bytes, for widgets and notebooks.

A figure handed to IPython's `display` renders only under an inline backend: under `MPLBACKEND=Agg`
(CI) it prints `<Figure size 1100x240 with 2 Axes>`, and displayed from a widget callback it can land
in JupyterLab's log console. PNG bytes render the same everywhere: in an `ipywidgets.Image`, whose
value a callback sets without displaying anything, or in an `IPython.display.Image` in a cell.
"""

from __future__ import annotations

import base64
import html
import io
import sys
from collections.abc import Callable, Sequence
from typing import Any

from .figure_style import DPI, apply


def new_figure(width: float, height: float, dpi: int = DPI) -> Any:
    """A figure outside pyplot's registry, in the package's style (`figure_style`): no backend shows it by
    itself, nothing needs closing."""
    from matplotlib.figure import Figure

    apply()
    return Figure(figsize=(width, height), dpi=dpi)


def figure_png(fig: Any, dpi: int | None = None) -> bytes:
    """The figure's PNG bytes. A figure that pyplot manages is closed, so an inline backend does not
    show it a second time at the end of the cell."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi or fig.dpi, bbox_inches="tight")
    plt = sys.modules.get("matplotlib.pyplot")
    if plt is not None:
        plt.close(fig)  # a no-op for a figure pyplot does not know
    return buf.getvalue()


def png_image(fig: Any, dpi: int | None = None) -> Any:
    """An `IPython.display.Image` of the figure: the cell shows it under any matplotlib backend."""
    from IPython.display import Image

    return Image(figure_png(fig, dpi), format="png")


def image_widget() -> Any:
    """An empty `ipywidgets.Image` for PNG bytes (`w.value = figure_png(fig)`)."""
    import ipywidgets as W

    return W.Image(format="png", layout=W.Layout(max_width="100%", height="auto"))


# A widget's static copy is a separate output next to its live view, marked with this class. The live view
# carries a CSS rule that hides every static copy, so the rule exists only where a widget really rendered
# (JupyterLab with a kernel, an export whose widget script loaded): there the copy is hidden; anywhere else
# (nbconvert HTML offline, a notebook viewer, a notebook reopened without its kernel) the copy shows.
STATIC_CLASS = "wb-static"
_HIDE_STATIC = f"<style>.{STATIC_CLASS} {{ display: none; }}</style>"


def static_html(pngs: Sequence[bytes] = (), html_text: str = "", caption: str = "") -> str:
    """A widget's static copy as HTML: its tables and its PNGs inlined as `<img>` (data URIs), so an
    exported notebook shows what the live widget showed."""
    imgs = "".join(
        f"<img style='max-width:100%' alt='{html.escape(caption or 'figure')}' src='data:image/png;base64,"
        f"{base64.b64encode(bytes(p)).decode()}'/>"
        for p in pngs if p
    )
    head = f"<div style='font-size:85%;color:#57606a'>{html.escape(caption)}</div>" if caption else ""
    return f"<div class='{STATIC_CLASS}'>{head}{html_text}{imgs}</div>"


def static_bundle(pngs: Sequence[bytes] = (), html_text: str = "",
                  caption: str = "static copy of the interactive view (shown where widgets do not run)") -> dict:
    """The static copy as a mime bundle: `text/html` (tables and inlined figures), `image/png` (the first
    figure, for a viewer that shows no HTML) and a line of text."""
    bundle: dict[str, Any] = {"text/plain": caption, "text/html": static_html(pngs, html_text, caption)}
    first = next((bytes(p) for p in pngs if p), None)
    if first is not None:
        bundle["image/png"] = base64.b64encode(first).decode()
    return bundle


def live_view(widget: Any) -> Any:
    """The widget with the rule that hides the static copies wherever it renders."""
    import ipywidgets as W

    return W.VBox([W.HTML(_HIDE_STATIC), widget])


def display_with_static(widget: Any, pngs: Sequence[bytes] = (), html_text: str = "") -> None:
    """Display `widget`, then its static copy (the `_ipython_display_` of the views in this package)."""
    from IPython.display import display

    display(live_view(widget))
    display(static_bundle(pngs, html_text), raw=True)


def attach_static(widget: Any, snapshot: Callable[[], tuple[Sequence[bytes], str]]) -> Any:
    """Give a widget returned by a function (an ipywidgets box) a static copy: displaying it shows the
    live view and `snapshot()` -> (pngs, html), taken at that moment. Returns the widget."""
    # an instance attribute: IPython's formatter looks `_ipython_display_` up on the object
    widget._ipython_display_ = lambda: display_with_static(widget, *snapshot())
    return widget
