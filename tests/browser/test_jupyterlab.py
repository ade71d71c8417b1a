"""Notebooks run through JupyterLab's UI in headless Chromium, as a user runs them (issue 20).

JupyterLab runs without MPLBACKEND, with autosave off; each notebook gets Run All Cells from the Run menu.
Then: no error output and no stderr, no "Error displaying widget", no widget shown as raw text
("VBox(...)"), no widget's static copy visible beside it (its CSS rule hides it where the widget renders),
every cell tagged `plot` shows an <img> or <canvas>, every `widget` cell a rendered widget,
every `widget-plot` widget a loaded <img>; a dropdown (or list) change redraws the widget's output in place
and sends nothing to the log console; the browser console has no errors. Every process started is
stopped by PID, and no notebook file is written.

Needs Debian's chromium and chromium-driver (`.ci/run` installs them) and selenium (dev extra); skipped
without them. Measured on the 2-core development machine (2026-12-01), all three tests: 85 s of CPU (user +
sys, every process started included); wall 296 s there at a load average of 12-18 (six engineers sharing it).
"""
from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from tests.browser.lab import ROOT, Browser, Lab, browser_tools, wait_for

CHROMIUM, CHROMEDRIVER = browser_tools()
pytestmark = [
    pytest.mark.browser,
    pytest.mark.slow,  # 60-80 s a notebook on the shared 2-core machine
    pytest.mark.skipif(not (CHROMIUM and CHROMEDRIVER), reason="needs chromium and chromedriver (apt-get install "
                       "chromium chromium-driver)"),
]
RUN_TIMEOUT_S = 300


@pytest.fixture(scope="module")
def ui(tmp_path_factory: pytest.TempPathFactory) -> Any:
    pytest.importorskip("selenium")
    pytest.importorskip("jupyterlab")
    work = tmp_path_factory.mktemp("jupyterlab")
    lab = Lab(work)
    browser = None
    try:
        lab.wait_ready()
        browser = Browser(CHROMIUM, CHROMEDRIVER, work / "chromium-profile")
        yield lab, browser
    finally:
        left = (browser.stop() if browser else []) + lab.stop()
        assert not left, f"processes still alive after stopping them by PID: {left}"


def _js(driver: Any, script: str, *args: Any) -> Any:
    return driver.execute_script(script, *args)


def _status(driver: Any) -> str:
    return _js(driver, "const s = document.querySelector('#jp-main-statusbar'); return s ? s.innerText : ''")


def _kernel_idle(driver: Any) -> bool:
    """The notebook's kernel is idle: the status bar's "Idle" (JupyterLab before 4.6) or the toolbar's
    execution indicator (4.6 dropped the status bar's kernel text)."""
    return "Idle" in _status(driver) or bool(_js(
        driver, "return !!document.querySelector('.jp-NotebookPanel:not(.lm-mod-hidden) "
                ".jp-Notebook-ExecutionIndicator[data-status=\"idle\"]');"))


def _cells(driver: Any) -> list[Any]:
    from selenium.webdriver.common.by import By

    return driver.find_elements(By.CSS_SELECTOR, ".jp-NotebookPanel:not(.lm-mod-hidden) .jp-Notebook .jp-Cell")


def _log_console_quiet(driver: Any) -> bool:
    """JupyterLab's status bar shows a log-console item (with a count) once output lands there."""
    return bool(_js(driver, "const e = document.querySelector('.jp-LogConsoleStatusItem');"
                            "return !e || e.classList.contains('lm-mod-hidden') || !e.innerText.trim();"))


def _images_loaded(driver: Any, element: Any, css: str) -> int:
    return _js(driver, "return [...arguments[0].querySelectorAll(arguments[1])]"
                       ".filter(i => i.tagName === 'CANVAS' || (i.complete && i.naturalWidth > 0)).length;",
               element, css)


def run_all(lab: Lab, browser: Browser, notebook: str) -> tuple[dict[str, Any], list[Any], float]:
    """Open the notebook, Run All Cells through the menu, wait until every code cell has run."""
    from selenium.webdriver.common.by import By

    nb = json.loads((ROOT / notebook).read_text())
    d = browser.driver
    d.get(lab.lab_url(notebook))
    wait_for(lambda: len(_cells(d)) == len(nb["cells"]), 180, f"{notebook}: {len(nb['cells'])} cells in the page")
    wait_for(lambda: _kernel_idle(d), 180, f"{notebook}: the kernel idle before Run All ({_status(d)!r})")
    t0 = time.monotonic()
    d.find_element(By.XPATH, "//div[contains(@class,'lm-MenuBar-itemLabel') and text()='Run']").click()
    d.find_element(By.XPATH, "//div[contains(@class,'lm-Menu-itemLabel') and text()='Run All Cells']").click()

    def done() -> bool:
        prompts = [e.text.strip("[]: ") for e in d.find_elements(
            By.CSS_SELECTOR, ".jp-NotebookPanel:not(.lm-mod-hidden) .jp-CodeCell .jp-InputArea-prompt")]
        return bool(prompts) and all(p.isdigit() for p in prompts) and _kernel_idle(d)

    wait_for(done, RUN_TIMEOUT_S, f"{notebook}: every cell run ({_status(d)!r}); server log: {lab.log_tail(600)}")
    return nb, _cells(d), time.monotonic() - t0


def check_rendered(browser: Browser, notebook: str, nb: dict[str, Any], cells: list[Any]) -> list[str]:
    """What the page fails to show, one line per problem."""
    from selenium.webdriver.common.by import By

    d = browser.driver
    problems = []
    page = _js(d, "return document.body.innerText")
    if "Error displaying widget" in page:
        problems.append(f"{notebook}: 'Error displaying widget' in the page")
    # a widget's static copy (for exports) is hidden by the live widget's CSS rule: visible, it doubles the view
    copies = _js(d, "return [...document.querySelectorAll('.wb-static')]"
                    ".filter(e => getComputedStyle(e).display !== 'none').length;")
    if copies:
        problems.append(f"{notebook}: {copies} static widget copies visible beside their live widgets")
    for i, (cell, dom) in enumerate(zip(nb["cells"], cells)):
        if cell["cell_type"] != "code":
            continue
        where = f"{notebook} cell {i} ({''.join(cell['source']).splitlines()[0][:60]!r})"
        outs = dom.find_elements(By.CSS_SELECTOR, ".jp-OutputArea-output")
        for o in outs:
            mime, text = o.get_attribute("data-mime-type") or "", o.text.strip()
            if mime in ("application/vnd.jupyter.stderr", "application/vnd.jupyter.error"):
                problems.append(f"{where}: {mime.rsplit('.', 1)[-1]} output: {text[:160]!r}")
            if text.startswith(("VBox(", "HBox(", "<Figure size", "Output(")):
                problems.append(f"{where}: shown as raw text: {text[:60]!r}")
        tags = set(cell.get("metadata", {}).get("tags", []))
        if "plot" in tags and not _images_loaded(d, dom, ".jp-OutputArea-output img, .jp-OutputArea-output canvas"):
            problems.append(f"{where}: tagged 'plot' but no loaded <img> or <canvas> in its output")
        if "widget" in tags and not dom.find_elements(By.CSS_SELECTOR, ".jp-OutputArea-output .jupyter-widgets"):
            problems.append(f"{where}: tagged 'widget' but no rendered widget")
        if "widget-plot" in tags and not _images_loaded(d, dom, ".jupyter-widgets img.widget-image, "
                                                                ".jupyter-widgets canvas"):
            problems.append(f"{where}: tagged 'widget-plot' but its widget shows no loaded image")
    return problems


def _cell_running(nb: dict[str, Any], cells: list[Any], source_start: str) -> Any:
    i = next(i for i, c in enumerate(nb["cells"]) if "".join(c["source"]).startswith(source_start))
    return cells[i]


def _console_errors(browser: Browser) -> list[str]:
    return [e["message"][:300] for e in browser.console() if e["level"] == "SEVERE"]


def _assert_unchanged(path: Path, before: bytes) -> None:
    assert path.read_bytes() == before, f"{path.name} was written during the run (autosave must be off)"


def test_trace_inspector_in_the_browser(ui: Any) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    lab, browser = ui
    notebook = "notebooks/03_trace_inspector.ipynb"
    before = (ROOT / notebook).read_bytes()
    nb, cells, took = run_all(lab, browser, notebook)
    problems = check_rendered(browser, notebook, nb, cells)
    assert not problems, "\n".join(problems)

    d = browser.driver
    view = _cell_running(nb, cells, "TraceInspector(*probe_files)")
    n_outputs = len(view.find_elements(By.CSS_SELECTOR, ".jp-OutputArea-output"))
    images = lambda: [i.get_attribute("src") for i in view.find_elements(By.CSS_SELECTOR, "img.widget-image")]
    table = lambda: view.find_element(By.CSS_SELECTOR, ".widget-html table").get_attribute("outerHTML")
    first_images, first_table = images(), table()
    region = Select(view.find_elements(By.CSS_SELECTOR, ".widget-dropdown select")[1])
    assert "mma" in [o.text for o in region.options]
    t0 = time.monotonic()
    region.select_by_visible_text("mma")  # the first change: the one whose plot used to leak out
    wait_for(lambda: images()[1] != first_images[1] and table() != first_table, 30,
             "the region distribution and the table redrawn after the first dropdown change")
    redraw_s = time.monotonic() - t0
    wait_for(lambda: _images_loaded(d, view, "img.widget-image") == len(first_images), 10, "the new images loaded")
    assert "mma" in table() and "load_tiles" not in table()
    assert len(view.find_elements(By.CSS_SELECTOR, ".jp-OutputArea-output")) == n_outputs, "a stray output appeared"
    assert _log_console_quiet(d), "output of the callback went to the log console"
    assert not _console_errors(browser), _console_errors(browser)
    _assert_unchanged(ROOT / notebook, before)
    lab.shutdown_kernels()  # the next notebook gets the two cores
    print(f"03_trace_inspector: Run All {took:.1f} s, first dropdown redraw {redraw_s:.2f} s")


def test_search_explorer_in_the_browser(ui: Any) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    lab, browser = ui
    notebook = "notebooks/01_search_explorer.ipynb"
    before = (ROOT / notebook).read_bytes()
    nb, cells, took = run_all(lab, browser, notebook)
    problems = check_rendered(browser, notebook, nb, cells)
    assert not problems, "\n".join(problems)

    d = browser.driver
    view = _cell_running(nb, cells, "explorer = run.explorer()")
    picker = view.find_element(By.CSS_SELECTOR, ".wb-node-list select")
    font = _js(d, "return getComputedStyle(arguments[0]).fontFamily", picker)
    assert "monospace" in font, f"node list font: {font}"
    header = lambda: view.find_element(By.CSS_SELECTOR, ".wb-node-header").text
    first = header()
    assert "None" not in first and "runtime" in first
    options = Select(picker).options
    other = next(o for o in options if not o.is_selected())
    t0 = time.monotonic()
    Select(picker).select_by_visible_text(other.text)
    wait_for(lambda: header() != first, 30, "the node header redrawn after picking another node")
    redraw_s = time.monotonic() - t0
    assert other.text.split()[1] in header()  # the picked node's id
    assert _log_console_quiet(d), "output of the callback went to the log console"
    assert not _console_errors(browser), _console_errors(browser)
    _assert_unchanged(ROOT / notebook, before)
    lab.shutdown_kernels()  # the next notebook gets the two cores
    print(f"01_search_explorer: Run All {took:.1f} s, node pick redraw {redraw_s:.2f} s")


def test_case_study_sweep_explorer_in_the_browser(ui: Any) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    lab, browser = ui
    notebook = "notebooks/case_studies/conv1d.ipynb"
    before = (ROOT / notebook).read_bytes()
    nb, cells, took = run_all(lab, browser, notebook)
    problems = check_rendered(browser, notebook, nb, cells)
    assert not problems, "\n".join(problems)

    d = browser.driver
    view = _cell_running(nb, cells, "SweepExplorer(")
    table = lambda: view.find_element(By.CSS_SELECTOR, ".widget-html table").text
    image = lambda: view.find_element(By.CSS_SELECTOR, "img.widget-image").get_attribute("src")
    first_table, first_image = table(), image()
    mode = Select(view.find_elements(By.CSS_SELECTOR, ".widget-dropdown select")[2])
    assert [o.text for o in mode.options] == ["plain", "graph"]
    t0 = time.monotonic()
    mode.select_by_visible_text("graph")
    wait_for(lambda: table() != first_table and image() != first_image, 30, "the sweep table and chart redrawn")
    redraw_s = time.monotonic() - t0
    assert "(ours)" in table() and "conv2d_eager" in table()
    assert _log_console_quiet(d), "output of the callback went to the log console"
    assert not _console_errors(browser), _console_errors(browser)
    _assert_unchanged(ROOT / notebook, before)
    lab.shutdown_kernels()
    print(f"case_studies/conv1d: Run All {took:.1f} s, mode change redraw {redraw_s:.2f} s")
