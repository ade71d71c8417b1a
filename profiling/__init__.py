"""Triton Proton profiling: kernel-level and intra-kernel probe sessions, a trace model, summaries, widgets.

```python
import profiling
with profiling.kernel_session("out/run") as s:            # CUPTI kernel times (GPU only)
    with s.scope("add", bytes=3 * 4 * n):
        add[grid](...)
with profiling.probe_session("out/probes", kernel_times=True) as s:
    add[grid](..., PROBES=True)                              # intra-kernel regions
prof = profiling.load("out/")                                # works anywhere, from files
print(profiling.summarize(prof))
```
Widgets (`profiling.widgets`) and the CLI (`workbench profile inspect FILE`) read the same files.
Only torch, triton, numpy and pandas are needed to import this package; the kernels, the widgets and
the plots import their extras when used.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from platforms.lazy import lazy_exports

if TYPE_CHECKING:
    from .errors import (
        MissingRegionsError,
        ProfilingError,
        ProfilingUnavailable,
        SessionActiveError,
        TraceFileError,
        TraceVersionError,
    )
    from .probes import declared_regions, ttgir_regions
    from .sessions import (
        KernelSession,
        ProbeOptions,
        ProbeSession,
        active_session,
        assert_not_instrumenting,
        kernel_session,
        probe_session,
    )
    from .summary import summarize, summary_record
    from .trace import Profile, load, overlap_table, subsample_probe_trace

# imported on first use: the command line registers `workbench profile` without torch or pandas
_EXPORTS = {
    **dict.fromkeys(("MissingRegionsError", "ProfilingError", "ProfilingUnavailable", "SessionActiveError",
                     "TraceFileError", "TraceVersionError"), ".errors"),
    **dict.fromkeys(("declared_regions", "ttgir_regions"), ".probes"),
    **dict.fromkeys(("KernelSession", "ProbeOptions", "ProbeSession", "active_session", "assert_not_instrumenting",
                     "kernel_session", "probe_session"), ".sessions"),
    **dict.fromkeys(("summarize", "summary_record"), ".summary"),
    **dict.fromkeys(("Profile", "load", "overlap_table", "subsample_probe_trace"), ".trace"),
}
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)

__all__ = [
    "KernelSession",
    "MissingRegionsError",
    "ProbeOptions",
    "ProbeSession",
    "Profile",
    "ProfilingError",
    "ProfilingUnavailable",
    "SessionActiveError",
    "TraceFileError",
    "TraceVersionError",
    "active_session",
    "assert_not_instrumenting",
    "declared_regions",
    "kernel_session",
    "load",
    "overlap_table",
    "probe_session",
    "subsample_probe_trace",
    "summarize",
    "summary_record",
    "ttgir_regions",
]
