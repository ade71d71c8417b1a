"""Load a kernel spec (KernelBench format) and its optional metadata.

A spec is a Python file with `Model(nn.Module)`, `get_inputs()`, `get_init_inputs()`. Optional
module-level metadata: `SHAPES`, `TOLERANCES`, `ALLOWED_TORCH_OPS`, `ALLOWED_IMPORTS`, `EXACT`, `ALLOW_TF32`
(docs/CONTRACTS.md). A plain KernelBench file loads unchanged.
"""
from __future__ import annotations

import ast
import hashlib
import importlib.util
import inspect
import sys
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any


class SpecError(ValueError):
    """The spec (or an override of it) is at fault: one clear line for the user."""


@dataclass
class Spec:
    path: Path
    module: ModuleType
    shapes: dict[str, dict[str, Any]] = field(default_factory=dict)
    tolerances: dict[str, tuple[float, float]] = field(default_factory=dict)
    allowed_ops: list[str] = field(default_factory=list)
    allowed_imports: list[str] = field(default_factory=list)  # trusted packages a candidate may import
    exact: bool = False
    allow_tf32: bool = False
    source: str = ""

    @property
    def name(self) -> str:
        return self.path.stem if self.path.stem != "spec" else self.path.parent.name

    @property
    def digest(self) -> str:
        return hashlib.sha256(self.source.encode()).hexdigest()[:16]

    def constants(self) -> dict[str, Any]:
        """Module-level constants that `--set` and `SHAPES` may override."""
        return {k: v for k, v in vars(self.module).items()
                if not k.startswith("_") and k.isupper() and isinstance(v, (int, float, str, bool, tuple))}

    def apply(self, overrides: dict[str, Any]) -> None:
        """Set module constants before inputs are built."""
        consts = vars(self.module)
        for name, value in overrides.items():
            if name not in consts or callable(consts[name]) or isinstance(consts[name], ModuleType):
                known = ", ".join(sorted(self.constants())) or "none"
                raise SpecError(f"--set {name}: the spec has no module-level constant {name!r} (constants: {known})")
            setattr(self.module, name, value)


def parse_value(text: str) -> Any:
    """`--set N=128` gives an int, `--set DTYPE=float16` a string."""
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return text


def parse_overrides(items: list[str] | None) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for item in items or []:
        if "=" not in item:
            raise SpecError(f"--set expects NAME=VALUE, got {item!r}")
        name, _, value = item.partition("=")
        if not name.strip().isidentifier():
            raise SpecError(f"--set expects NAME=VALUE with a Python identifier, got {item!r}")
        out[name.strip()] = parse_value(value.strip())
    return out


def load_spec(path: str | Path, overrides: dict[str, Any] | None = None, module_name: str = "wb_spec") -> Spec:
    """Import the spec file and check its KernelBench contract; raise SpecError on any fault."""
    p = Path(path)
    if not p.is_file():
        raise SpecError(f"spec file not found: {p}")
    source = p.read_text()
    try:
        compile(source, str(p), "exec")
    except SyntaxError as exc:
        raise SpecError(f"spec {p} has a syntax error at line {exc.lineno}: {exc.msg}") from None
    spec_obj = importlib.util.spec_from_file_location(module_name, p)
    assert spec_obj is not None and spec_obj.loader is not None
    module = importlib.util.module_from_spec(spec_obj)
    sys.modules[module_name] = module
    try:
        spec_obj.loader.exec_module(module)
    except Exception as exc:
        tail = traceback.format_exc(limit=-2).strip().splitlines()[-1]
        raise SpecError(f"spec {p} failed to import: {type(exc).__name__}: {exc} ({tail})") from None
    import torch.nn as nn

    model = getattr(module, "Model", None)
    if not (isinstance(model, type) and issubclass(model, nn.Module)):
        raise SpecError(f"spec {p} defines no `Model(nn.Module)` class")
    for fn in ("get_inputs", "get_init_inputs"):
        if not callable(getattr(module, fn, None)):
            raise SpecError(f"spec {p} defines no `{fn}()` function")
        params = inspect.signature(getattr(module, fn)).parameters.values()
        if any(p_.default is inspect.Parameter.empty and p_.kind in (p_.POSITIONAL_ONLY, p_.POSITIONAL_OR_KEYWORD)
               for p_ in params):
            raise SpecError(f"spec {p}: `{fn}()` must take no required arguments")
    shapes = getattr(module, "SHAPES", {}) or {}
    if not isinstance(shapes, dict) or not all(isinstance(v, dict) for v in shapes.values()):
        raise SpecError(f"spec {p}: SHAPES must be a dict of name -> {{CONSTANT: value}}")
    spec = Spec(path=p.resolve(), module=module, shapes=dict(shapes),
                tolerances=dict(getattr(module, "TOLERANCES", {}) or {}),
                allowed_ops=list(getattr(module, "ALLOWED_TORCH_OPS", []) or []),
                allowed_imports=list(getattr(module, "ALLOWED_IMPORTS", []) or []),
                exact=bool(getattr(module, "EXACT", False)), allow_tf32=bool(getattr(module, "ALLOW_TF32", False)),
                source=source)
    for name, shape in spec.shapes.items():
        missing = [k for k in shape if k not in vars(module)]
        if missing:
            raise SpecError(f"spec {p}: SHAPES[{name!r}] names unknown constants {missing}")
    spec.apply(overrides or {})
    return spec


def positional_signature(fn: Any) -> tuple[int, bool]:
    """(number of positional parameters after self, takes *args)."""
    params = list(inspect.signature(fn).parameters.values())[1:]
    var = any(p.kind == p.VAR_POSITIONAL for p in params)
    n = sum(p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) for p in params)
    return n, var


def check_candidate_signature(model: Any, model_new: Any, forward: Any = None) -> str | None:
    """None when ModelNew's constructor and forward take as many positional arguments as Model's."""
    for meth in ("__init__", "forward"):
        ref_fn = forward if (meth == "forward" and forward is not None) else getattr(model, meth)
        (na, va), (nb, vb) = positional_signature(ref_fn), positional_signature(getattr(model_new, meth))
        if vb or (na == nb) or (va and nb >= na):
            continue
        names = lambda f: [p for p in list(inspect.signature(f).parameters)[1:]]  # noqa: E731
        return (f"ModelNew.{meth} takes {names(getattr(model_new, meth))}, "
                f"Model.{meth} takes {names(ref_fn)}")
    return None
