"""The ATen suite: each in-scope OpInfo op (torch's `op_db`) becomes a spec, one per dtype.

The spec's forward calls the op on every sample OpInfo gives for that dtype and returns all the
outputs, so a candidate passes only when every sample passes. The samples are saved next to the spec
(`<spec>.pt`) and loaded by `get_inputs()` unchanged: their value domains matter (log, sqrt, acos,
indices), so they are not redrawn. Tolerances are the harness's per-dtype ones
(`workbench/tolerances.py`); integer and bool outputs are compared exactly.

In scope (declared here and in docs/suites.md): ops that compute a result from tensor inputs, called as
`torch.<name>`, or as the Tensor method `<name>` when OpInfo's method variant is exactly `Tensor.<name>`
(dunder operators `__radd__`..., the casts `float()`, `half()`..., `view`, `expand`...). Views (an output
sharing an input's storage: transpose, view, expand, select, split...) are in scope *as copies*: their spec
returns a contiguous copy of each output (`COPY = True`), so the candidate must write the view's elements
with a kernel, as the `*_copy` ops do. Out of scope, each with its reason in `classify`:
- factories: `is_factory_function`, or no sample with a tensor input;
- random or nondeterministic ops: `has_nondeterministic_output`, or two calls under different seeds
  that disagree (dropout, bernoulli, rand_like, multinomial...);
- ops callable neither as `torch.<name>` nor as `Tensor.<name>` (properties such as `T`, lambdas wrapping an
  op such as polygamma's `n` variants), and in-place methods (`zero_`, `resize_`: they mutate the input);
- complex or sparse outputs, sparse inputs;
- ops whose samples raise, return no tensor, or hold arguments a spec file cannot spell.
"""
from __future__ import annotations

import logging
import math
import re
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

from workbench.suites.problems import Problem, SuiteError

log = logging.getLogger(__name__)


class _Unspellable(ValueError):
    """A sample argument a spec file cannot write down."""


@dataclass
class OpCase:
    """One (op, dtype) of the suite: its samples, encoded, and their tensors."""

    label: str                   # OpInfo name, plus ".variant" when the op has a variant test name
    name: str                    # the torch.* path of the callable, e.g. "nn.functional.relu"
    dtype: str
    calls: list[tuple[Any, Any]] = field(default_factory=list)   # (args, kwargs), tensors as {"__t__": i}
    tensors: list[Any] = field(default_factory=list)
    dropped: int = 0             # samples whose arguments cannot be spelled in a spec
    method: bool = False         # called as the Tensor method `name` on the first argument, not torch.<name>
    copy: bool = False           # a view op: the spec returns a contiguous copy of each output
    storages: set[int] = field(default_factory=set)  # storages of earlier samples' tensors (`_own_tensors`)


def load_op_db() -> list[Any]:
    try:
        from torch.testing._internal.common_methods_invocations import op_db
    except ImportError as exc:  # torch's test helpers need `expecttest` (the dev extra)
        raise SuiteError(f"the ATen suite needs torch's OpInfo database: {exc} (pip install expecttest)") from None
    return list(op_db)


def label_of(op: Any) -> str:
    return op.name + (f".{op.variant_test_name}" if op.variant_test_name else "")


def resolve(name: str) -> Any:
    """`torch.<name>` (dotted), or None."""
    import torch

    obj: Any = torch
    for part in name.split("."):
        obj = getattr(obj, part, None)
        if obj is None:
            return None
    return obj


def _encode(obj: Any, tensors: list[Any]) -> Any:
    import torch

    if isinstance(obj, torch.Tensor):
        tensors.append(obj.detach().clone() if obj.requires_grad else obj)
        return {"__t__": len(tensors) - 1}
    if isinstance(obj, torch.dtype):
        return {"__dtype__": str(obj).removeprefix("torch.")}
    if isinstance(obj, torch.memory_format):
        return {"__attr__": str(obj).removeprefix("torch.")}
    if isinstance(obj, bool) or obj is None or isinstance(obj, (int, str)):
        return obj
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else {"__float__": repr(obj)}
    if isinstance(obj, torch.Size):
        return tuple(int(s) for s in obj)
    if isinstance(obj, (list, tuple)):
        items = [_encode(o, tensors) for o in obj]
        return items if isinstance(obj, list) else tuple(items)
    if isinstance(obj, dict) and all(isinstance(k, str) for k in obj):
        return {k: _encode(v, tensors) for k, v in obj.items()}
    raise _Unspellable(type(obj).__name__)


def _tensor_leaves(obj: Any) -> list[Any]:
    import torch
    from torch.utils._pytree import tree_leaves

    return [x for x in tree_leaves(obj) if isinstance(x, torch.Tensor)]


def _storages(obj: Any) -> set[int]:
    out = set()
    for t in _tensor_leaves(obj):
        try:
            if t.numel():
                out.add(t.untyped_storage().data_ptr())
        except RuntimeError:  # tensors without storage (sparse, nested) are not views of ours
            pass
    return out


def _same(a: Any, b: Any) -> bool:
    import torch

    ta, tb = _tensor_leaves(a), _tensor_leaves(b)
    return len(ta) == len(tb) and all(x.shape == y.shape and torch.equal(x, y) if not x.is_floating_point() else
                                      x.shape == y.shape and torch.allclose(x, y, equal_nan=True)
                                      for x, y in zip(ta, tb))


def classify(op: Any, dtype_name: str, max_samples: int | None = None) -> tuple[OpCase | None, str]:
    """(the op's case, "") when in scope for `dtype_name`; (None, reason) when not."""
    import torch

    dtype = getattr(torch, dtype_name)
    if getattr(op, "is_factory_function", False) or op.name.endswith("_like") or op.name.startswith("new_"):
        return None, "factory"  # zeros_like, new_full...: a tensor argument, but only for its shape or dtype
    if getattr(op, "has_nondeterministic_output", False):
        return None, "nondeterministic"
    if not op.supports_dtype(dtype, "cpu"):
        return None, f"no {dtype_name}"
    fn = resolve(op.name)
    method = False
    if fn is None or fn is not op.op:
        if op.name.endswith("_") and not op.name.endswith("__"):
            return None, "in-place method (mutates its input)"
        fn, method = _method_of(op), True
        if fn is None:
            return None, "not callable as torch.<name> or Tensor.<name>"
    try:
        samples = list(op.sample_inputs("cpu", dtype, requires_grad=False))
    except Exception as exc:
        return None, f"sample generation raised {type(exc).__name__}"
    if max_samples:
        samples = samples[:max_samples]
    case = OpCase(label=label_of(op), name=op.name, dtype=dtype_name, method=method)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # deprecation notices of the ops themselves, once per sample
        for sample in samples:
            why = _check_sample(case, fn, sample)
            if why:
                return None, why
    if not case.calls:
        return None, "factory (no sample with a tensor input)" if not case.dropped else "samples not spellable"
    return case, ""


def _method_of(op: Any) -> Any:
    """`Tensor.<name>` when it is OpInfo's method variant of `op` (so a spec can call it by name), else None."""
    import torch

    mv = getattr(op, "method_variant", None)
    attr = getattr(torch.Tensor, op.name, None) if op.name.isidentifier() else None
    return mv if mv is not None and mv is attr and callable(mv) else None


def _check_sample(case: OpCase, fn: Any, sample: Any) -> str:
    """Add one sample to `case`; a reason when the sample puts the op out of scope ("" otherwise)."""
    import torch

    call = (sample.input, *sample.args)
    if not _tensor_leaves(call) and not _tensor_leaves(sample.kwargs):
        return ""
    if any(t.layout != torch.strided for t in _tensor_leaves((call, sample.kwargs))):
        return "sparse input"
    try:
        torch.manual_seed(0)
        out = fn(*call, **sample.kwargs)
        torch.manual_seed(1)
        again = fn(*call, **sample.kwargs)
    except Exception:
        return "raises on its samples"
    outs = _tensor_leaves(out)
    if not outs:
        return "returns no tensor"
    if any(t.layout != torch.strided for t in outs):
        return "sparse output"
    if any(t.is_complex() for t in outs):
        return "complex output"
    if _storages(out) & _storages((call, sample.kwargs)):
        case.copy = True  # a view: compared as a contiguous copy (every sample of the op, for one rule)
    if not _same(out, again):
        return "random (two seeds disagree)"
    tensors: list[Any] = []
    try:
        enc = (_encode(list(call), tensors), _encode(dict(sample.kwargs), tensors))
    except _Unspellable:
        case.dropped += 1
        return ""
    case.calls.append(_shift(enc, len(case.tensors)))
    case.tensors.extend(_own_tensors(case, tensors))
    return ""


def _own_tensors(case: OpCase, tensors: list[Any]) -> list[Any]:
    """A sample's tensors, copied where an earlier sample holds the same storage.

    OpInfo reuses tensor objects across samples (batch_norm's running statistics): saved together they alias, an
    op that mutates one (training batch_norm) changes what a later sample reads, and torch.export refuses to
    trace a mutated input that aliases another ("expected compiled_fn to be GraphModule"). Each sample then gets
    its own tensors, as OpInfo's tests run each sample alone; aliasing within one sample is kept."""
    own = {id(t): t for t in tensors if _storages(t) & case.storages}
    copies = {k: t.clone() for k, t in own.items()}
    out = [copies.get(id(t), t) for t in tensors]
    case.storages |= _storages(out)
    return out


def _shift(obj: Any, base: int) -> Any:
    if isinstance(obj, dict):
        if set(obj) == {"__t__"}:
            return {"__t__": obj["__t__"] + base}
        return {k: _shift(v, base) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_shift(o, base) for o in obj]
    if isinstance(obj, tuple):
        return tuple(_shift(o, base) for o in obj)
    return obj


SPEC_TEMPLATE = '''"""ATen suite spec (generated by workbench.suites.aten): OpInfo `{label}`, {dtype},
{n} samples{dropped}.

The forward calls {call} on every sample and returns every output{copied}: all of them must match.
The samples are OpInfo's own, loaded unchanged from the .pt file beside this one (read when the spec is
imported: the harness's confined candidate process makes the same inputs where that file is out of sight).
"""
import io
from pathlib import Path

import torch
import torch.nn as nn

OP = {name!r}
METHOD = {method!r}  # True: OP is the Tensor method called on the first argument
COPY = {copy!r}  # True: OP returns views; each output is compared as a contiguous copy
CALLS = {calls!r}
_DATA = Path(__file__).with_suffix(".pt").read_bytes()


def _op():
    fn = torch
    for part in OP.split("."):
        fn = getattr(fn, part)
    return fn


def _build(obj, tensors):
    if isinstance(obj, dict):
        if "__t__" in obj:
            return tensors[obj["__t__"]]
        if "__dtype__" in obj:
            return getattr(torch, obj["__dtype__"])
        if "__attr__" in obj:
            return getattr(torch, obj["__attr__"])
        if "__float__" in obj:
            return float(obj["__float__"])
        return {{k: _build(v, tensors) for k, v in obj.items()}}
    if isinstance(obj, list):
        return [_build(o, tensors) for o in obj]
    if isinstance(obj, tuple):
        return tuple(_build(o, tensors) for o in obj)
    return obj


def _copies(obj):
    if isinstance(obj, torch.Tensor):
        return obj.clone(memory_format=torch.contiguous_format)
    if isinstance(obj, (list, tuple)):
        items = [_copies(o) for o in obj]
        return items if isinstance(obj, list) else tuple(items)
    return obj


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, *tensors):
        outs = []
        for args, kwargs in CALLS:
            a, k = _build(args, tensors), _build(kwargs, tensors)
            out = getattr(a[0], OP)(*a[1:], **k) if METHOD else _op()(*a, **k)
            outs.append(_copies(out) if COPY else out)
        return tuple(outs)


def get_inputs():
    return list(torch.load(io.BytesIO(_DATA)))


def get_init_inputs():
    return []
'''


def spec_stem(label: str, dtype: str) -> str:
    return re.sub(r"[^A-Za-z0-9_]+", "_", label) + f"__{dtype}"


def write_spec(case: OpCase, folder: Path) -> Path:
    import torch

    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{spec_stem(case.label, case.dtype)}.py"
    torch.save(list(case.tensors), path.with_suffix(".pt"))
    call = f"Tensor.{case.name} (a method of the first argument)" if case.method else f"torch.{case.name}"
    path.write_text(SPEC_TEMPLATE.format(label=case.label, dtype=case.dtype, n=len(case.calls), name=case.name,
                                         calls=case.calls, method=case.method, copy=case.copy, call=call,
                                         copied=" (a contiguous copy of each: the op returns views)" if case.copy
                                         else "",
                                         dropped=f" ({case.dropped} dropped: arguments a file cannot spell)"
                                         if case.dropped else ""), encoding="utf-8")
    return path


def scope(dtypes: Iterable[str], ops: list[str] | None = None,
          max_samples: int | None = None) -> tuple[list[OpCase], dict[str, str]]:
    """The in-scope cases for `dtypes` (all of op_db, or the OpInfo names/labels in `ops`) and the
    reasons the others are out."""
    import torch

    db = load_op_db()
    if ops:
        known = {label_of(o) for o in db} | {o.name for o in db}
        unknown = [o for o in ops if o not in known]
        if unknown:
            raise SuiteError(f"unknown OpInfo op(s) {unknown} (names as in torch's op_db, e.g. abs, "
                             f"nn.functional.relu, max.reduction_with_dim)")
        db = [o for o in db if o.name in ops or label_of(o) in ops]
    cases: list[OpCase] = []
    out: dict[str, str] = {}
    for dtype in dtypes:
        if not isinstance(getattr(torch, dtype, None), torch.dtype):
            raise SuiteError(f"unknown dtype {dtype!r} (e.g. float32, float16, bfloat16, int64, bool)")
        for op in db:
            case, why = classify(op, dtype, max_samples)
            if case is None:
                out[f"{label_of(op)}/{dtype}"] = why
            else:
                cases.append(case)
    return cases, out


def write_specs(folder: Path, ops: list[str] | None, dtypes: list[str],
                max_samples: int | None = None) -> list[Problem]:
    """Generate the suite's specs into `folder` and return its problems (level = the dtype)."""
    import json

    from workbench.suites.aten_families import family_of_op

    cases, excluded = scope(dtypes, ops, max_samples)
    labels = {c.label for c in cases}
    families = {label_of(o): family_of_op(o) for o in load_op_db() if label_of(o) in labels}
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "scope.json").write_text(json.dumps({"in_scope": [f"{c.label}/{c.dtype}" for c in cases],
                                                   "dropped_samples": {f"{c.label}/{c.dtype}": c.dropped
                                                                       for c in cases if c.dropped},
                                                   "as_methods": [f"{c.label}/{c.dtype}" for c in cases if c.method],
                                                   "views_as_copies": [f"{c.label}/{c.dtype}" for c in cases
                                                                       if c.copy],
                                                   "families": families,  # the report's speed per family
                                                   "excluded": excluded}, indent=1), encoding="utf-8")
    if not cases:
        raise SuiteError(f"no in-scope ATen op for {ops or 'op_db'} in {dtypes}: "
                         + "; ".join(f"{k}: {v}" for k, v in list(excluded.items())[:8]))
    problems = []
    for c in cases:
        path = write_spec(c, folder)
        problems.append(Problem(problem_id=f"aten/{c.label}/{c.dtype}", level=c.dtype, name=path.stem,
                                spec_path=str(path.resolve())))
    log.info("ATen suite: %d cases in scope, %d excluded", len(cases), len(excluded))
    return problems
