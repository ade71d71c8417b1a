"""Pre-harness checks of a proposed candidate: AST only, milliseconds, nothing of the candidate runs.

A proposal that fails one becomes a recorded node with the diagnosis below, at no evaluation cost.
The checks, each with the prefix its diagnosis starts with:

- `precheck:syntax`: the module parses;
- the harness's own static allow-list (`workbench.harness.policy.check_source`): the same verdicts
  the harness would give, torch compute in `forward` included (`forbidden_torch_op:...`);
- `precheck:no_model_new`: a top-level `class ModelNew` exists;
- `precheck:signature`: its constructor and `forward` take as many positional arguments as `Model`'s
  (the rule of `workbench.spec.check_candidate_signature`, read from the text instead of the objects);
- `precheck:no_triton_launch`: a `@triton.jit` kernel is defined and launched (`kernel[grid](...)`);
- `precheck:identical_to_parent`: the proposal differs from its parent in more than comments and layout.
"""

from __future__ import annotations

import ast
import logging
from dataclasses import dataclass

log = logging.getLogger(__name__)

_KERNEL_DECORATORS = frozenset({"jit", "autotune", "heuristics"})


@dataclass(frozen=True)
class _Signature:
    positional: int  # positional parameters after self
    varargs: bool
    names: tuple[str, ...]


def precheck(
    source: str,
    *,
    spec_source: str | None = None,
    parent_source: str | None = None,
    allowed_imports: tuple[str, ...] = (),
) -> list[str]:
    """Diagnoses of everything wrong with `source` that is visible without running it; [] when clean."""
    try:
        tree = ast.parse(source)
    except SyntaxError as exc:
        return [f"precheck:syntax: line {exc.lineno}: {exc.msg}"]
    except (ValueError, RecursionError) as exc:
        return [f"precheck:syntax: {type(exc).__name__}: {exc}"]
    problems = list(_policy(source, allowed_imports))
    model_new = _top_class(tree, "ModelNew")
    if model_new is None:
        problems.append("precheck:no_model_new: the module defines no top-level class ModelNew")
    elif spec_source is not None:
        problem = _signature_problem(spec_source, tree, model_new)
        if problem:
            problems.append(f"precheck:signature: {problem}")
    launch = _launch_problem(tree)
    if launch:
        problems.append(f"precheck:no_triton_launch: {launch}")
    if parent_source is not None and same_program(source, parent_source):
        problems.append("precheck:identical_to_parent: the proposal differs from its parent only in comments or layout")
    return problems


def _policy(source: str, allowed_imports: tuple[str, ...]) -> list[str]:
    """The harness's static allow-list, so a proposal it would reject never reaches it."""
    try:
        from workbench.harness.policy import check_source
    except ImportError as exc:  # an older harness without the static policy: the runtime rules still apply
        log.debug("harness policy unavailable: %s", exc)
        return []
    # The policy's `no_triton_kernel` is said more precisely by this module's own launch check.
    return [v for v in check_source(source, allowed_imports) if not v.startswith("no_triton_kernel:")]


def same_program(a: str, b: str) -> bool:
    """True when two sources parse to the same AST once docstrings are ignored (comments and layout
    never reach the AST)."""
    try:
        return _normalized(a) == _normalized(b)
    except (SyntaxError, ValueError, RecursionError):
        return a.strip() == b.strip()


def _normalized(src: str) -> str:
    tree = ast.parse(src)
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(body, list) and body and isinstance(body[0], ast.Expr):
            if isinstance(body[0].value, ast.Constant) and isinstance(body[0].value.value, str):
                body.pop(0)
    return ast.dump(tree, include_attributes=False)


def _top_class(tree: ast.Module, name: str) -> ast.ClassDef | None:
    found = [n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == name]
    return found[-1] if found else None


def _method(cls: ast.ClassDef, name: str) -> ast.FunctionDef | None:
    found = [n for n in cls.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name == name]
    return found[-1] if found else None  # type: ignore[return-value]


def _signature(fn: ast.FunctionDef | None) -> _Signature:
    if fn is None:  # inherited from nn.Module: __init__(self), forward(self, *input)
        return _Signature(0, False, ())
    params = [*fn.args.posonlyargs, *fn.args.args][1:]
    return _Signature(len(params), fn.args.vararg is not None, tuple(p.arg for p in params))


def _signature_problem(spec_source: str, tree: ast.Module, model_new: ast.ClassDef) -> str | None:
    try:
        model = _top_class(ast.parse(spec_source), "Model")
    except SyntaxError:
        return None  # the spec is checked elsewhere, with its own message
    if model is None:
        return None
    bases = {b.id for b in model_new.bases if isinstance(b, ast.Name)}
    for meth in ("__init__", "forward"):
        mine = _method(model_new, meth)
        if mine is None and "Model" in bases:
            continue  # inherits Model's own method
        if mine is None and meth == "forward":
            return "ModelNew defines no forward"
        ref, new = _signature(_method(model, meth)), _signature(mine)
        if new.varargs or ref.positional == new.positional or (ref.varargs and new.positional >= ref.positional):
            continue
        return f"ModelNew.{meth} takes {list(new.names)}, Model.{meth} takes {list(ref.names)}"
    return None


def _is_kernel_decorator(dec: ast.expr) -> bool:
    target = dec.func if isinstance(dec, ast.Call) else dec
    if isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name):
        return target.value.id == "triton" and target.attr in _KERNEL_DECORATORS
    return isinstance(target, ast.Name) and target.id in ("jit", "autotune")


def _launch_problem(tree: ast.Module) -> str | None:
    kernels = {
        n.name
        for n in tree.body
        if isinstance(n, ast.FunctionDef) and any(_is_kernel_decorator(d) for d in n.decorator_list)
    }
    if not kernels:
        return "no top-level @triton.jit kernel is defined"
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Subscript):
            target = node.func.value
            name = target.id if isinstance(target, ast.Name) else getattr(target, "attr", None)
            if name in kernels:
                return None
    return f"the kernel(s) {', '.join(sorted(kernels))} are never launched (`kernel[grid](...)`)"
