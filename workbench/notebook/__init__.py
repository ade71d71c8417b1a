"""What every notebook shares: the preamble (`setup`), where the recorded results are (`results_dir`), and
figure display that works under any backend.

```python
from workbench.notebook import setup, show, results_dir
ROOT = setup()          # first cell: before anything imports triton
RESULTS = results_dir("lowering", "gpu")   # the checkout's results/, wherever the notebook was copied
show(fig)               # a matplotlib figure as a PNG image
```
A notebook copied out of the checkout still runs: the checkout is found from the installed package
(an editable install, `make demo`/`make test`), or named by `WORKBENCH_ROOT`, or passed as `setup(root=...)`.
Notebook widgets built on recorded results live beside it (`SweepExplorer`, `TableExplorer`).
"""
from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any

from workbench.env import ensure_interpreter_if_no_gpu

__all__ = ["repo_root", "find_root", "results_dir", "setup", "show", "SweepExplorer", "TableExplorer"]

log = logging.getLogger(__name__)
ROOT_ENV = "WORKBENCH_ROOT"


def _is_checkout(p: Path) -> bool:
    # a pyproject.toml beside the package: an unrelated project's pyproject.toml above a copied notebook
    # must not be taken for the workbench's checkout
    return (p / "pyproject.toml").is_file() and (p / "workbench" / "__init__.py").is_file()


def repo_root(start: str | Path | None = None) -> Path:
    """The checkout's root: the first folder at or above `start` (default: the working directory)
    that holds pyproject.toml and the workbench package."""
    here = Path(start or Path.cwd()).resolve()
    for p in (here, *here.parents):
        if _is_checkout(p):
            return p
    raise FileNotFoundError(f"no pyproject.toml at or above {here}: open the notebook inside the checkout")


def find_root(root: str | Path | None = None) -> Path | None:
    """The checkout the notebook reads examples and results from, in this order: `root` when given,
    `$WORKBENCH_ROOT`, the checkout of the imported package (the code that runs: an editable install),
    the working directory or a folder above it. None when there is none (a wheel install, no checkout)."""
    for given in (root, os.environ.get(ROOT_ENV)):
        if given:
            p = Path(given).expanduser().resolve()
            if not _is_checkout(p):
                raise FileNotFoundError(f"{p} is not a workbench checkout (no pyproject.toml and workbench/ in it)")
            return p
    import workbench

    package_home = Path(workbench.__file__).resolve().parents[1]
    if _is_checkout(package_home):
        return package_home
    try:
        return repo_root()
    except FileNotFoundError:
        return None


def setup(chdir: bool = True, root: str | Path | None = None) -> Path:
    """The notebooks' first cell. Without a visible GPU, kernels run in Triton's interpreter: the flag
    must be set before the first `import triton`, which is why this runs first. Applies the package's
    figure and table style. With `chdir`, relative paths resolve from the checkout's root, wherever the
    notebook sits (copied out of the checkout too: `find_root`). Returns the root; without a checkout,
    the working directory, and says that recorded results and examples are not available."""
    ensure_interpreter_if_no_gpu()
    from profiling.figure_style import apply

    apply()
    found = find_root(root)
    if found is None:
        found = Path.cwd()
        log.warning("no workbench checkout found (package at %s, working directory %s): recorded results and "
                    "examples are not available; set %s=/path/to/checkout or call setup(root=...)",
                    Path(__import__("workbench").__file__).parent, found, ROOT_ENV)
    elif chdir:
        os.chdir(found)
    return found


def results_dir(*parts: str, root: str | Path | None = None, required: bool = False) -> Path:
    """`<checkout>/results/<parts...>`. With `required`, a missing folder raises FileNotFoundError with
    what to do; otherwise the (possibly absent) path is returned and the notebook says so itself."""
    base = find_root(root)
    path = (base or Path.cwd()) / "results" / Path(*parts) if parts else (base or Path.cwd()) / "results"
    if required and not path.is_dir():
        where = f"the checkout at {base}" if base else "no checkout (the package is not an editable install)"
        raise FileNotFoundError(f"no recorded results at {path} ({where}): run the benchmark that writes them, "
                                f"or set {ROOT_ENV} to a checkout that has them")
    return path


def show(fig: Any, dpi: int | None = None) -> Any:
    """A matplotlib figure as an `IPython.display.Image` (PNG): it renders under any backend, Agg included,
    and a pyplot figure is closed so an inline backend does not draw it twice."""
    from profiling.widgets_figures import png_image

    return png_image(fig, dpi)


def __getattr__(name: str):  # the widget needs ipywidgets: import it only when a notebook asks for it
    if name == "SweepExplorer":
        from workbench.notebook.sweep import SweepExplorer

        return SweepExplorer
    if name == "TableExplorer":
        from workbench.notebook.table import TableExplorer

        return TableExplorer
    raise AttributeError(name)
