"""Record the aten ops a candidate's forward dispatches, count Triton launches, poison allocations, count
the tensor values a forward reads into Python.

In Triton's interpreter a kernel launch itself dispatches aten ops on its arguments (`new_empty`,
`set_`, `copy_`): recording pauses inside Triton launches (and inside the autotuner, whose
benchmarking uses torch ops), otherwise honest candidates would look like torch users.

Per-element Python compute (`float(x[i])`, `x[i].item()`, iterating a tensor, `tolist()`, `str(x)` parsed
back) dispatches only glue (`select`, `unbind`, `_local_scalar_dense`) or nothing at all (`tolist`, `numpy`
and the printer read the storage in C, `str` with every mode switched off), so the recorder also counts the
values each forward call reads into Python: one per `_local_scalar_dense` (`item`, `float`, `int`, `bool`,
an index, a format), a tensor's element count per whole-tensor conversion (`HOST_READS`, wrapped on
`torch.Tensor` before any candidate code exists). More than `MAX_VALUES_PER_CALL` in one call is the
violation `python_compute:<n>`: a forward may read a size or a count (the lowering's data-dependent ops
read one value each), not compute on its elements. The bound is a constant plus one value per output tensor
the forward returns (`VALUES_PER_OUTPUT`: an ATen spec of 528 `unique` calls returns at least 528 tensors and
sizes each by one count); the output count is the reference's, since a forward returning another number of
outputs is incorrect, so nothing the candidate or its inputs decide moves it.
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

# Values one forward call may read into Python (sizes, a count a data-dependent op needs; the lowering reads
# one per such op): a constant, so a forward computing on its elements in Python fails at any input size
# past it. `memo_by_elements` (tests/harness/hostile) reads 16 and passes: keying on values is not compute.
MAX_VALUES_PER_CALL = 32
# ... plus this many per output tensor of the call (each output may be sized by a count read on the host)
VALUES_PER_OUTPUT = 1
# The one aten op that hands a tensor's value to Python (`item`, `float`, `int`, `bool`, `__index__`).
SCALAR_OPS = frozenset({"_local_scalar_dense"})
# Whole-tensor conversions to Python or NumPy that dispatch no aten op per element (or none at all): each
# counts its tensor's elements. `__reduce_ex__` is pickling; `__array__` NumPy's protocol.
HOST_READS = ("tolist", "numpy", "__array__", "__repr__", "__str__", "__format__", "__reduce_ex__")


class _LaunchState:
    depth = 0          # > 0 while inside a Triton launch or the autotuner
    launches = 0       # Triton kernel launches (not compile-only warmups)
    names: set[str] = set()  # the Triton kernels launched (their compiled kernels carry these names)
    # The compiled kernels Triton's JIT handed back in this process (GPU only; a kernel warmed up and launched
    # later loads its CUfunction then): the graph audit knows a Triton node by that handle, never by its name
    # (`graph_audit.kernel_names`, `triton_functions`)
    compiled: dict[int, Any] = {}
    recorder: "OpRecorder | None" = None  # the recorder of the forward now running, if any
    converting = 0     # > 0 inside a whole-tensor conversion, which counts its elements once


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
                    ret = orig_fn(self, *args, **kwargs)
                finally:
                    STATE.depth -= 1
                if count or kwargs.get("warmup", False):
                    _note_compiled(ret)
                return ret
            run._wb_wrapped = True  # type: ignore[attr-defined]
            return run

        cls.run = make(orig, counts)  # type: ignore[method-assign]


def _note_compiled(ret: Any) -> None:
    """Keep the compiled kernel a JIT launch or warm-up returned (Triton 3: `run` returns the
    `CompiledKernel`; its `function` is the CUfunction its launch loaded); the interpreter returns none."""
    if ret is not None and hasattr(ret, "function") and len(STATE.compiled) < 65536:
        STATE.compiled.setdefault(id(ret), ret)


def triton_functions() -> set[int]:
    """The CUfunction handles of every kernel Triton's JIT compiled and loaded in this process."""
    out = set()
    for k in list(STATE.compiled.values()):
        fn = getattr(k, "function", None)
        if type(fn) is int and fn:
            out.add(fn)
    return out


def install_host_read_counters() -> None:
    """Wrap `torch.Tensor`'s whole-tensor conversions (`HOST_READS`) once per process, before any candidate
    code exists: inside a recorded forward, outside Triton's launch, each adds its tensor's element count to
    the call's values read into Python."""
    for name in HOST_READS:
        orig = getattr(torch.Tensor, name, None)
        if orig is None or getattr(orig, "_wb_wrapped", False):
            continue

        def make(orig_fn: Callable) -> Callable:
            def read(self: Any, *args: Any, **kwargs: Any) -> Any:
                rec = STATE.recorder
                if rec is None or STATE.depth or STATE.converting:
                    return orig_fn(self, *args, **kwargs)
                rec.read_values(int(self.numel()) if isinstance(self, torch.Tensor) else 1)
                STATE.converting += 1
                try:
                    return orig_fn(self, *args, **kwargs)
                finally:
                    STATE.converting -= 1
            read._wb_wrapped = True  # type: ignore[attr-defined]
            read.__name__ = getattr(orig_fn, "__name__", "read")
            return read

        setattr(torch.Tensor, name, make(orig))


def next_call() -> None:
    """A new forward call begins under the current recorder (a recorded round runs R of them)."""
    if STATE.recorder is not None:
        STATE.recorder.call_values = 0


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
        self.call_values = 0  # values read into Python in the forward call now running
        self.most_values = 0  # the most any one call read
        self._outer: OpRecorder | None = None

    def __enter__(self) -> "OpRecorder":
        self._outer, STATE.recorder = STATE.recorder, self
        return super().__enter__()

    def __exit__(self, *exc: Any) -> Any:
        STATE.recorder = self._outer
        return super().__exit__(*exc)

    def read_values(self, n: int) -> None:
        self.call_values += n
        self.most_values = max(self.most_values, self.call_values)

    def __torch_dispatch__(self, func: Any, types: Any, args: tuple = (), kwargs: dict | None = None) -> Any:
        out = func(*args, **(kwargs or {}))
        if STATE.depth == 0:
            name = func.overloadpacket.__name__
            self.ops[name] += 1
            if name in SCALAR_OPS and not STATE.converting:
                self.read_values(1)
            if self.poison is not None and name in ALLOC_OPS and isinstance(out, torch.Tensor) and out.numel():
                out.fill_(poison_value(out.dtype, self.poison))
        return out

    def forbidden(self, allowed: frozenset[str] | set[str] = frozenset()) -> list[str]:
        return sorted(op for op in self.ops if op not in GLUE_OPS and op not in allowed)

    def python_compute(self, outputs: int = 0) -> list[str]:
        """`python_compute:<n>` when one call read more than `MAX_VALUES_PER_CALL` values into Python, plus
        `VALUES_PER_OUTPUT` per output tensor of a call (`outputs`: the judged trial's count)."""
        bound = MAX_VALUES_PER_CALL + VALUES_PER_OUTPUT * max(0, int(outputs))
        return [f"python_compute:{self.most_values}"] if self.most_values > bound else []
