"""The aten ops a spec's reference computes: the key code samples are matched by.

The lowering's capture (`workbench.lowering.lower_spec(...).ops`) when it is available and captured
something; else a cheap capture of our own: the reference runs once on fake tensors (no memory is
allocated, so KernelBench's gigabyte inputs cost nothing) under a dispatch mode that records every op.
Glue ops (allocation, views, copies: the harness's `GLUE_OPS`) are left out of the key: two specs
that both reshape are not the same problem.
"""

from __future__ import annotations

import logging
import threading
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

_cache: dict[tuple[str, int, str], tuple[str, ...]] = {}
_lock = threading.Lock()


def spec_ops(spec_path: str | Path, overrides: dict[str, Any] | None = None) -> tuple[str, ...]:
    """Sorted compute ops of the spec (`aten.mm.default`, ...); cached per file version and overrides."""
    p = Path(spec_path).resolve()
    key = (str(p), p.stat().st_mtime_ns, repr(sorted((overrides or {}).items())))
    with _lock:
        if key in _cache:
            return _cache[key]
    ops = _from_lowering(p, overrides) or _capture(p, overrides)
    with _lock:
        _cache[key] = ops
    return ops


def compute_ops(names: list[str] | tuple[str, ...]) -> tuple[str, ...]:
    """Drop glue ops from a list of `aten.<name>.<overload>` names; sorted and unique."""
    from workbench.harness.opcheck import GLUE_OPS

    out = set()
    for name in names:
        packet = name.split(".")[1] if name.startswith("aten.") and name.count(".") >= 1 else name
        if packet not in GLUE_OPS and not name.startswith("prim."):
            out.add(name)
    return tuple(sorted(out))


def _from_lowering(p: Path, overrides: dict[str, Any] | None) -> tuple[str, ...]:
    try:
        from workbench.lowering import lower_spec
    except ImportError:
        return ()
    try:
        res = lower_spec(p, overrides)
    except Exception as exc:  # the lowering is optional here: fall back to our own capture
        log.info("lower_spec(%s) failed, capturing the ops directly: %s", p.name, exc)
        return ()
    return compute_ops(list(getattr(res, "ops", None) or []))


def _capture(p: Path, overrides: dict[str, Any] | None) -> tuple[str, ...]:
    """Fake inputs first (free at any size); a reference with data-dependent control flow (`.item()`,
    a mask's count) cannot run on them, so it runs for real at its first CPU shape instead."""
    from workbench.spec import load_spec

    spec = load_spec(p, overrides, module_name=f"wb_spec_ops_{abs(hash(str(p)))}")
    mod = spec.module
    model = mod.Model(*mod.get_init_inputs())  # real parameters: a Module cannot hold fake ones
    try:
        return compute_ops(_record(model, mod, fake=True))
    except Exception as exc:
        log.debug("fake capture of %s failed (%s); running it at a CPU shape", p.name, exc)
    cpu_shapes = list(getattr(mod, "CPU_SHAPES", []) or [])
    if cpu_shapes and cpu_shapes[0] in spec.shapes and not overrides:
        spec.apply(spec.shapes[cpu_shapes[0]])
    return compute_ops(_record(model, mod, fake=False))


def _record(model: Any, mod: Any, *, fake: bool) -> list[str]:
    import contextlib

    import torch
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.utils._python_dispatch import TorchDispatchMode

    seen: list[str] = []

    class _Record(TorchDispatchMode):
        def __torch_dispatch__(self, func: Any, types: Any, args: tuple = (), kwargs: dict | None = None) -> Any:
            seen.append(str(func))
            return func(*args, **(kwargs or {}))

    mode = FakeTensorMode(allow_non_fake_inputs=True) if fake else contextlib.nullcontext()
    with mode:
        inputs = mod.get_inputs()
        with torch.no_grad(), _Record():
            model(*inputs)
    return seen
