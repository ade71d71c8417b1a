"""The widgets build from files, show what they could read, and follow the selection."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("ipywidgets")
import matplotlib  # noqa: E402

matplotlib.use("Agg")

from profiling import plots  # noqa: E402
from profiling.widgets import KernelView, TraceInspector  # noqa: E402

RESULTS = Path(__file__).resolve().parents[2] / "results" / "profiling" / "h200"


def test_trace_inspector_from_files_with_a_missing_one(tmp_path):
    ins = TraceInspector(
        RESULTS / "matmul_probes.hatchet",
        RESULTS / "matmul_probes.chrome_trace",
        tmp_path / "missing.chrome_trace",
    )
    assert (
        any("does not exist" in m for m in ins.messages) and "could not read everything" in ins.status.value
    )
    assert ins.kernel.value == "matmul_kernel"
    assert list(ins.region.options) == ["(all)", "epilogue", "load_tiles", "mma"]
    assert len(ins.cta.options) == 32
    ins.region.value = "mma"
    ins.cta.value = ins.cta.options[5]
    t = ins.tables()
    assert t["regions"]["region"].tolist() == ["mma"]
    assert set(t["timeline"]["cta"]) == {ins.cta.options[5]} and set(t["timeline"]["warp"]) == {0, 4}
    assert "mma" in ins.table.value and "<table" in ins.table.value


def test_trace_inspector_without_a_trace_still_shows_the_tree():
    ins = TraceInspector(RESULTS / "scale_add_probes.hatchet")
    assert ins.cta.options == () and ins.cta.value is None
    assert "compute" in ins.table.value


def test_trace_inspector_with_nothing_readable(tmp_path):
    ins = TraceInspector(tmp_path / "nothing.hatchet")
    assert ins.profile is None and "nothing to show" in ins.header.value
    assert "does not exist" in ins.status.value


def test_kernel_view_and_plots():
    files = [RESULTS / f"{c}_kernels.hatchet" for c in ("scale_add", "softmax", "matmul", "mbdt")]
    view = KernelView(*files)
    assert "TB/s of 4.30 TB/s" in view.summary.value and "_mbdt_kernel" in view.table.value
    axes = plots.kernel_overview(view.profile)
    assert [t.get_text() for t in axes[0].get_yticklabels()][0] == "_mbdt_kernel [mbdt]"
    ax = plots.roofline(view.profile)
    assert len(ax.lines) == 2 and len(ax.collections[0].get_offsets()) == 2  # fp16/fp32 roofs; 2 kernels
    matplotlib.pyplot.close("all")
