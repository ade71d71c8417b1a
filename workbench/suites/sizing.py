"""CPU auto-sizing of a spec: scale its module-level integer constants down until every tensor is small.

Sizes are measured without allocating anything: `get_inputs()`, the model's construction and its
forward run under torch's `FakeTensorMode`, and a dispatch mode records the largest tensor any op
produces (inputs, parameters, intermediates, outputs). The largest size-bearing constant is halved
until every tensor holds at most `max_elems` elements; a halving that breaks the spec (a channel
count no longer divisible by its groups, a kernel larger than its input) is undone and that constant
frozen. Pure: the same spec and bound give the same overrides.

Constants computed from others at import (`input_shape = (num_classes,)`) are not halved on their own:
they are recomputed from their module-level expression whenever a constant they read changes, so the
overrides stay consistent (the targets of `randint(0, num_classes, ...)` stay below the class axis).
"""
from __future__ import annotations

import ast
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

_MAX_STEPS = 400  # halvings; 2**40 elements down to 1 takes 40 per constant


@dataclass
class Footprint:
    """What one configuration of a spec's constants allocates (measured under FakeTensorMode)."""

    max_elems: int                     # largest tensor anywhere: inputs, parameters, intermediates
    total_elems: int                   # all of them added up (the tie-breaker when halving one dim
                                       # leaves another tensor the largest)
    input_shapes: list[list[int]]      # shapes of the tensors get_inputs() returns
    forward_checked: bool              # the forward ran under fake tensors (else: inputs and parameters only)


@dataclass
class SizingResult:
    overrides: dict[str, Any]          # ints, and tuples of ints for shape constants
    footprint: Footprint
    original: Footprint
    reached: bool                      # every tensor is within the bound
    frozen: list[str] = field(default_factory=list)  # constants whose halving broke the spec

    def to_dict(self) -> dict[str, Any]:
        return {"overrides": dict(self.overrides), "max_elems_used": self.footprint.max_elems,
                "input_shapes": self.footprint.input_shapes, "forward_checked": self.footprint.forward_checked,
                "original_max_elems": self.original.max_elems, "original_input_shapes": self.original.input_shapes,
                "reached": self.reached, "frozen": list(self.frozen)}


def size_constants(module: Any) -> dict[str, Any]:
    """Module-level constants that may set a size: ints >= 2 (bools and 0/1 flags excluded), and tuples of
    ints named like a shape (KernelBench's `input_shape = (32768,)`)."""
    out: dict[str, Any] = {}
    for k, v in vars(module).items():
        if k.startswith("_"):
            continue
        if type(v) is int and v >= 2:
            out[k] = v
        elif ("shape" in k.lower() and isinstance(v, tuple) and v and all(type(x) is int for x in v)
              and max(v) >= 2):
            out[k] = v  # only shape tuples: a `kernel_size = (3, 5)` or `stride = (1, 2)` keeps its meaning
    return out


def derivations(module: Any, names: set[str]) -> list[tuple[str, ast.expr, set[str]]]:
    """The module's top-level assignments `name = expr` (in source order) of size constants in `names`
    whose expression reads another of them: (name, expr, the constants it reads)."""
    import inspect

    try:
        tree = ast.parse(inspect.getsource(module))
    except (OSError, TypeError, SyntaxError):
        return []
    out = []
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            name = node.targets[0].id
            reads = {n.id for n in ast.walk(node.value) if isinstance(n, ast.Name)} & (names - {name})
            if name in names and reads:
                out.append((name, node.value, reads))
    return out


def with_derived(module: Any, base: dict[str, Any], trial: dict[str, Any],
                 derived: list[tuple[str, ast.expr, set[str]]]) -> dict[str, Any]:
    """`trial` plus the derived constants recomputed from it (those whose value changes)."""
    env = {**vars(module), **base, **trial}
    out = dict(trial)
    changed = set(trial)
    for name, expr, reads in derived:
        if not reads & changed:
            continue
        try:
            value = eval(compile(ast.Expression(expr), "<sizing>", "eval"), env)  # noqa: S307 - the spec's own code
        except Exception as exc:  # an expression that needs more than constants: leave it as imported
            log.debug("%s is not recomputed: %s", name, exc)
            continue
        if value != base.get(name):
            env[name] = out[name] = value
            changed.add(name)
    return out


def _magnitude(v: Any) -> int:
    return max(v) if isinstance(v, tuple) else v


def _halved(v: Any) -> Any:
    """An int halved; a tuple with its largest element halved (the first of equals)."""
    if not isinstance(v, tuple):
        return v // 2
    i = v.index(max(v))
    return v[:i] + (v[i] // 2,) + v[i + 1:]


def _numel(t: Any) -> int:
    n = 1
    for s in t.shape:
        n *= int(s)
    return n


def measure(spec: Any, overrides: dict[str, Any]) -> Footprint:
    """The footprint of `spec` (a loaded `workbench.spec.Spec`) with `overrides` applied.

    Raises whatever the spec raises for that configuration (the caller treats it as invalid).
    """
    import torch
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.utils._python_dispatch import TorchDispatchMode
    from torch.utils._pytree import tree_leaves

    class _Largest(TorchDispatchMode):
        def __init__(self) -> None:
            super().__init__()
            self.max = 0
            self.total = 0

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # noqa: ANN001 - torch's protocol
            out = func(*args, **(kwargs or {}))
            for leaf in tree_leaves(out):
                if isinstance(leaf, torch.Tensor):
                    n = _numel(leaf)
                    self.max = max(self.max, n)
                    self.total += n
            return out

    spec.apply(overrides)
    mod = spec.module
    with FakeTensorMode(allow_non_fake_inputs=True), _Largest() as largest:
        torch.manual_seed(0)
        inputs = list(mod.get_inputs())
        init = list(mod.get_init_inputs())
        model = mod.Model(*init)
        tensors = [x for x in tree_leaves(inputs) if isinstance(x, torch.Tensor)]
        tensors += list(model.parameters()) + list(model.buffers())
        largest.max = max([largest.max, *(_numel(t) for t in tensors)])
        largest.total += sum(_numel(t) for t in tensors)
        shapes = [[int(s) for s in x.shape] for x in inputs if isinstance(x, torch.Tensor)]
        checked = True
        try:
            with torch.no_grad():
                model(*inputs)
        except Exception as exc:  # data-dependent ops (.item(), nonzero) cannot run on fake tensors
            log.debug("forward not measurable under fake tensors: %s", exc)
            checked = False
    return Footprint(max_elems=largest.max, total_elems=largest.total, input_shapes=shapes, forward_checked=checked)


def shrink(spec: Any, max_elems: int) -> SizingResult:
    """Halve the largest size-bearing constant of a loaded spec until its footprint is within `max_elems`."""
    base = size_constants(spec.module)
    derived = derivations(spec.module, set(base))
    follows = {name for name, _, _ in derived}  # recomputed from their sources, never halved themselves
    original = measure(spec, {})
    current: dict[str, int] = {}
    fp = original
    frozen: list[str] = []
    inert: set[str] = set()  # constants whose halving changed no size (axes, flags) at the current point
    for _ in range(_MAX_STEPS):
        if fp.max_elems <= max_elems:
            break
        values = {k: current.get(k, v) for k, v in base.items()}
        order = sorted((k for k in values if _magnitude(values[k]) >= 2 and k not in frozen and k not in inert
                        and k not in follows),
                       key=lambda k: (-_magnitude(values[k]), k))
        progressed = False
        for name in order:
            trial = with_derived(spec.module, base, {**current, name: _halved(values[name])}, derived)
            try:
                new = measure(spec, {**base, **trial})
                if fp.forward_checked and not new.forward_checked:
                    raise ValueError("the forward no longer runs at this size")
            except Exception as exc:
                log.debug("%s: halving %s to %s breaks the spec: %s", spec.path.name, name, trial[name], exc)
                frozen.append(name)
                continue
            if (new.max_elems, new.total_elems) < (fp.max_elems, fp.total_elems):
                current, fp, progressed = trial, new, True
                inert.clear()
                break
            inert.add(name)
        if not progressed:
            break
    spec.apply({**base, **current})
    return SizingResult(overrides=dict(sorted(current.items())), footprint=fp, original=original,
                        reached=fp.max_elems <= max_elems, frozen=sorted(set(frozen)))


def auto_size(spec_path: str | Path, max_elems: int) -> dict[str, Any]:
    """Overrides of `spec_path`'s module constants that bring every tensor under `max_elems` elements
    (ints; a tuple for a shape constant such as `input_shape`).

    An empty dict when the published sizes already fit. Raises `workbench.spec.SpecError` for a spec
    that does not load. Use `shrink` for the footprints before and after.
    """
    from workbench.spec import load_spec

    if max_elems < 1:
        raise ValueError(f"max_elems must be >= 1, got {max_elems}")
    return shrink(load_spec(spec_path, module_name="wb_sizing_spec"), max_elems).overrides
