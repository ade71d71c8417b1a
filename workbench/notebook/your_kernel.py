"""The steps of the "your kernel" notebook (`notebooks/06_your_kernel.ipynb`) that are more than one call:
finding the spec, CPU sizes, the lowered draft on disk, the verdict's two clocks as a table, and on a GPU
the best kernel's Proton profile with its roofline position.

```python
spec = resolve_spec("level1/19_ReLU.py", kernelbench=ROOT.parent / "shared" / "kernelbench")
sizes = cpu_overrides(spec, max_elems=4096)          # {} on a GPU: published sizes
lowered, draft_path = write_draft(spec, sizes, out_dir)
clocks_table(result)                                 # candidate and reference, device and wall time
profile_candidate(spec, best_path, out_dir, sizes)   # GPU only: a Proton kernel-level profile
```
"""
from __future__ import annotations

import importlib.util
import logging
from pathlib import Path
from typing import Any

import pandas as pd

log = logging.getLogger(__name__)


def resolve_spec(path: str | Path, root: str | Path | None = None, kernelbench: str | Path | None = None) -> Path:
    """The spec file: `path` as given (absolute or from the working directory), else under the checkout
    `root`, else under the KernelBench folder (`level1/19_ReLU.py`). A FileNotFoundError lists where it looked."""
    p = Path(path).expanduser()
    candidates = [p] + [Path(base) / p for base in (root, kernelbench) if base and not p.is_absolute()]
    for c in candidates:
        if c.is_file():
            return c.resolve()
    raise FileNotFoundError(f"no spec file {path}: looked at {', '.join(str(c) for c in candidates)}")


def cpu_overrides(spec: Path, max_elems: int | None) -> dict[str, Any]:
    """Constants that shrink every tensor to `max_elems` elements for Triton's interpreter (None or a
    spec that already fits: no override, the published sizes)."""
    if not max_elems:
        return {}
    from workbench.suites.sizing import auto_size

    return auto_size(spec, max_elems)


def write_draft(spec: Path, overrides: dict[str, Any], out_dir: Path) -> tuple[Any, Path | None]:
    """`workbench lower` on the spec at these sizes; the draft is written to `out_dir/draft.py` (None and
    the lowering's one-line diagnosis when it could not lower the spec)."""
    from workbench.lowering import lower_spec

    res = lower_spec(spec, overrides or None)
    if not res.ok:
        return res, None
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / "draft.py"
    path.write_text(res.source, encoding="utf-8")
    return res, path


def clocks_table(result: Any) -> pd.DataFrame:
    """The verdict's numbers on both clocks: device time (CUDA events or graphs; absent on the CPU) and
    wall time per call, for the candidate and the reference, and which one the fitness used."""
    rows = [
        {"contender": "candidate", "device time [us]": result.device_time_us, "wall time [us]": result.wall_time_us},
        {"contender": "reference (PyTorch)", "device time [us]": result.baseline_device_time_us,
         "wall time [us]": result.baseline_wall_time_us},
    ]
    df = pd.DataFrame(rows)
    df["fitness clock"] = result.timing_basis
    return df


def _load_module(path: Path, name: str) -> Any:
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot import {path}")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def spec_cost(spec: Path, overrides: dict[str, Any], device: str = "cuda") -> dict[str, float]:
    """The reference forward's floating-point operations (`torch.utils.flop_counter`: matmuls and
    convolutions; elementwise ops count 0) and the bytes of its inputs, parameters and outputs (a lower
    bound of its memory traffic): the roofline position of any kernel that computes the same thing."""
    import torch
    from torch.utils.flop_counter import FlopCounterMode

    from workbench.spec import load_spec

    s = load_spec(spec, overrides, module_name="wb_cost_spec")
    model = s.module.Model(*s.module.get_init_inputs()).to(device)
    inputs = [x.to(device) if isinstance(x, torch.Tensor) else x for x in s.module.get_inputs()]
    with torch.no_grad(), FlopCounterMode(display=False) as counter:
        out = model(*inputs)
    outs = out if isinstance(out, (tuple, list)) else [out]
    tensors = [t for t in [*inputs, *model.parameters(), *outs] if isinstance(t, torch.Tensor)]
    nbytes = sum(t.numel() * t.element_size() for t in tensors)
    return {"flops": float(counter.get_total_flops()), "bytes": float(nbytes)}


def profile_candidate(spec: Path, candidate: Path, out_dir: Path, overrides: dict[str, Any] | None = None,
                      reps: int = 10) -> Path:
    """A Proton kernel-level (CUPTI) profile of the candidate's forward on the GPU, in a scope carrying the
    reference's flops and bytes (so the kernels get a roofline position). Runs the candidate in this
    process: it is your kernel, on your GPU; the harness's isolation is for kernels you did not write.
    Returns the profile's `.hatchet` path. Raises RuntimeError without CUDA."""
    import torch

    import profiling
    from workbench.spec import load_spec

    if not torch.cuda.is_available():
        raise RuntimeError("Proton profiles need a CUDA GPU; on the CPU there is nothing to profile")
    s = load_spec(spec, overrides or {}, module_name="wb_profile_spec")
    cand = _load_module(candidate, "wb_profile_candidate")
    model = cand.ModelNew(*s.module.get_init_inputs()).cuda()
    inputs = [x.cuda() if isinstance(x, torch.Tensor) else x for x in s.module.get_inputs()]
    cost = spec_cost(spec, overrides or {})
    dtype = next((t.dtype for t in inputs if isinstance(t, torch.Tensor) and t.is_floating_point()), torch.float32)
    flops_dtype = {torch.float16: "fp16", torch.bfloat16: "bf16", torch.float64: "fp64"}.get(dtype, "fp32")
    with torch.no_grad():
        model(*inputs)  # compile outside the session
        torch.cuda.synchronize()
        out_dir.mkdir(parents=True, exist_ok=True)
        name = out_dir / "best_kernels"
        with profiling.kernel_session(name) as session:
            with session.scope("best", bytes=cost["bytes"] * reps, flops=cost["flops"] * reps or None,
                               flops_dtype=flops_dtype):
                for _ in range(reps):
                    model(*inputs)
                torch.cuda.synchronize()
    return Path(session.path)
