"""Figures as PNG bytes, for widgets and notebooks.

A figure handed to IPython's `display` renders only under an inline backend: under `MPLBACKEND=Agg`
(CI) it prints `<Figure size 1100x240 with 2 Axes>`, and displayed from a widget callback it can land
in JupyterLab's log console. PNG bytes render the same everywhere: in an `ipywidgets.Image`, whose
value a callback sets without displaying anything, or in an `IPython.display.Image` in a cell.
"""

from __future__ import annotations

import io
import sys
from typing import Any

DPI = 100


def new_figure(width: float, height: float, dpi: int = DPI) -> Any:
    """A figure outside pyplot's registry: no backend shows it by itself, nothing needs closing."""
    from matplotlib.figure import Figure

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
