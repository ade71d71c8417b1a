"""The widgets draw their plots as PNG bytes into Image widgets and keep every callback's output inside
the widget: nothing is displayed from a callback, so nothing can land in JupyterLab's log console."""
from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("ipywidgets")

from profiling.widgets import KernelView, TraceInspector  # noqa: E402
from profiling.widgets_figures import figure_png, new_figure  # noqa: E402
from workbench.notebook import SweepExplorer, repo_root, show  # noqa: E402
from workbench.notebook.sweep import read_sweep, sweep_cell  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
PROFILES = ROOT / "results" / "profiling" / "h200"
SWEEPS = ROOT / "results" / "case_studies"
PNG = b"\x89PNG\r\n\x1a\n"


def png(value) -> bool:
    return bytes(value).startswith(PNG)  # ipywidgets hands an Image's value back as a memoryview


@pytest.fixture
def no_display(monkeypatch):
    """Fail on any IPython display call: a widget callback must set values, not display."""
    import IPython.display

    calls = []
    monkeypatch.setattr(IPython.display, "display", lambda *a, **k: calls.append(a))
    return calls


def test_trace_inspector_redraws_into_png_images_without_displaying(no_display):
    ins = TraceInspector(PROFILES / "matmul_probes.hatchet", PROFILES / "matmul_probes.chrome_trace")
    first = (ins.timeline_img.value, ins.dist_img.value)
    assert all(png(v) for v in first)
    ins.region.value = "mma"           # the first change: the one that used to leak its plot
    assert png(ins.dist_img.value) and ins.dist_img.value != first[1]
    dist = bytes(ins.dist_img.value)
    ins.cta.value = ins.cta.options[3]
    assert ins.timeline_img.value != first[0] and bytes(ins.dist_img.value) == dist  # across CTAs: unchanged
    assert no_display == [] and ins.out.outputs == ()
    assert "SM clock" in ins.header.value and "None" not in ins.header.value


def test_trace_inspector_without_a_trace_hides_the_timeline():
    ins = TraceInspector(PROFILES / "scale_add_probes.hatchet")
    assert ins.timeline_img.layout.display == "none" and "no per-warp timeline" in ins.timeline_note.value
    assert png(ins.dist_img.value)   # the distribution says why it is empty, as an image


def test_a_truncated_file_is_listed_once_in_the_status_and_not_logged(tmp_path, caplog):
    bad = tmp_path / "truncated.hatchet"
    bad.write_text((PROFILES / "matmul_probes.hatchet").read_text()[:300])
    ins = TraceInspector(bad, PROFILES / "matmul_probes.chrome_trace")
    assert "truncated" in ins.status.value
    assert not [r for r in caplog.records if "truncated" in r.getMessage()]


def test_a_failing_redraw_says_why_in_the_view(monkeypatch):
    ins = TraceInspector(PROFILES / "matmul_probes.hatchet", PROFILES / "matmul_probes.chrome_trace")
    from profiling import plots

    def broken(*a, **k):
        raise RuntimeError("no ink")

    monkeypatch.setattr(plots, "region_distribution", broken)
    ins.region.value = "mma"
    assert "redraw failed: RuntimeError: no ink" in ins.status.value


def test_kernel_view_draws_png_images():
    view = KernelView(*[PROFILES / f"{c}_kernels.hatchet" for c in ("scale_add", "matmul")])
    assert png(view.overview_img.value) and png(view.roofline_img.value)


def test_show_returns_a_png_and_closes_a_pyplot_figure():
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots()
    ax.plot([0, 1])
    img = show(fig)
    assert img.data.startswith(PNG) and fig.number not in plt.get_fignums()
    assert figure_png(new_figure(2, 1)).startswith(PNG)


def test_repo_root_and_its_error(tmp_path):
    assert repo_root(ROOT / "notebooks" / "case_studies") == ROOT
    with pytest.raises(FileNotFoundError, match="no pyproject.toml"):
        repo_root(tmp_path)


def test_sweep_cell_speedups_and_failed_contenders():
    df = read_sweep(SWEEPS / "mbdt" / "bench.csv")
    t = sweep_cell(df, "64x2x2", "float32", "plain", "triton").set_index("contender")
    assert t.loc["triton", "ours_speedup"] == 1.0
    assert t.loc["eager", "ours_speedup"] == pytest.approx(t.loc["eager", "median_us"] / t.loc["triton", "median_us"])
    assert t.loc["compile_default", "status"] == "incorrect" and "differ" in t.loc["compile_default", "note"]
    assert t["median_us"].isna().sum() == 2   # the incorrect ones have no time, and sort last
    assert list(t.index[-2:]) == ["compile_default", "vectorized_compile_default"]


def test_sweep_explorer_follows_the_dropdowns(no_display):
    ex = SweepExplorer(SWEEPS / "conv1d" / "bench.csv")
    assert ex.ours.value == "triton" and ex.shape.value == "production"
    before = (ex.table.value, ex.plot.value)
    ex.mode.value = "graph"
    assert ex.table.value != before[0] and ex.plot.value != before[1] and png(ex.plot.value)
    ex.shape.value = "k5"
    assert set(ex.dtype.options) <= {"float16", "float32"} and "K 5" in ex.params.value
    assert no_display == [] and ex.out.outputs == ()


def test_sweep_explorer_bad_input_is_one_line(tmp_path):
    with pytest.raises(FileNotFoundError, match="no recorded sweep"):
        SweepExplorer(tmp_path / "missing.csv")
    (tmp_path / "x.csv").write_text("a,b\n1,2\n")
    with pytest.raises(ValueError, match="not a benchmark sweep: no column"):
        SweepExplorer(tmp_path / "x.csv")
    with pytest.raises(ValueError, match="ours='nope' is not a contender"):
        SweepExplorer(SWEEPS / "pffn" / "bench.csv", ours="nope")


def test_sweep_explorer_starts_in_a_mode_where_ours_has_a_time():
    ex = SweepExplorer(SWEEPS / "event_truncate" / "bench.csv", ours="triton_exact")
    assert ex.mode.value == "plain" and set(ex.mode.options) == {"plain", "graph"}
    ex.mode.value = "graph"   # ours skipped there: the table says why instead of a time
    t = ex.cell().set_index("contender")
    assert t.loc["triton_exact", "status"] == "skipped" and "synchronizes" in t.loc["triton_exact", "note"]
    assert "skipped" in ex.table.value


def test_search_explorer_header_formats_numbers_and_leaves_out_absent_fields():
    from types import SimpleNamespace

    from workbench.search.widgets import node_header, node_label

    n = SimpleNamespace(id="3377739466d7", seq=5, operator="offline", parents=["e837f3dad33a"], island=None,
                        status="passed", fitness=0.019531, runtime_us=8252.019500105234, prompt_tokens=0,
                        completion_tokens=0)
    h = node_header(n)
    assert "runtime 8,252.0 us" in h and "fitness <b>0.01953</b>" in h
    assert "island" not in h and "None" not in h and "tokens" not in h
    n.island, n.prompt_tokens, n.completion_tokens, n.runtime_us = 2, 1200, 350, None
    h = node_header(n)
    assert "island 2" in h and "runtime -" in h and "tokens 1,200 prompt + 350 completion" in h
    assert node_label(n, 7, 6) == "  5 3377739466d7 offline passed fitness 0.01953"


def test_diagnosis_of_an_interpreter_speedup_keeps_its_digits():
    from workbench.result import EvalResult, Status
    from workbench.search.diagnosis import diagnose

    text = diagnose(EvalResult(status=Status.PASSED, correct=True, speedup=0.000312, runtime_us=8252.0,
                               baseline_runtime_us=2.57))
    assert "speedup 0.000312x" in text and "0.000x" not in text


def test_paper_chart_puts_one_label_per_row_on_the_y_axis():
    import pandas as pd

    from workbench.notebook.charts import paper_speedup_figure

    paper = pd.DataFrame([{"shape": "production", "dtype": d, "mode": m, "versus": "eager", "paper_low": 2.3,
                           "paper_high": 2.3, "ours": 2.6 if d == "float16" else None}
                          for d in ("float16", "float32") for m in ("plain", "graph")])
    ax = paper_speedup_figure(paper).axes[0]
    assert [t.get_text() for t in ax.get_yticklabels()] == ["production float16 plain vs eager",
                                                            "production float16 graph vs eager"]
    empty = paper_speedup_figure(paper.assign(ours=None)).axes[0]
    assert not empty.axison and "no recorded cell" in empty.texts[0].get_text()


def test_exact_chart_labels_speedups_plainly():
    import pandas as pd

    from workbench.notebook.charts import exact_speedup_figure

    table = pd.DataFrame({"shape": ["a", "b"], "mode": ["graph", "graph"], "x_eager": [2.5, 60.0],
                          "x_best": [2.0, 2.2]})
    fig = exact_speedup_figure(table, [{"low": 2.3, "high": 9.25}], "MTIA v2i")
    fig.canvas.draw()
    labels = [t.get_text() for t in fig.axes[0].get_yticklabels() if t.get_text()]
    assert "10x" in labels and not any("10^" in t or "times" in t for t in labels)
