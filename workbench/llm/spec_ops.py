"""The aten ops a spec's reference computes: the key the prompt's code samples are matched by.

A capture, no code generation: the lowering's capture (`workbench.lowering.capture`: `torch.export` of
the Model on fake tensors, decomposed to core ATen, addmm split as the lowering splits it) lists the
same ops `lower_spec(...).ops` lists, in a fraction of its time, and allocates no input (KernelBench's
gigabyte inputs cost nothing). A reference export cannot trace (data-dependent control flow, `.item()`)
falls back to recording the ops it dispatches while it runs once, on fake tensors, else at its first
CPU shape. Glue ops (allocation, views, copies: the harness's `GLUE_OPS`) are left out of the key: two
specs that both reshape are not the same problem.

Cached per spec file version: the key is the file's content hash and the overrides (plus torch's
version and the capture's own source), so an edited spec is captured again and a touched but unchanged
one is not; in memory, and on disk under `$WORKBENCH_CACHE/spec_ops/`, else `<repo>/.wbcache/spec_ops/`
(git-ignored), because a large model's capture takes a minute (DenseNet201: 72 s on the CPU) and a
prompt may key the kernels of a dozen earlier specs.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import threading
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

_cache: dict[tuple[str, str, str], tuple[str, ...]] = {}
_lock = threading.Lock()


def spec_ops(spec_path: str | Path, overrides: dict[str, Any] | None = None) -> tuple[str, ...]:
    """Sorted compute ops of the spec (`aten.mm.default`, ...); cached per file content and overrides."""
    p = Path(spec_path).resolve()
    digest = hashlib.sha256(p.read_bytes()).hexdigest()
    key = (str(p), digest, repr(sorted((overrides or {}).items())))
    with _lock:
        if key in _cache:
            return _cache[key]
    disk = _disk_path(digest, key[2])
    ops = _read(disk)
    if ops is None:
        ops = _from_export(p, overrides)
        if ops is None:
            ops = _from_dispatch(p, overrides)
        _write(disk, ops)
    with _lock:
        _cache[key] = ops
    return ops


def cache_dir() -> Path:
    base = os.environ.get("WORKBENCH_CACHE")
    return (Path(base) if base else Path(__file__).resolve().parents[2] / ".wbcache") / "spec_ops"


def _disk_path(digest: str, overrides: str) -> Path:
    """One file per spec content, overrides, torch version and capture code (a change to any of them
    may change the op names)."""
    import torch

    h = hashlib.sha256(f"{digest}\0{overrides}\0{torch.__version__}".encode())
    here = Path(__file__).resolve().parent.parent / "lowering"
    for name in ("capture.py", "graph.py"):
        try:
            h.update((here / name).read_bytes())
        except OSError:
            pass
    h.update(Path(__file__).read_bytes())
    return cache_dir() / f"{h.hexdigest()[:32]}.json"


def _read(path: Path) -> tuple[str, ...] | None:
    try:
        return tuple(json.loads(path.read_text(encoding="utf-8"))["ops"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _write(path: Path, ops: tuple[str, ...]) -> None:
    try:  # a cache: a read-only checkout just captures again next time
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps({"ops": list(ops)}), encoding="utf-8")
        os.replace(tmp, path)
    except OSError as exc:
        log.debug("spec ops not cached on disk (%s): %s", path, exc)


def compute_ops(names: list[str] | tuple[str, ...]) -> tuple[str, ...]:
    """Drop glue ops from a list of `aten.<name>.<overload>` names; sorted and unique."""
    from workbench.harness.opcheck import GLUE_OPS

    out = set()
    for name in names:
        packet = name.split(".")[1] if name.startswith("aten.") and name.count(".") >= 1 else name
        if packet not in GLUE_OPS and not name.startswith("prim."):
            out.add(name)
    return tuple(sorted(out))


def _from_export(p: Path, overrides: dict[str, Any] | None) -> tuple[str, ...] | None:
    """The ops of the lowering's capture graph, named as the lowering names them; None when the
    capture is not available or cannot trace this spec."""
    try:
        import torch

        from workbench.lowering.capture import CaptureError, capture, spec_module
        from workbench.lowering.graph import op_name, rewrite_addmm
    except ImportError as exc:
        log.info("the lowering's capture is unavailable (%s): recording dispatched ops", exc)
        return None
    try:
        cap = capture(spec_module(p, overrides))
    except CaptureError as exc:
        log.info("capture of %s failed (%s): recording dispatched ops", p.name, exc)
        return None
    except Exception as exc:  # noqa: BLE001 - a spec the capture chokes on: the fallback still tries
        log.info("capture of %s raised %s: %s; recording dispatched ops", p.name, type(exc).__name__, exc)
        return None
    rewrite_addmm(cap.graph)  # the lowering's own rewrite: addmm is mm + add there, so here too
    names = [op_name(n) for n in cap.graph.nodes
             if n.op == "call_function" and isinstance(n.target, torch._ops.OpOverload)]  # fmt: skip
    return compute_ops(names)


def _from_dispatch(p: Path, overrides: dict[str, Any] | None) -> tuple[str, ...]:
    """Fake inputs first (free at any size); a reference with data-dependent control flow (`.item()`,
    a mask's count) cannot run on them, so it runs for real at its first CPU shape instead."""
    from workbench.spec import load_spec

    spec = load_spec(p, overrides, module_name=f"wb_spec_ops_{abs(hash(str(p)))}")
    mod = spec.module
    model = mod.Model(*mod.get_init_inputs())  # real parameters: a Module cannot hold fake ones
    try:
        return compute_ops(_record(model, mod, fake=True))
    except Exception as exc:  # noqa: BLE001 - fake tensors cannot run it: real tensors at a small shape
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
