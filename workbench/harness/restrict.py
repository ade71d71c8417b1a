"""The run-time allow-list: the candidate's module compiled with guards on what its code touches (issue 32).

The static policy reads the text; this module makes the same rules hold while the code runs, on every path
the code takes, whoever calls it (the forward, a grid lambda Triton calls, a `heuristics` value, an autotune
hook, a finalizer). The candidate's source is parsed and rewritten before any of it exists, by the
harness, then compiled and run in a module whose builtins the harness chose:

- every attribute the candidate's code reads goes through `__wb_getattr__(obj, "name")`: no dunder but
  `__init__`, no private name but on the candidate's own objects, no frame/code/generator attribute, no
  Tensor route out of torch's dispatcher (`numpy`, `tolist`, `apply_`, `map_`, `storage`...), no torch name
  the static policy refuses (`from_numpy`, `manual_seed`, `Stream`...), no `str.format` with attribute
  fields; a module is reached only when it is one a candidate may import (so `torch.sys`, `torch.os` and the
  interpreter's `np` are not), and its own submodules only under their own names;
- every attribute it writes or deletes goes through `__wb_setbase__(obj, "name")`: only on its own objects
  (an instance or a class its code created), never a dunder (`time.perf_counter = f`, `torch.Tensor.x = f`
  are `monkeypatch`);
- `getattr`, `hasattr`, `setattr`, `delattr` are those guards; `eval`, `exec`, `compile`, `globals`,
  `locals`, `vars`, `breakpoint` refuse; its `import` statements become calls of a guarded importer that
  admits only the modules a candidate may import (and a spec's trusted packages) and reads what a
  `from m import x` takes through the read guard; it names no dunder but `__name__` and a few like it
  (so not `__import__`, `__builtins__`, `__build_class__`);
- `match` class patterns (attribute reads the interpreter does in C), generators and coroutines (a frame
  suspended inside a guard), and any name the guards use are refused when compiling;
- every function and lambda of its own, except a Triton kernel (whose text Triton compiles itself), runs
  with the op recorder on (`opcheck.STATE.depth` 0), even when Triton calls it from inside a launch, where
  the recorder otherwise pauses: torch compute in a hook is recorded like torch compute in the forward.

A refusal is recorded in the guard's violations (named as the static policy names it, ` [runtime]`
omitted: `forbidden_torch_op:numpy`, `monkeypatch:time.perf_counter`) and raised as `PermissionError`; a
candidate that catches it is still rejected. The guards hold no state the candidate can reach: they are
closures in the builtins mapping, and no attribute of a function (`__closure__`, `__globals__`) or frame is
readable. What this does not cover is said in docs/harness.md ("Where the rules live").
"""
from __future__ import annotations

import ast
import builtins
import functools
import sys
import types
from typing import Any, Callable, NoReturn

import torch

from workbench.harness import opcheck, policy

GETATTR, SETBASE, OWN, OWN_FN = "__wb_getattr__", "__wb_setbase__", "__wb_own__", "__wb_own_fn__"
IMPORT, IMPORT_FROM = "__wb_import__", "__wb_import_from__"
_RESERVED = "__wb"
# Dunder names the candidate's code may name (`if __name__ == "__main__"`); any other (`__import__`,
# `__builtins__`, `__build_class__`, `__loader__`) reaches the machinery the guards stand in.
_DUNDER_NAMES = frozenset({"__name__", "__all__", "__file__", "__doc__"})

# Modules a candidate's code may hold and read: what it may import, the torch and Triton submodules the
# static policy lets it reach by attribute, and two that neither compute nor reflect (their misuse, a
# patched clock or a forged report, is caught by name: `monkeypatch:time.perf_counter`, `forged_report`).
RUNTIME_MODULES = frozenset(policy._IMPORTABLE | set(policy._TRITON_EXTRA) | {"torch.cuda", "torch.nn.init",
                                                                               "time", "json"})
_TENSOR_WRITABLE = frozenset({"requires_grad", "data", "grad"})
_FRAME_ATTRS = policy._FRAME_ATTRS | {"tb_frame", "gi_frame", "cr_frame", "ag_frame", "f_code"}
_FRAME_DUNDERS = frozenset({"__globals__", "__closure__", "__code__", "__builtins__", "__traceback__"})
# The banned Tensor methods themselves, however reached (`torch.FloatTensor.numpy is torch.Tensor.numpy`).
_BANNED_METHODS = {id(getattr(torch.Tensor, n)): n for n in policy._TENSOR_METHODS_BANNED if hasattr(torch.Tensor, n)}
_REFUSED_BUILTINS = ("eval", "exec", "compile", "globals", "locals", "vars", "breakpoint")


class Refused(Exception):
    """The source cannot be compiled under the guards: `rule` and `what` name why."""

    def __init__(self, rule: str, what: str) -> None:
        super().__init__(f"{rule}:{what}")
        self.rule, self.what = rule, what


# -- compiling -------------------------------------------------------------------------------------------
def _dotted(node: ast.AST) -> str:
    if isinstance(node, ast.Call):
        node = node.func
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
    return ".".join(reversed(parts))


def _is_kernel(node: ast.FunctionDef) -> bool:
    """A Triton kernel: Triton compiles its text itself (on the GPU to PTX, in the interpreter from source)."""
    return any(_dotted(d).split(".")[-1] == "jit" for d in node.decorator_list)


def _call(name: str, *args: ast.expr) -> ast.Call:
    return ast.Call(func=ast.Name(id=name, ctx=ast.Load()), args=list(args), keywords=[])


class _Rewrite(ast.NodeTransformer):
    """Attribute reads and writes through the guards; own functions run recorded. Under `from __future__
    import annotations` an annotation is a string Python never evaluates (Triton reads `"tl.constexpr"` from
    it): left as written; otherwise it is code, evaluated when the function is defined, and guarded."""

    def __init__(self, lazy_annotations: bool) -> None:
        self.lazy = lazy_annotations

    def _annotation(self, node: ast.expr | None) -> ast.expr | None:
        return node if node is None or self.lazy else self.visit(node)

    def visit_Name(self, node: ast.Name) -> ast.AST:
        if node.id.startswith(_RESERVED):
            raise Refused("forbidden_introspection", node.id)
        if node.id.startswith("__") and node.id.endswith("__") and node.id not in _DUNDER_NAMES:
            raise Refused("frame_introspection", node.id)
        return node

    # Imports become calls of the guarded importer (Python's `__import__` stays for torch's own lazy
    # imports, which C code makes from whatever frame is current).
    def visit_Import(self, node: ast.Import) -> list[ast.stmt]:
        out: list[ast.stmt] = []
        for a in node.names:
            bound = a.asname or a.name.split(".")[0]
            self.visit_alias(a)
            call = _call(IMPORT, ast.Constant(a.name), ast.Constant(a.asname is not None))
            out.append(ast.copy_location(ast.Assign(targets=[ast.Name(id=bound, ctx=ast.Store())], value=call), node))
        return out

    def visit_ImportFrom(self, node: ast.ImportFrom) -> ast.AST:
        if node.module == "__future__":
            return node  # a compiler directive
        names = [a.name for a in node.names]
        if "*" in names or node.level:
            raise Refused("import", f"from {'.' * node.level}{node.module or ''} import {', '.join(names)}")
        for a in node.names:
            self.visit_alias(a)
        targets = ast.Tuple(elts=[ast.Name(id=a.asname or a.name, ctx=ast.Store()) for a in node.names],
                            ctx=ast.Store())
        call = _call(IMPORT_FROM, ast.Constant(node.module), ast.Tuple(elts=[ast.Constant(n) for n in names],
                                                                        ctx=ast.Load()))
        return ast.copy_location(ast.Assign(targets=[targets], value=call), node)

    def visit_arg(self, node: ast.arg) -> ast.AST:
        if node.arg.startswith(_RESERVED):
            raise Refused("forbidden_introspection", node.arg)
        node.annotation = self._annotation(node.annotation)
        return node

    def visit_AnnAssign(self, node: ast.AnnAssign) -> ast.AST:
        node.target = self.visit(node.target)
        node.annotation = self._annotation(node.annotation)
        if node.value is not None:
            node.value = self.visit(node.value)
        return node

    def visit_Attribute(self, node: ast.Attribute) -> ast.AST:
        self.generic_visit(node)
        if node.attr.startswith(_RESERVED):
            raise Refused("forbidden_introspection", node.attr)
        if isinstance(node.ctx, ast.Load):
            return ast.copy_location(_call(GETATTR, node.value, ast.Constant(node.attr)), node)
        node.value = ast.copy_location(_call(SETBASE, node.value, ast.Constant(node.attr)), node.value)
        return node

    def visit_MatchClass(self, node: ast.MatchClass) -> ast.AST:
        raise Refused("forbidden_introspection", "match class pattern")

    def _refuse_suspension(self, node: ast.AST) -> NoReturn:
        raise Refused("dynamic_code", f"{type(node).__name__.lower()} (a generator or coroutine)")

    visit_Yield = visit_YieldFrom = visit_Await = visit_AsyncFunctionDef = _refuse_suspension
    visit_AsyncFor = visit_AsyncWith = _refuse_suspension

    def visit_Global(self, node: ast.Global) -> ast.AST:
        for n in node.names:
            if n.startswith(_RESERVED):
                raise Refused("forbidden_introspection", n)
        return node

    visit_Nonlocal = visit_Global

    def visit_FunctionDef(self, node: ast.FunctionDef) -> ast.AST:
        if node.name.startswith(_RESERVED):
            raise Refused("forbidden_introspection", node.name)
        kernel = _is_kernel(node)
        returns, node.returns = node.returns, None
        self.generic_visit(node)
        node.returns = self._annotation(returns)
        if not kernel:
            body = ast.With(items=[ast.withitem(context_expr=_call(OWN))], body=node.body)
            node.body = [ast.copy_location(body, node.body[0])]
        return node

    def visit_Lambda(self, node: ast.Lambda) -> ast.AST:
        self.generic_visit(node)
        return ast.copy_location(_call(OWN_FN, node), node)

    def visit_ClassDef(self, node: ast.ClassDef) -> ast.AST:
        if node.name.startswith(_RESERVED):
            raise Refused("forbidden_introspection", node.name)
        return self.generic_visit(node)

    def visit_alias(self, node: ast.alias) -> ast.AST:
        if (node.asname or node.name).startswith(_RESERVED):
            raise Refused("forbidden_introspection", node.asname or node.name)
        return node


def compile_candidate(source: bytes | str, filename: str) -> types.CodeType:
    """The candidate's module code under the guards. `SyntaxError` as Python raises it (a compile error);
    `Refused` for what the guards cannot hold. Line numbers stay the file's (Triton reads kernels' text)."""
    tree = ast.parse(source, filename=filename)
    if policy._too_deep(tree):  # the rewrite recurses: the static policy's bound, checked without recursion
        raise Refused("malformed_source", f"an expression nested deeper than {policy.MAX_DEPTH} levels")
    lazy = any(isinstance(n, ast.ImportFrom) and n.module == "__future__" and
               any(a.name == "annotations" for a in n.names) for n in tree.body)
    tree = _Rewrite(lazy).visit(tree)
    ast.fix_missing_locations(tree)
    return compile(tree, filename, "exec", dont_inherit=True)


# -- the guards ------------------------------------------------------------------------------------------
class _Own:
    """Candidate code runs recorded: inside a Triton launch (where the recorder pauses for Triton's own
    ops) a hook or lambda of the candidate's is recorded again, until it returns."""

    __slots__ = ("saved", "converting")

    def __enter__(self) -> None:
        self.saved, self.converting = opcheck.STATE.depth, opcheck.STATE.converting
        opcheck.STATE.depth = 0
        opcheck.STATE.converting = 0  # called back from inside a tensor's conversion: its reads count again

    def __exit__(self, *exc: object) -> None:
        opcheck.STATE.depth = self.saved
        opcheck.STATE.converting = self.converting


def _qual(obj: Any) -> str:
    if isinstance(obj, types.ModuleType):
        return str(obj.__name__)
    if isinstance(obj, type):
        return f"{obj.__module__}.{obj.__qualname__}"
    return type(obj).__qualname__


class Rules:
    """The guards of one candidate module. `refuse(rule, what)` records a violation and raises."""

    def __init__(self, refuse: Callable[[str, str], NoReturn], trusted: tuple[str, ...] = ()) -> None:
        self.refuse = refuse
        self.trusted = tuple(str(t) for t in trusted)
        # a spec that trusts NumPy (`ALLOWED_IMPORTS = [..., "numpy"]`) lets tensors cross to it and back
        self.numpy_ok = any(t == "numpy" or t.startswith("numpy.") for t in self.trusted)
        # the methods as they are now too: `opcheck` wraps `tolist`/`numpy` to count the values they read
        _BANNED_METHODS.update({id(getattr(torch.Tensor, n)): n for n in policy._TENSOR_METHODS_BANNED
                                if hasattr(torch.Tensor, n)})
        self.own: set[type] = set()          # classes the candidate's code created
        self._fast: set[tuple[Any, str]] = set()  # (module or type of an instance, name) already allowed
        self._import = builtins.__import__
        self._build_class = builtins.__build_class__

    # modules
    def _trusted_module(self, mod: types.ModuleType) -> bool:
        """A spec's trusted package (`ALLOWED_IMPORTS`): its private helpers too, as the static policy allows."""
        name = mod.__name__
        return any(name == t or name.startswith(t + ".") for t in self.trusted)

    def module_ok(self, mod: types.ModuleType) -> bool:
        return mod.__name__ in RUNTIME_MODULES or self._trusted_module(mod)

    def _module_value(self, base: Any, name: str, value: Any) -> None:
        """A module reached from `base` must be one a candidate may hold and, from a module, its own
        submodule under its own name (`torch.os` is `os` under another name: refused)."""
        vname = str(getattr(value, "__name__", "?"))
        genuine = not isinstance(base, types.ModuleType) or vname == f"{base.__name__}.{name}"
        if not (genuine and self.module_ok(value)):
            self.refuse(policy._import_rule(vname, self.trusted) or "import", f"{_qual(base)}.{name}")

    # reads
    def _own_object(self, obj: Any) -> bool:
        cls = obj if isinstance(obj, type) else type(obj)
        return cls in self.own or any(c in self.own for c in cls.__mro__[1:])

    def read_rule(self, obj: Any, name: str) -> tuple[str, str] | None:
        """None when the candidate may read `obj.name`, else (rule, what)."""
        if type(name) is not str:
            return ("forbidden_introspection", "a computed attribute name that is no string")
        if name.startswith("__"):
            if name == "__init__":
                return None
            return ("frame_introspection" if name in _FRAME_DUNDERS else "forbidden_introspection",
                    f"{_qual(obj)}.{name}")
        if name in _FRAME_ATTRS or name.startswith(policy._FRAME_PREFIXES):
            return ("frame_introspection", f"{_qual(obj)}.{name}")
        if isinstance(obj, types.ModuleType):
            if not self.module_ok(obj):
                return (policy._import_rule(obj.__name__, self.trusted) or "import", f"{obj.__name__}.{name}")
            if name.startswith("_") and not self._trusted_module(obj):
                return ("forbidden_introspection", f"{obj.__name__}.{name}")
            if self.numpy_ok and obj is torch and name == "from_numpy":
                return None
            if obj.__name__ == "typing" and name not in policy._TYPING_ALLOWED:  # get_type_hints evaluates text
                return ("forbidden_introspection", f"typing.{name}")
            if obj is torch or obj is torch.cuda:
                rule = policy._TORCH_RULES.get(name)
                if rule and not (obj is torch.cuda and name in policy._TORCH_CUDA_ALLOWED):
                    return (rule, f"{obj.__name__}.{name}")
            return None
        cls = obj.__self_class__ if isinstance(obj, super) else obj  # `super().numpy` in a Tensor subclass
        tensor = isinstance(cls, torch.Tensor) or (isinstance(cls, type) and issubclass(cls, torch.Tensor))
        if tensor and name in policy._TENSOR_METHODS_BANNED and not (self.numpy_ok and name == "numpy"):
            return (policy._TENSOR_METHODS_BANNED[name], f"Tensor.{name}")
        if name.startswith("_") and not self._own_object(obj):
            return ("forbidden_introspection", f"{_qual(obj)}.{name}")
        if isinstance(obj, str) and name in ("format", "format_map") and not policy._format_fields_plain(obj):
            return ("forbidden_introspection", "str.format with attribute or index fields")
        return None

    def getattr(self, obj: Any, name: str, *default: Any) -> Any:
        # what was allowed once is allowed again: by (module, name), or by (type, name) for an instance
        # whose rule depends on its type alone (not a class, a `super`, a string)
        key = (obj, name) if type(obj) is types.ModuleType else (type(obj), name)
        if key not in self._fast:
            why = self.read_rule(obj, name)
            if why is not None:
                self.refuse(*why)
            if not isinstance(obj, (type, str, super)):
                self._fast.add(key)
        value = getattr(obj, name, *default)
        if type(value) is types.ModuleType:
            self._module_value(obj, name, value)
        elif id(value) in _BANNED_METHODS and not (self.numpy_ok and _BANNED_METHODS[id(value)] == "numpy"):
            n = _BANNED_METHODS[id(value)]
            self.refuse(policy._TENSOR_METHODS_BANNED[n], f"Tensor.{n}")
        return value

    def hasattr(self, obj: Any, name: str) -> bool:
        try:
            self.getattr(obj, name)
        except AttributeError:
            return False
        return True

    # writes
    def setbase(self, obj: Any, name: str) -> Any:
        if type(name) is not str or name.startswith("__"):
            self.refuse("monkeypatch", f"{_qual(obj)}.{name}")
        if self._own_object(obj) and not isinstance(obj, types.ModuleType):
            return obj
        if isinstance(obj, torch.Tensor) and name in _TENSOR_WRITABLE:
            return obj
        self.refuse("monkeypatch", f"{_qual(obj)}.{name}")

    def setattr(self, obj: Any, name: str, value: Any) -> None:
        setattr(self.setbase(obj, name), name, value)

    def delattr(self, obj: Any, name: str) -> None:
        delattr(self.setbase(obj, name), name)

    # imports and classes
    def _allowed_import(self, name: str) -> None:
        if not (name in RUNTIME_MODULES or any(name == t or name.startswith(t + ".") for t in self.trusted)):
            self.refuse(policy._import_rule(name, self.trusted) or "import", name)

    def import_(self, name: str, leaf: bool = False) -> types.ModuleType:
        """`import a.b.c` (binds `a`) or `import a.b.c as x` (binds the leaf)."""
        self._allowed_import(name)
        top = self._import(name)
        return sys.modules[name] if leaf else top

    def import_from(self, name: str, items: tuple[str, ...]) -> tuple[Any, ...]:
        """`from m import x, y`: each through the read guard (a module only as m's own submodule)."""
        self._allowed_import(name)
        mod = self._import(name, None, None, items, 0)
        return tuple(self.getattr(mod, item) for item in items)

    def build_class(self, func: Any, name: str, *bases: Any, **kw: Any) -> type:
        cls = self._build_class(func, name, *bases, **kw)
        self.own.add(cls)
        return cls

    def builtins(self) -> dict[str, Any]:
        """The candidate module's builtins: Python's, with the guards in place of the reflective ones."""
        out = dict(vars(builtins))

        def refusing(n: str) -> Callable[..., NoReturn]:
            def refused(*a: Any, **k: Any) -> NoReturn:
                self.refuse(policy._BUILTIN_RULES.get(n, "forbidden_introspection"), n)
            return refused

        for n in _REFUSED_BUILTINS:
            out[n] = refusing(n)
        out.update({"getattr": self.getattr, "hasattr": self.hasattr, "setattr": self.setattr,
                    "delattr": self.delattr, "__build_class__": self.build_class, GETATTR: self.getattr,
                    SETBASE: self.setbase, OWN: _Own, OWN_FN: own_fn, IMPORT: self.import_,
                    IMPORT_FROM: self.import_from})
        return out


def own_fn(fn: Callable[..., Any]) -> Callable[..., Any]:
    """A lambda of the candidate's, run recorded (`_Own`) whoever calls it."""
    @functools.wraps(fn)
    def recorded(*a: Any, **k: Any) -> Any:
        with _Own():
            return fn(*a, **k)
    return recorded


def load_module(source: bytes, filename: str, rules: Rules, name: str = "candidate") -> types.ModuleType:
    """Compile and run the candidate's module under `rules`; registered as `sys.modules[name]`."""
    code = compile_candidate(source, filename)
    module = types.ModuleType(name)
    module.__file__ = filename
    module.__dict__["__builtins__"] = rules.builtins()
    sys.modules[name] = module
    exec(code, module.__dict__)  # noqa: S102 - the candidate's own code, compiled under the guards above
    return module


__all__ = ["RUNTIME_MODULES", "Refused", "Rules", "compile_candidate", "load_module", "own_fn"]
