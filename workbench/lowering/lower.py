"""`lower_spec`: capture, partition, emit; one standalone candidate module or a one-line diagnosis."""
from __future__ import annotations

import inspect
import logging
import textwrap
from dataclasses import dataclass, field
from pathlib import Path

from workbench.lowering import primitives
from workbench.lowering.capture import CaptureError, capture, spec_module
from workbench.lowering.codegen import RUNTIME_HELPERS, Emitter, render_return
from workbench.lowering.epilogue import Unsupported
from workbench.lowering.fft_real import fold_real_c2r
from workbench.lowering.graph import rewrite_addmm
from workbench.lowering.init_source import InitError, build_init
from workbench.lowering.lifted import with_lifted_constants
from workbench.lowering.mask_index import expand_mask_indices
from workbench.lowering.norm_stats import fold_stats
from workbench.lowering.roofline import Work, graph_work
from workbench.lowering.softmax_match import fold_gathered_log_softmax, pair_logsumexp

log = logging.getLogger(__name__)


@dataclass
class LoweringResult:
    source: str | None
    diagnosis: str = ""
    ops: list[str] = field(default_factory=list)
    work: Work | None = None  # what the forward must do at these sizes (the roofline's bytes and flops)

    @property
    def ok(self) -> bool:
        return self.source is not None


def lower_spec(spec_path: str | Path, overrides: dict | None = None) -> LoweringResult:
    """Lower a KernelBench-format spec to a Triton candidate; never raises on a bad spec."""
    try:
        return _lower(spec_path, overrides)
    except Exception as exc:  # a lowering bug: one line naming it, never a traceback into the caller
        log.debug("lowering %s failed", spec_path, exc_info=True)
        return LoweringResult(None, f"lowering error: {type(exc).__name__}: {exc}".splitlines()[0][:300])


def _lower(spec_path: str | Path, overrides: dict | None) -> LoweringResult:
    from workbench.spec import SpecError

    try:
        module = spec_module(spec_path, overrides)
    except SpecError as exc:
        return LoweringResult(None, f"bad spec: {str(exc).splitlines()[0]}")
    source_text = Path(spec_path).read_text()
    try:
        cap = capture(module)
    except CaptureError as exc:
        return LoweringResult(None, str(exc))
    try:  # before any rewrite: the graph as captured is what the forward must do
        work = graph_work(cap.graph)
    except Exception:  # noqa: BLE001 - information for reports; a lowering never fails on it
        log.debug("no work estimate for %s", spec_path, exc_info=True)
        work = None
    rewrite_addmm(cap.graph)
    expand_mask_indices(cap.graph)
    fold_real_c2r(cap.graph)
    fold_stats(cap.graph)
    fold_gathered_log_softmax(cap.graph)
    pair_logsumexp(cap.graph)
    precision = "tf32" if getattr(module, "ALLOW_TF32", False) else "ieee"
    em = Emitter(cap.graph, cap.inputs, cap.forward_args, precision)
    try:
        em.run()
    except Unsupported as exc:
        return LoweringResult(None, str(exc).splitlines()[0], em.ops, work)
    try:
        init = build_init(source_text)
        init.methods = with_lifted_constants(cap.inputs, cap.constants, init.methods,
                                             cap.state_attrs)
    except (InitError, SyntaxError, Unsupported) as exc:
        return LoweringResult(None, str(exc).splitlines()[0], em.ops, work)
    src = assemble(em, init, cap, Path(spec_path).name, _forward_signature(module, cap.forward_args))
    try:
        compile(src, "candidate.py", "exec")
    except SyntaxError as exc:  # a codegen bug: say so in one line rather than hand out broken code
        return LoweringResult(None, f"codegen error: line {exc.lineno}: {exc.msg}", em.ops, work)
    return LoweringResult(src, "", em.ops, work)


def _forward_signature(module: object, args: list[str]) -> str:
    try:
        sig = inspect.signature(module.Model.forward)  # type: ignore[attr-defined]
        params = list(sig.parameters.values())[1:]
        if all(p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) for p in params) and \
                [p.name for p in params][:len(args)] == args:
            return ", ".join(["self"] + [str(p.replace(annotation=inspect.Parameter.empty)) for p in params])
    except (TypeError, ValueError):
        pass
    return ", ".join(["self", *args])


def assemble(em: Emitter, init, cap, spec_name: str, fwd_sig: str) -> str:
    tunables = {k: v for k, v in primitives.TUNABLE_DEFAULTS.items() if k in em.tunables}
    out: list[str] = [
        f'"""Triton candidate lowered from {spec_name} by workbench.lowering (no LLM).',
        "",
        "The forward is the spec's forward captured to core ATen: glue (views, allocations) stays as",
        "tensor methods, every computing op runs in one of the kernels below. Sizes are read from the",
        "inputs at run time. TUNABLES are the block sizes the offline tuner may change.",
        f'ATen ops captured: {", ".join(em.ops)}',
        '"""',
        "import math  # noqa: F401 - the spec's __init__ may use it",
        "import os  # noqa: F401 - reads TRITON_INTERPRET only",
        "",
        "import torch",
        "import torch.nn as nn",
        "import triton",
        "import triton.language as tl",
        "",
        "TUNABLES = {" + ", ".join(f'"{k}": {v[0]!r}' for k, v in tunables.items()) + "}",
    ]
    out += [f"{k} = {v[1]!r}" for k, v in tunables.items()]
    if any("DOT_F32" in k for k in em.kernel_src):
        out += ["# Triton's interpreter (TRITON_INTERPRET=1, CPU) gets bf16 tl.dot wrong: bf16 tiles go to fp32 there",
                '_DOT_F32 = os.environ.get("TRITON_INTERPRET", "0") == "1"']
    out += ["", ""]
    for h in primitives.helper_sources(em.helpers):
        out += [h.rstrip(), "", ""]
    for k in em.kernel_src:
        out += [k.rstrip(), "", ""]
    out += [RUNTIME_HELPERS.rstrip(), "", ""]
    for p in init.preamble:
        out += [p, "", ""]
    out.append("class ModelNew(nn.Module):")
    if not init.methods:
        out += ["    # Model defines no __init__: nn.Module's, which owns no parameters", ""]
    for m in init.methods:
        text = m.replace("def __init__(", "def __init__(", 1)
        out += [textwrap.indent(text, "    "), ""]
    body = em.lines + [render_return(em.outputs, cap.out_spec)]
    out.append(f"    def forward({fwd_sig}):")
    out += ["        " + ln for ln in body]
    return "\n".join(out).rstrip() + "\n"
