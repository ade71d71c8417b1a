"""`workbench profile lowered SPEC`: the spec's lowered draft run under a Proton kernel session on the GPU.

The draft is the lowering's own output for the user's spec (code this workbench wrote, not a search
candidate), so it runs in this process: a search's candidates are only ever run by the harness. The
session records each launched kernel's time and the scopes' bytes; the summary is the text the search
puts into its prompts (`profiling.summarize`), and the `.hatchet` file opens in the trace inspector.
"""
from __future__ import annotations

import importlib.util
import logging
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)


class ProfileError(RuntimeError):
    """The spec did not lower, or the GPU or Proton is not there: one line for the user."""


@dataclass
class LoweredProfile:
    hatchet: Path
    draft: Path
    summary: str
    kernels: int
    launches: int


def _module_from(path: Path, name: str) -> Any:
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ProfileError(f"cannot import {path}")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


def profile_lowered(spec_path: str | Path, out_dir: str | Path, *, overrides: dict[str, Any] | None = None,
                    iterations: int = 5, device: str = "cuda") -> LoweredProfile:
    """Lower `spec_path`, run the draft `iterations` times under a kernel session, write and summarize it."""
    import torch

    from profiling import kernel_session, load, summarize
    from workbench.harness.plan import set_tf32
    from workbench.lowering import lower_spec
    from workbench.spec import load_spec

    if device != "cuda" or not torch.cuda.is_available():
        raise ProfileError("Proton profiles kernels on a CUDA GPU; none is visible here")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    res = lower_spec(spec_path, overrides)
    if not res.ok:
        raise ProfileError(f"the spec did not lower: {res.diagnosis}")
    draft = out / f"{Path(spec_path).stem}.lowered.py"
    draft.write_text(res.source or "", encoding="utf-8")
    spec = load_spec(spec_path, overrides, module_name="wb_profile_spec")
    set_tf32(spec.allow_tf32)
    cand = _module_from(draft, "wb_profile_draft")
    torch.manual_seed(0)
    init = [x.to(device) if isinstance(x, torch.Tensor) else x for x in spec.module.get_init_inputs()]
    inputs = [x.to(device) if isinstance(x, torch.Tensor) else x for x in spec.module.get_inputs()]
    torch.manual_seed(0)
    model = cand.ModelNew(*init).to(device).eval()
    with torch.no_grad():
        model(*inputs)  # compiles outside the session
        torch.cuda.synchronize()
        with kernel_session(out / Path(spec_path).stem) as session:
            for _ in range(iterations):
                model(*inputs)
            torch.cuda.synchronize()
    prof = load(session.path)
    kernels = int(prof.kernels["kernel"].nunique()) if len(prof.kernels) else 0
    return LoweredProfile(hatchet=session.path, draft=draft, summary=str(summarize(prof)), kernels=kernels,
                          launches=int(sum(session.launches.values())))
