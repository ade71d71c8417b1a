"""Issue 36: the figure style, notebooks that run from anywhere, the GPU reports' readers and charts, the
sortable table, and every widget's static copy (what an export shows)."""
from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from profiling.figure_style import fmt_int, fmt_num, fmt_speedup, provenance_line, styled_table
from workbench.notebook import find_root, results_dir
from workbench.notebook.result_charts import fast_p, fast_p_figure, speedup_distribution_figure
from workbench.notebook.results import (
    LOWERING_SPEEDUPS,
    lowering_runs,
    merged_provenance_line,
    read_lowering_run,
    suite_runs,
)

ROOT = Path(__file__).resolve().parents[2]
LOWERING = ROOT / "results" / "lowering" / "gpu"
PNG = b"\x89PNG\r\n\x1a\n"


def test_numbers_are_rounded_for_a_reader():
    assert fmt_num(53.631999) == "53.6" and fmt_num(2732.26) == "2,732" and fmt_num(0.0182476) == "0.0182"
    assert fmt_num(float("nan")) == "–" and fmt_num(None) == "–" and fmt_num(1.5e-7) == "1.50e-07"
    assert fmt_int(14478.64) == "14,479" and fmt_speedup(1.2662) == "1.27x"
    df = pd.DataFrame({"cycles_per_launch": [14478.639], "median_us": [53.631999], "tuned vs eager [x]": [1.2662],
                       "problems": [90], "reason": ["a long reason " * 20]})
    html = styled_table(df).to_html()
    assert "14,479" in html and "53.6" in html and "1.27x" in html and ">90<" in html and "53.631999" not in html
    assert "white-space: normal" in html  # the reason wraps instead of widening the table


def test_provenance_is_one_readable_line():
    line = provenance_line({"gpu": "NVIDIA H200", "driver": "580.159.04", "cuda": "13.0", "torch": "2.11.0",
                            "triton": "3.6.0", "commit": "fc843a2631e8", "date": "2026-12-02T06:25:14Z"})
    assert line == ("NVIDIA H200 (driver 580.159.04, CUDA 13.0), torch 2.11.0, triton 3.6.0, commit fc843a2, "
                    "2026-12-02 06:25 UTC")
    assert provenance_line({"cpu": "x86_64", "gpu": None}).startswith("CPU (x86_64") and "None" not in \
        provenance_line({"cpu": "x86_64", "gpu": None, "driver": None})


def test_a_copied_notebook_finds_the_checkout_of_the_installed_package(tmp_path):
    """The notebook's first cell run from a folder outside the checkout (a copied notebook): no
    `no pyproject.toml at or above` failure, the checkout's results are found."""
    code = ("from workbench.notebook import setup, results_dir; root = setup(); "
            "print(root); print(results_dir('lowering', 'gpu').is_dir())")
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TRITON_INTERPRET": "1"}
    env.pop("WORKBENCH_ROOT", None)
    out = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == [str(ROOT), "True"]


def test_a_named_root_that_is_no_checkout_and_missing_results_say_what_to_do(tmp_path, monkeypatch):
    with pytest.raises(FileNotFoundError, match="is not a workbench checkout"):
        find_root(tmp_path)
    monkeypatch.setenv("WORKBENCH_ROOT", str(ROOT))
    assert find_root() == ROOT
    with pytest.raises(FileNotFoundError, match="no recorded results at .*nothing_here.*WORKBENCH_ROOT"):
        results_dir("nothing_here", required=True)


def test_lowering_runs_read_as_the_writer_summarised_them():
    runs = [read_lowering_run(p) for p in lowering_runs(LOWERING)]
    assert [r.name for r in runs][:2] == ["gpu", "run2"] and runs[-1].name == "run4"
    newest = runs[-1]
    line = newest.provenance_line
    assert line.startswith("NVIDIA H200 (driver") and "device calls" in line and "None" not in line
    for level, s in newest.summary.items():  # the tidy frame's speedups give the writer's geomeans back
        sub = newest.rows[newest.rows["level"] == level]
        v = sub["x_eager_tuned"].dropna()
        assert math.exp(np.log(v).mean()) == pytest.approx(s["geomean_vs_eager_tuned"], rel=2e-3)
        # the writer compares its 4-digit rounded speedup with 1 (a 1.00004x draft is not faster there)
        assert fast_p(sub, "x_eager_tuned", 1.0) == pytest.approx(s["fast_1_vs_eager_tuned"], abs=1.01 / len(sub))
    assert newest.rows.loc[~newest.rows["correct"], "x_eager_tuned"].isna().all()


def test_merged_provenance_counts_the_calls_and_spans_the_dates():
    late = {"gpu": "G", "date": "2026-12-02T16:08:00Z", "commit": "bbbbbbb2"}
    prov = {"merged_from": {"a": {"gpu": "G", "date": "2026-12-02T06:25:14Z", "commit": "aaaaaaa1"},
                            "b": {"merged_from": {"c": late}}}}
    assert merged_provenance_line(prov) == "G; 2 device calls, 2026-12-02 06:25 to 16:08 UTC; commits aaaaaaa, bbbbbbb"


def test_suite_runs_put_gpu_runs_first_and_name_runs_by_their_report(tmp_path):
    for name, gpu in (("a_cpu", None), ("z_gpu", "NVIDIA H200")):
        (tmp_path / name).mkdir()
        (tmp_path / name / "report.json").write_text(json.dumps(
            {"run_id": f"id-{name}", "provenance": {"gpu": gpu}, "levels": {}, "problems": [
                {"level": "1", "name": "p", "verdict": "passed", "correct": True, "speedup": 2.0}]}))
    (tmp_path / "broken").mkdir()
    (tmp_path / "broken" / "report.json").write_text("{")
    runs = suite_runs(tmp_path)
    assert [(r.label, r.on_gpu) for r in runs] == [("id-z_gpu", True), ("id-a_cpu", False)]
    assert runs[0].problems()["speedup"].tolist() == [2.0]
    from profiling.widgets_figures import figure_png
    from workbench.notebook.results import SUITE_SPEEDUPS

    # 04_suites draws a GPU run this way (no GPU suite run is recorded yet: this is its only check on the CPU)
    assert figure_png(fast_p_figure(runs[0].problems(), SUITE_SPEEDUPS, "t")).startswith(PNG)
    assert figure_png(speedup_distribution_figure(runs[0].problems(), SUITE_SPEEDUPS, "t")).startswith(PNG)


def test_the_charts_draw_every_level_and_an_empty_frame():
    from profiling.widgets_figures import figure_png

    rows = read_lowering_run(lowering_runs(LOWERING)[-1]).rows
    for fig in (fast_p_figure(rows, LOWERING_SPEEDUPS, "t"), speedup_distribution_figure(rows, LOWERING_SPEEDUPS, "t")):
        titles = [ax.get_title() for ax in fig.axes]
        assert titles == ["level 1 (90 problems)", "level 2 (90 problems)", "level 3 (40 problems)"]
        assert fig.axes[-1].get_legend() is not None and figure_png(fig).startswith(PNG)
    empty = rows.iloc[0:0]
    assert figure_png(fast_p_figure(empty, LOWERING_SPEEDUPS, "none")).startswith(PNG)


def test_the_table_explorer_sorts_filters_and_keeps_a_static_copy():
    pytest.importorskip("ipywidgets")
    from workbench.notebook.table import TableExplorer, filter_rows

    df = pd.DataFrame({"level": ["1", "1", "2"], "problem": ["relu", "gemm", "conv"], "x": [2.0, None, 0.5],
                       "reason": ["", "output 0: 3 of 9 differ", ""]})
    assert filter_rows(df, {"level": "1"}, sort="x", ascending=False)["problem"].tolist() == ["relu", "gemm"]
    assert filter_rows(df, text="DIFFER")["problem"].tolist() == ["gemm"]
    t = TableExplorer(df, filters=["level"], sort="x", chart=PNG + b"x")
    t.filters["level"].value = "2"
    assert t.rows()["problem"].tolist() == ["conv"] and "1 of 3 rows" in t.count.value
    pngs, html = t.static_copy()
    assert pngs == [PNG + b"x"] and all(p in html for p in ("relu", "gemm", "conv"))  # the copy: every row


def test_every_view_leaves_a_static_copy_with_an_image(monkeypatch):
    pytest.importorskip("ipywidgets")
    import IPython.display

    from profiling.widgets import KernelView, TraceInspector
    from profiling.widgets_figures import STATIC_CLASS

    shown = []
    monkeypatch.setattr(IPython.display, "display", lambda *a, **k: shown.append((a, k)))
    prof_dir = ROOT / "results" / "profiling" / "h200"
    ins = TraceInspector(prof_dir / "matmul_probes.hatchet", prof_dir / "matmul_probes.chrome_trace")
    assert "NVIDIA H200" in ins.header.value and "2026-11-29" in ins.header.value
    assert "e+" not in ins.table.value and "overflow-x:auto" in ins.table.value  # cycles as integers, no clipping
    for view in (ins, KernelView(prof_dir / "matmul_kernels.hatchet")):
        shown.clear()
        view._ipython_display_()
        (live,), (static,) = shown[0][0], shown[1][0]
        assert "wb-static { display: none; }" in live.children[0].value  # the live view hides the copy
        assert shown[1][1] == {"raw": True} and STATIC_CLASS in static["text/html"]
        assert "data:image/png;base64," in static["text/html"] and static["image/png"]


def test_your_kernel_steps_on_the_cpu(tmp_path):
    from workbench.notebook.your_kernel import clocks_table, resolve_spec, spec_cost, write_draft

    spec = resolve_spec("examples/vector_add/spec.py", root=ROOT)
    with pytest.raises(FileNotFoundError, match="no spec file level1/nothing.py: looked at"):
        resolve_spec("level1/nothing.py", root=ROOT, kernelbench=tmp_path)
    lowered, path = write_draft(spec, {"N": 1024}, tmp_path)
    assert path == tmp_path / "draft.py" and "ModelNew" in path.read_text() and lowered.ops
    cost = spec_cost(spec, {"N": 1024}, device="cpu")
    assert cost["flops"] == 0 and cost["bytes"] == 3 * 1024 * 4  # two fp32 inputs and one output, no matmul

    class Result:
        device_time_us, wall_time_us, baseline_device_time_us, baseline_wall_time_us = None, 16001.2, None, 23.1
        timing_basis = "wall (device time unavailable: no device time on this platform)"

    t = clocks_table(Result())
    assert t["wall time [us]"].tolist() == [16001.2, 23.1] and t["device time [us]"].isna().all()


@pytest.mark.gpu
def test_the_best_kernels_profile_has_a_roofline_position(tmp_path):
    """06_your_kernel's step 4 on a GPU: a Proton kernel-level profile of the bundled vector_add candidate
    in a scope with the reference's bytes, so its kernel gets a bandwidth (and a roofline point)."""
    import profiling
    from workbench.notebook.your_kernel import profile_candidate

    hatchet = profile_candidate(ROOT / "examples" / "vector_add" / "spec.py",
                                ROOT / "examples" / "vector_add" / "candidate.py", tmp_path)
    prof = profiling.load(hatchet)
    k = prof.kernels
    assert len(k) and k["launches"].sum() >= 10 and (k["gbps"] > 0).any(), k.to_string()


@pytest.mark.gpu
def test_your_kernel_notebook_on_the_gpu():
    """06_your_kernel's GPU path, which the CPU run skips: published sizes, the fitness curve, the best
    kernel's Proton profile (KernelView and its static copy) and its roofline point; a budget of 4 nodes."""
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    pytest.importorskip("ipykernel")   # the notebook's kernel
    pytest.importorskip("ipywidgets")  # KernelView
    path = ROOT / "notebooks" / "06_your_kernel.ipynb"
    nb = nbformat.read(path, as_version=4)
    params = next(c for c in nb.cells if c.cell_type == "code" and "BUDGET = None" in c.source)
    params.source = params.source.replace("BUDGET = None", "BUDGET = 4").replace('DEVICE = "auto"', 'DEVICE = "cuda"')
    nbclient.NotebookClient(nb, timeout=900, kernel_name="python3", resources={"metadata": {"path": str(path.parent)}},
                            store_widget_state=True).execute()
    outs = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])]
    errors = [o for o in outs if o.output_type == "error"]
    assert not errors, [(e.ename, e.evalue) for e in errors]
    profile_cell = next(c for c in nb.cells if c.cell_type == "code" and "profile_candidate(" in c.source)
    data = [o.get("data", {}) for o in profile_cell.outputs]
    assert sum("image/png" in d for d in data) >= 2, data  # KernelView's static copy and the roofline
    text = "".join(str(o.get("text", "")) for o in outs)
    assert "times rank nothing here" not in text and "Skipped on the CPU" not in text
