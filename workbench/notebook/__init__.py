"""What every notebook shares: the preamble (`setup`) and figure display that works under any backend.

```python
from workbench.notebook import setup, show
ROOT = setup()          # first cell: before anything imports triton
show(fig)               # a matplotlib figure as a PNG image
```
Notebook widgets built on recorded results live beside it (`SweepExplorer`).
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from workbench.env import ensure_interpreter_if_no_gpu

__all__ = ["repo_root", "setup", "show", "SweepExplorer"]


def repo_root(start: str | Path | None = None) -> Path:
    """The checkout's root: the first folder at or above `start` (default: the working directory)
    that holds pyproject.toml."""
    here = Path(start or Path.cwd()).resolve()
    for p in (here, *here.parents):
        if (p / "pyproject.toml").exists():
            return p
    raise FileNotFoundError(f"no pyproject.toml at or above {here}: open the notebook inside the checkout")


def setup(chdir: bool = True) -> Path:
    """The notebooks' first cell. Without a visible GPU, kernels run in Triton's interpreter: the flag
    must be set before the first `import triton`, which is why this runs first. With `chdir`, relative
    paths in the notebook resolve from the checkout's root, wherever the notebook sits. Returns the root."""
    ensure_interpreter_if_no_gpu()
    root = repo_root()
    if chdir:
        os.chdir(root)
    return root


def show(fig: Any, dpi: int | None = None) -> Any:
    """A matplotlib figure as an `IPython.display.Image` (PNG): it renders under any backend, Agg included,
    and a pyplot figure is closed so an inline backend does not draw it twice."""
    from profiling.widgets_figures import png_image

    return png_image(fig, dpi)


def __getattr__(name: str):  # the widget needs ipywidgets: import it only when a notebook asks for it
    if name == "SweepExplorer":
        from workbench.notebook.sweep import SweepExplorer

        return SweepExplorer
    raise AttributeError(name)
