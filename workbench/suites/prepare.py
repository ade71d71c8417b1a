"""Preparing one problem: load the spec, size it, lower the seed.

Runs in a child of the suite's fork server (`forkserver.py`): a problem that fails to import, lacks
`get_inputs`, hangs or crashes the interpreter fails alone, with that reason.
"""
from __future__ import annotations

import dataclasses
import logging
from typing import Any

log = logging.getLogger(__name__)


def prepare_problem(spec_path: str, max_elems: int | None, draft: str, name: str) -> dict[str, Any]:
    """Runs in the child. Loads the spec, sizes it (when `max_elems`), lowers it (when `draft == "lower"`)."""
    from workbench.spec import SpecError, load_spec
    from workbench.suites.sizing import measure, shrink

    try:
        spec = load_spec(spec_path, module_name=f"wb_suite_{abs(hash(name))}")
    except SpecError as exc:
        return {"ok": False, "diagnosis": f"bad spec: {exc}"}
    out: dict[str, Any] = {"ok": True, "overrides": {}, "sizing": None}
    if max_elems:
        try:
            sized = shrink(spec, max_elems)
        except Exception as exc:
            return {"ok": False, "diagnosis": f"sizing failed: {type(exc).__name__}: {exc}".splitlines()[0][:300]}
        out["overrides"] = sized.overrides
        out["sizing"] = sized.to_dict()
        if not sized.reached:
            log.warning("%s: could not bring every tensor under %d elements (largest %d)", name, max_elems,
                        sized.footprint.max_elems)
    else:
        try:
            fp = measure(spec, {})
            out["sizing"] = {"overrides": {}, "max_elems_used": fp.max_elems, "input_shapes": fp.input_shapes,
                             "forward_checked": fp.forward_checked, "reached": True}
        except Exception as exc:  # published sizes: a footprint we cannot measure is only information
            out["sizing"] = {"overrides": {}, "note": f"not measured: {type(exc).__name__}"}
    out["seed_source"], out["seed_diagnosis"], out["seed_ops"] = None, "", []
    if draft == "lower":
        try:
            from workbench.lowering import lower_spec  # lazy: lowering is optional for a suite
        except ImportError as exc:
            out["seed_diagnosis"] = f"lowering unavailable: {exc}"
            return out
        try:
            res = lower_spec(spec_path, out["overrides"] or None)
        except Exception as exc:  # a lowering bug costs the seed, not the sizing we already have
            out["seed_diagnosis"] = f"lowering raised {type(exc).__name__}: {exc}".splitlines()[0][:300]
            return out
        out["seed_source"], out["seed_diagnosis"], out["seed_ops"] = res.source, res.diagnosis, list(res.ops)
        # the forward's compulsory bytes and useful flops at these sizes: the report's ceiling share
        out["work"] = dataclasses.asdict(res.work) if res.work is not None else None
    return out
