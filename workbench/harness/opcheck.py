"""Record the aten ops a candidate's forward dispatches, count Triton launches, poison allocations.

In Triton's interpreter a kernel launch itself dispatches aten ops on its arguments (`new_empty`,
`set_`, `copy_`): recording pauses inside Triton launches (and inside the autotuner, whose
benchmarking uses torch ops), otherwise honest candidates would look like torch users.
"""
from __future__ import annotations

from collections import Counter
from typing import Any, Callable

import torch
from torch.utils._python_dispatch import TorchDispatchMode

# Glue a candidate may dispatch without the spec's permission: allocation, views, reshapes,
# layout copies and dtype casts. Everything else (mm, add, sum, searchsorted, ...) is compute.
GLUE_OPS = frozenset("""
empty empty_like empty_strided empty_permuted new_empty new_empty_strided zeros zeros_like ones ones_like
full full_like new_full new_zeros new_ones fill_ zero_ arange
_to_copy to clone copy_ _copy_from _copy_from_and_resize contiguous lift_fresh lift_fresh_copy detach detach_
alias view _unsafe_view reshape _reshape_alias as_strided as_strided_ expand expand_as view_as permute transpose
transpose_ t t_ squeeze squeeze_ unsqueeze unsqueeze_ select slice split split_with_sizes chunk unbind narrow
flatten unflatten movedim unfold cat stack constant_pad_nd resize_ set_ _local_scalar_dense is_nonzero
sym_size sym_stride sym_numel sym_storage_offset stride size dim numel is_same_size record_stream
_has_compatible_shallow_copy_type _pin_memory view_as_real view_as_complex
""".split())

ALLOC_OPS = frozenset("empty empty_like empty_strided empty_permuted new_empty new_empty_strided".split())


class _LaunchState:
    depth = 0          # > 0 while inside a Triton launch or the autotuner
    launches = 0       # Triton kernel launches (not compile-only warmups)
    names: set[str] = set()  # the Triton kernels launched (their compiled kernels carry these names)


STATE = _LaunchState()


def install_triton_wrappers() -> None:
    """Wrap Triton's launch entry points (JIT, interpreter, autotuner, heuristics) once per process."""
    import triton.runtime.autotuner as autotuner
    import triton.runtime.jit as jit

    targets: list[tuple[type, bool]] = [(jit.JITFunction, True), (autotuner.Autotuner, False),
                                        (autotuner.Heuristics, False)]
    try:
        import triton.runtime.interpreter as interp

        targets.append((interp.InterpretedFunction, True))
    except ImportError:  # pragma: no cover - the interpreter ships with every triton 3.x
        pass
    for cls, counts in targets:
        orig = cls.run
        if getattr(orig, "_wb_wrapped", False):
            continue

        def make(orig_fn: Callable, count: bool) -> Callable:
            def run(self: Any, *args: Any, **kwargs: Any) -> Any:
                if count and not kwargs.get("warmup", False):
                    STATE.launches += 1
                    STATE.names.add(str(getattr(getattr(self, "fn", self), "__name__", ""))[:200])
                STATE.depth += 1
                try:
                    return orig_fn(self, *args, **kwargs)
                finally:
                    STATE.depth -= 1
            run._wb_wrapped = True  # type: ignore[attr-defined]
            return run

        cls.run = make(orig, counts)  # type: ignore[method-assign]


def poison_value(dtype: torch.dtype, which: int) -> Any:
    """Two different poisons: an element the candidate forgot to write keeps one of them."""
    if dtype == torch.bool:
        return which == 0
    if dtype.is_floating_point:
        return float("nan") if which == 0 else 31337.0
    if dtype.is_complex:
        return complex(float("nan"), 0.0) if which == 0 else complex(31337.0, 0.0)
    info = torch.iinfo(dtype)
    return info.min + 3 if which == 0 else info.max - 5


class OpRecorder(TorchDispatchMode):
    """Counts aten ops by overload-packet name outside Triton launches; optionally poisons allocations."""

    def __init__(self, poison: int | None = None) -> None:
        super().__init__()
        self.ops: Counter[str] = Counter()
        self.poison = poison

    def __torch_dispatch__(self, func: Any, types: Any, args: tuple = (), kwargs: dict | None = None) -> Any:
        out = func(*args, **(kwargs or {}))
        if STATE.depth == 0:
            name = func.overloadpacket.__name__
            self.ops[name] += 1
            if self.poison is not None and name in ALLOC_OPS and isinstance(out, torch.Tensor) and out.numel():
                out.fill_(poison_value(out.dtype, self.poison))
        return out

    def forbidden(self, allowed: frozenset[str] | set[str] = frozenset()) -> list[str]:
        return sorted(op for op in self.ops if op not in GLUE_OPS and op not in allowed)
