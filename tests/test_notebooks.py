"""Every notebook under notebooks/ runs top to bottom on the CPU (added notebooks are picked up), shows the
plots its cells promise, and is committed without outputs.

Cell tags say what a cell must show (the test fails when it does not):
- `plot`: at least one PNG image among the cell's outputs;
- `widget`: a widget view among the cell's outputs;
- `widget-plot`: the widget that cell displays holds an `ipywidgets.Image` with PNG bytes.
No cell may show a figure as text (`<Figure size 640x480 with 1 Axes>`: a figure displayed under the
Agg backend instead of as an image). Every cell that displays a widget also leaves a static copy with a PNG
image in the notebook exported as HTML (nbconvert), as a notebook viewer shows it.
"""
from __future__ import annotations

import base64
import json
import os
import re
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted(p for p in (ROOT / "notebooks").rglob("*.ipynb") if ".ipynb_checkpoints" not in p.parts)
IDS = [str(p.relative_to(ROOT / "notebooks")) for p in NOTEBOOKS]
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
WIDGET_STATE = "application/vnd.jupyter.widget-state+json"
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def _code_cells(nb: Any) -> list[Any]:
    return [c for c in nb.cells if c.cell_type == "code"]


def _tags(cell: Any) -> set[str]:
    return set(cell.get("metadata", {}).get("tags", []))


def _label(path: Path, nb: Any, cell: Any) -> str:
    first = (cell.source.strip().splitlines() or [""])[0][:70]
    return f"{path.name} cell {nb.cells.index(cell)} ({first!r})"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_notebook_is_committed_without_outputs(path: Path) -> None:
    """Outputs are produced by running the notebook, not stored: three notebooks once committed 54-120 KB."""
    raw = json.loads(path.read_text())
    dirty = [i for i, c in enumerate(raw["cells"]) if c["cell_type"] == "code"
             and (c.get("outputs") or c.get("execution_count") is not None or "execution" in c.get("metadata", {}))]
    assert not dirty, (f"{path.name}: cells {dirty} carry outputs or execution counts; strip them before committing: "
                       f"python tools/strip_notebooks.py {path.relative_to(ROOT)}")
    assert "widgets" not in raw.get("metadata", {}), f"{path.name}: stored widget state in the notebook metadata"


def test_strip_removes_what_a_run_adds(tmp_path: Path) -> None:
    from tools.strip_notebooks import main

    nb = json.loads(NOTEBOOKS[0].read_text())
    cell = next(c for c in nb["cells"] if c["cell_type"] == "code")
    cell.update(execution_count=3, outputs=[{"output_type": "stream", "name": "stdout", "text": "hi"}])
    cell["metadata"]["execution"] = {"iopub.status.busy": "2026-12-01T09:02:26Z"}
    nb["metadata"]["widgets"] = {WIDGET_STATE: {"state": {}}}
    path = tmp_path / "run.ipynb"
    path.write_text(json.dumps(nb))
    assert main([str(path)]) == 0
    clean = json.loads(path.read_text())
    assert clean["cells"][nb["cells"].index(cell)]["outputs"] == [] and "widgets" not in clean["metadata"]
    assert "execution" not in clean["cells"][nb["cells"].index(cell)]["metadata"]
    assert [c["source"] for c in clean["cells"]] == [c["source"] for c in nb["cells"]]
    (tmp_path / "bad.ipynb").write_text("{")
    assert main([str(tmp_path / "bad.ipynb")]) == 2


def _widget_models(nb: Any) -> dict[str, Any]:
    return nb.metadata.get("widgets", {}).get(WIDGET_STATE, {}).get("state", {})


def _model_tree(models: dict[str, Any], root: str) -> list[Any]:
    """The model and every model it references (children, layouts...), depth first."""
    seen, stack, out = set(), [root], []
    while stack:
        mid = stack.pop()
        if mid in seen or mid not in models:
            continue
        seen.add(mid)
        out.append(models[mid])
        refs = json.dumps(models[mid].get("state", {}))
        stack += [m for m in models if f'"IPY_MODEL_{m}"' in refs]
    return out


def _has_png_image(model: Any) -> bool:
    if model.get("model_name") != "ImageModel":
        return False
    for buf in model.get("buffers", []):
        if buf.get("path") == ["value"] and base64.b64decode(buf.get("data", "")).startswith(PNG_MAGIC):
            return True
    return False


def check_outputs(path: Path, nb: Any) -> list[str]:
    """What an executed notebook fails to show, one line per problem."""
    problems = []
    models = _widget_models(nb)
    for cell in _code_cells(nb):
        outs = cell.get("outputs", [])
        data = [o.get("data", {}) for o in outs if o.output_type in ("display_data", "execute_result")]
        tags = _tags(cell)
        if "plot" in tags and not any("image/png" in d for d in data):
            problems.append(f"{_label(path, nb, cell)}: tagged 'plot' but showed no PNG image")
        views = [d[WIDGET_VIEW]["model_id"] for d in data if WIDGET_VIEW in d]
        if "widget" in tags and not views:
            problems.append(f"{_label(path, nb, cell)}: tagged 'widget' but displayed no widget")
        if "widget-plot" in tags and not any(_has_png_image(m) for v in views for m in _model_tree(models, v)):
            problems.append(f"{_label(path, nb, cell)}: tagged 'widget-plot' but its widget holds no PNG image")
        for d in data:
            text = "".join(d.get("text/plain", ""))
            if text.startswith("<Figure size") and "image/png" not in d:
                problems.append(f"{_label(path, nb, cell)}: a figure displayed as text ({text[:40]!r})")
    return problems


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_notebook_executes(path: Path) -> None:
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    nb = nbformat.read(path, as_version=4)
    os.environ.setdefault("TRITON_INTERPRET", "1")
    os.environ.setdefault("MPLBACKEND", "Agg")
    client = nbclient.NotebookClient(nb, timeout=600, kernel_name="python3", store_widget_state=True,
                                     resources={"metadata": {"path": str(path.parent)}})
    client.execute()
    errors = [o for c in _code_cells(nb) for o in c.get("outputs", []) if o.output_type == "error"]
    assert not errors, errors
    problems = check_outputs(path, nb) + check_export(path, nb)
    assert not problems, "\n".join(problems)


_EXPORT_CELL = re.compile(r'<div\b[^>]*class="jp-Cell jp-')
_EXPORT_IMG = re.compile(r"<img\b[^>]*src=['\"]data:image/png;base64,")


def check_export(path: Path, nb: Any) -> list[str]:
    """What a static export of the executed notebook fails to show: a cell that displayed a widget but
    whose exported HTML holds no PNG image (an empty area in nbconvert HTML or a notebook viewer)."""
    nbconvert = pytest.importorskip("nbconvert")
    html, _ = nbconvert.HTMLExporter().from_notebook_node(nb)
    parts = _EXPORT_CELL.split(html)[1:]
    if len(parts) != len(nb.cells):
        return [f"{path.name}: the export has {len(parts)} cells, the notebook {len(nb.cells)}"]
    problems = []
    for cell, part in zip(nb.cells, parts):
        shows_widget = any(WIDGET_VIEW in o.get("data", {}) for o in cell.get("outputs", []))
        if shows_widget and not _EXPORT_IMG.search(part):
            problems.append(f"{_label(path, nb, cell)}: displays a widget, but its exported HTML has no image")
    return problems


def _executed(cells: list[Any], models: dict[str, Any] | None = None) -> Any:
    nbformat = pytest.importorskip("nbformat")
    nb = nbformat.v4.new_notebook(cells=cells)
    if models is not None:
        nb.metadata["widgets"] = {WIDGET_STATE: {"state": models, "version_major": 2, "version_minor": 0}}
    return nb


def _cell(source: str, tags: list[str], outputs: list[dict[str, Any]]) -> Any:
    nbformat = pytest.importorskip("nbformat")
    c = nbformat.v4.new_code_cell(source, metadata={"tags": tags})
    c.outputs = [nbformat.from_dict(o) for o in outputs]
    return c


def _view(model_id: str) -> dict[str, Any]:
    return {"output_type": "display_data", "metadata": {},
            "data": {"text/plain": "VBox(...)", WIDGET_VIEW: {"model_id": model_id, "version_major": 2}}}


def test_check_export_needs_an_image_beside_every_widget() -> None:
    png = base64.b64encode(PNG_MAGIC + b"rest").decode()
    static = {"output_type": "display_data", "metadata": {},
              "data": {"text/html": f"<div class='wb-static'><img src='data:image/png;base64,{png}'/></div>",
                       "text/plain": "static copy"}}
    nb = _executed([_cell("W()", ["widget"], [_view("box"), static]), _cell("V()", ["widget"], [_view("v")]),
                    _cell("print(1)", [], [])])
    problems = check_export(Path("x.ipynb"), nb)
    assert len(problems) == 1 and "cell 1" in problems[0] and "no image" in problems[0]


def test_check_outputs_catches_a_missing_plot_and_a_text_figure() -> None:
    text_fig = {"output_type": "execute_result", "execution_count": 1, "metadata": {},
                "data": {"text/plain": "<Figure size 640x480 with 1 Axes>"}}
    png = {"output_type": "display_data", "metadata": {},
           "data": {"image/png": "iVBORw0KGgo=", "text/plain": "<IPython.core.display.Image object>"}}
    nb = _executed([_cell("fig", ["plot"], [text_fig]), _cell("show(fig)", ["plot"], [png])])
    problems = check_outputs(Path("x.ipynb"), nb)
    assert len(problems) == 2 and "cell 0" in problems[0] and "no PNG image" in problems[0]
    assert "displayed as text" in problems[1]


def test_check_outputs_needs_an_image_model_with_png_bytes_inside_the_widget() -> None:
    png = base64.b64encode(PNG_MAGIC + b"rest").decode()
    models = {
        "box": {"model_name": "VBoxModel", "state": {"children": ["IPY_MODEL_out", "IPY_MODEL_img"]}},
        "out": {"model_name": "OutputModel", "state": {"outputs": [{"data": {"text/plain": "<Figure size 9x2>"}}]}},
        "img": {"model_name": "ImageModel", "state": {}, "buffers": [{"path": ["value"], "data": png}]},
        "lonely": {"model_name": "VBoxModel", "state": {"children": ["IPY_MODEL_out"]}},
    }
    good = _executed([_cell("W()", ["widget", "widget-plot"], [_view("box")])], models)
    assert check_outputs(Path("x.ipynb"), good) == []
    bad = _executed([_cell("W()", ["widget", "widget-plot"], [_view("lonely")]), _cell("W()", ["widget"], [])],
                    models)
    problems = check_outputs(Path("x.ipynb"), bad)
    assert len(problems) == 2 and "holds no PNG image" in problems[0] and "displayed no widget" in problems[1]
