"""Rebuild `Model.__init__` for `ModelNew`, so both initialize identically under one seed.

KernelBench's contract: under the same seed, `ModelNew(*init_inputs)` holds the same parameters
as `Model(*init_inputs)`. The only reliable way to get the same values is to create the same
parameter-owning modules with the same arguments in the same order, so the spec's `__init__` is
copied (its AST, `super(Model, self)` made `super()`), with what it needs from the spec file:
module-level constants, helper classes (their `forward` dropped: the candidate never calls the
reference's compute) and the methods `__init__` calls. Anything else it needs is reported as the
reason lowering is not possible.
"""
from __future__ import annotations

import ast
import builtins
from dataclasses import dataclass, field

_PROVIDED = {"torch", "nn", "math", "self", "super", "triton", "tl"}
_ALLOWED_IMPORTS = {"torch", "torch.nn", "math", "torch.nn.functional", "numbers", "typing", "collections",
                    "functools", "itertools", "operator"}


class InitError(ValueError):
    """`Model.__init__` cannot be reproduced standalone: the message says why."""


@dataclass
class InitCode:
    preamble: list[str] = field(default_factory=list)   # imports, constants, helper classes
    methods: list[str] = field(default_factory=list)    # ModelNew's __init__ and the methods it calls


def _free_names(fn: ast.AST) -> set[str]:
    assigned, loaded = set(), set()
    for node in ast.walk(fn):
        if isinstance(node, ast.Name):
            (loaded if isinstance(node.ctx, ast.Load) else assigned).add(node.id)
        elif isinstance(node, ast.arg):
            assigned.add(node.arg)
        elif isinstance(node, (ast.FunctionDef, ast.ClassDef, ast.Lambda)) and node is not fn:
            if hasattr(node, "name"):
                assigned.add(node.name)
        elif isinstance(node, ast.comprehension):
            for t in ast.walk(node.target):
                if isinstance(t, ast.Name):
                    assigned.add(t.id)
    return loaded - assigned - set(dir(builtins)) - _PROVIDED


def _self_calls(fn: ast.AST) -> set[str]:
    out = set()
    for node in ast.walk(fn):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "self":
            out.add(node.attr)
    return out


class _SuperFix(ast.NodeTransformer):
    def visit_Call(self, node: ast.Call) -> ast.AST:
        self.generic_visit(node)
        if isinstance(node.func, ast.Name) and node.func.id == "super" and node.args:
            node.args = []
        return node


def _methods_reached(cls: ast.ClassDef, start: str = "__init__") -> list[ast.FunctionDef]:
    defs = {f.name: f for f in cls.body if isinstance(f, ast.FunctionDef)}
    if start not in defs:
        return []
    seen, todo = [start], [start]
    while todo:
        for name in sorted(_self_calls(defs[todo.pop()])):
            if name in defs and name not in seen and name != "forward":
                seen.append(name)
                todo.append(name)
    return [defs[n] for n in defs if n in seen]  # source order


def _class_attrs(cls: ast.ClassDef) -> list[ast.stmt]:
    """A class body's own assignments (`expansion = 4`), which the copied class must keep."""
    return [s for s in cls.body if isinstance(s, (ast.Assign, ast.AnnAssign, ast.AugAssign))]


def _numpy_aliases(tree: ast.Module) -> set[str]:
    out = set()
    for stmt in tree.body:
        if isinstance(stmt, ast.Import):
            out |= {a.asname or a.name for a in stmt.names if a.name == "numpy"}
    return out


class _FoldNumpy(ast.NodeTransformer):
    """`np.log2(8)`, `np.pi`, `np.sqrt(2.0)`: numpy scalars of literals become their value, computed here.

    A candidate may not import numpy (SwinTransformerV2's `np.log2(8)` in WindowAttention.__init__); any
    other numpy use stays and is reported as the module a candidate may not import."""

    def __init__(self, aliases: set[str]) -> None:
        self.aliases = aliases

    def _np_attr(self, node: ast.AST) -> str | None:
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in self.aliases:
            return node.attr
        return None

    def visit_Call(self, node: ast.Call) -> ast.AST:
        self.generic_visit(node)
        name = self._np_attr(node.func)
        if name is None or node.keywords:
            return node
        try:
            args = [ast.literal_eval(a) for a in node.args]
        except ValueError:
            return node
        return self._const(getattr(__import__("numpy"), name, None), args) or node

    def visit_Attribute(self, node: ast.Attribute) -> ast.AST:
        self.generic_visit(node)
        name = self._np_attr(node)
        if name in ("pi", "e", "inf", "euler_gamma"):
            return ast.copy_location(ast.Constant(float(getattr(__import__("numpy"), name))), node)
        return node

    @staticmethod
    def _const(fn, args: list) -> ast.AST | None:  # noqa: ANN001
        import numpy as np

        if fn is None or not callable(fn) or not all(isinstance(a, (int, float)) for a in args):
            return None
        v = fn(*args)
        if not np.isscalar(v) or isinstance(v, (str, bytes)):
            return None
        v = v.item() if hasattr(v, "item") else v
        if isinstance(v, float) and (v != v or v in (float("inf"), float("-inf"))):
            return None
        return ast.Constant(v)


def build_init(source: str, model_name: str = "Model") -> InitCode:
    tree = ast.parse(source)
    aliases = _numpy_aliases(tree)
    if aliases:
        tree = ast.fix_missing_locations(_FoldNumpy(aliases).visit(tree))
    top: dict[str, ast.stmt] = {}
    for stmt in tree.body:
        if isinstance(stmt, (ast.ClassDef, ast.FunctionDef)):
            top[stmt.name] = stmt
        elif isinstance(stmt, ast.Assign):
            for t in stmt.targets:
                for n in ast.walk(t):
                    if isinstance(n, ast.Name):
                        top[n.id] = stmt
        elif isinstance(stmt, (ast.Import, ast.ImportFrom)):
            for a in stmt.names:
                top[(a.asname or a.name).split(".")[0]] = stmt
    model = top.get(model_name)
    if not isinstance(model, ast.ClassDef):
        raise InitError(f"init: no class {model_name} in the spec source")
    methods = _methods_reached(model)  # empty: Model inherits nn.Module.__init__, and so does ModelNew
    model_attrs = _class_attrs(model)
    if any(not (isinstance(b, ast.Attribute) and b.attr == "Module" or isinstance(b, ast.Name) and b.id == "Module")
           for b in model.bases):
        raise InitError(f"init: {model_name} derives from {ast.unparse(model.bases[0])}, not nn.Module")
    needed: list[ast.stmt] = []
    pending = set().union(*(_free_names(m) for m in model_attrs + methods)) if methods or model_attrs else set()
    done: set[str] = set()
    while pending:
        name = pending.pop()
        if name in done:
            continue
        done.add(name)
        stmt = top.get(name)
        if stmt is None:
            raise InitError(f"init: Model.__init__ uses {name!r}, which the spec file does not define")
        if stmt in needed:
            continue
        if isinstance(stmt, (ast.Import, ast.ImportFrom)):
            mod = stmt.module if isinstance(stmt, ast.ImportFrom) else stmt.names[0].name
            if (mod or "").split(".")[0] not in {m.split(".")[0] for m in _ALLOWED_IMPORTS}:
                raise InitError(f"init: Model.__init__ needs module {mod!r}, which a candidate may not import")
            needed.append(stmt)
            continue
        if isinstance(stmt, ast.ClassDef):
            if stmt.name == model_name:
                continue
            # class-level statements (ResNet's `Bottleneck.expansion = 4`) stay: __init__ may read them
            attrs = _class_attrs(stmt)
            kept = _methods_reached(stmt)
            stripped = ast.ClassDef(name=stmt.name, bases=stmt.bases, keywords=stmt.keywords,
                                    body=attrs + kept or [ast.Pass()], decorator_list=stmt.decorator_list,
                                    type_params=[])
            stripped = _SuperFix().visit(stripped)
            needed.append(stripped)
            for m in attrs + kept:
                pending |= _free_names(m)
            for b in stmt.bases:
                pending |= _free_names(ast.Expression(b))
            continue
        needed.append(stmt)
        pending |= _free_names(stmt)
    # keep the spec file's order (a constant defined before the class that uses it)
    order = {id(s): i for i, s in enumerate(tree.body)}
    needed.sort(key=lambda s: order.get(id(s), order.get(id(top.get(getattr(s, "name", ""), s)), 0)))
    code = InitCode()
    for stmt in needed:
        code.preamble.append(ast.unparse(ast.fix_missing_locations(stmt)))
    for a in model_attrs:
        code.methods.append(ast.unparse(ast.fix_missing_locations(a)))
    for m in methods:
        m = _SuperFix().visit(m)
        code.methods.append(ast.unparse(ast.fix_missing_locations(m)))
    return code
