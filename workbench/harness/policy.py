"""The static policy: what a candidate's source may contain, checked by the trusted parent before it runs.

An allow-list over the AST. It is the first line of the rules; the runtime guards and the op recorder
inside the candidate process are the second. A check of the text cannot see what a call computes at
run time (an operator on two tensors, a method reached through a variable), so the runtime recorder
stays; what the policy removes is every *route* the red team used to reach the harness's state or the
host: dynamic code, reflection, frames, closures, native calls, processes, signals, files, patching.

    check_source(source) -> ["ctypes:import ctypes [policy]", "forbidden_torch_op:matmul:torch.matmul [policy]"]

A violation is "<rule>:<what> [policy]", so it starts with the same name as its runtime twin (`ctypes`,
`subprocess`, `monkeypatch:time.perf_counter`, `forbidden_torch_op:add`...).
"""
from __future__ import annotations

import ast
from collections.abc import Iterable

# Modules a candidate may import (and their submodules unless listed in _BANNED_MODULES).
_ALLOWED_MODULES = frozenset({
    "torch", "triton", "math", "typing", "dataclasses", "functools", "itertools", "collections", "enum",
    "abc", "__future__", "numbers", "operator", "warnings", "logging", "time", "os", "weakref", "json", "random",
    "re", "string",
})
# Importing these, or any submodule, is a violation with the rule named here.
_BANNED_MODULES: dict[str, str] = {
    "ctypes": "ctypes", "_ctypes": "ctypes", "cffi": "ctypes", "_cffi_backend": "ctypes",
    "subprocess": "subprocess", "_posixsubprocess": "subprocess", "multiprocessing": "subprocess",
    "pty": "subprocess", "shlex": "subprocess", "concurrent": "thread", "threading": "thread",
    "_thread": "thread", "asyncio": "thread", "socket": "network", "_socket": "network", "ssl": "network",
    "http": "network", "urllib": "network", "requests": "network", "httpx": "network",
    "gc": "forbidden_introspection", "inspect": "frame_introspection", "traceback": "frame_introspection",
    "sys": "frame_introspection", "signal": "signal", "importlib": "dynamic_code", "runpy": "dynamic_code",
    "pickle": "dynamic_code", "marshal": "dynamic_code", "code": "dynamic_code", "codeop": "dynamic_code",
    "builtins": "monkeypatch", "numpy": "forbidden_torch_op", "shutil": "file_write", "tempfile": "file_write",
    "mmap": "file_write", "fcntl": "file_write", "resource": "kill", "atexit": "dynamic_code",
    "torch.overrides": "monkeypatch", "torch.utils._python_dispatch": "monkeypatch",
    "torch._C": "forbidden_introspection", "torch._dynamo": "dynamic_code", "torch.jit": "dynamic_code",
    "torch.library": "dynamic_code", "torch.utils.cpp_extension": "ctypes", "torch.multiprocessing": "subprocess",
    "torch.distributed": "network", "torch.hub": "network", "torch.utils.collect_env": "subprocess",
    "torch.testing": "forbidden_torch_op", "torch.fx": "dynamic_code", "torch.export": "dynamic_code",
    "torch.compiler": "dynamic_code", "torch._inductor": "dynamic_code", "torch.backends": "monkeypatch",
    "triton.runtime.jit": "monkeypatch", "triton.runtime.autotuner": "monkeypatch",
    "triton.runtime.interpreter": "monkeypatch", "triton.runtime.driver": "ctypes", "triton.compiler": "dynamic_code",
    "triton.backends": "ctypes", "triton.knobs": "monkeypatch",
}
# Builtins that run text as code, reach other scopes or the import system.
_BANNED_BUILTINS: dict[str, str] = {
    "eval": "dynamic_code", "exec": "dynamic_code", "compile": "dynamic_code", "__import__": "dynamic_code",
    "globals": "frame_introspection", "locals": "frame_introspection", "vars": "frame_introspection",
    "breakpoint": "frame_introspection", "open": "file_write", "input": "dynamic_code",
    "setattr": "monkeypatch", "delattr": "monkeypatch", "memoryview": "forbidden_torch_op",
}
# os: only pure path helpers and environment reads (a kernel may read a tuning knob).
_OS_ALLOWED = frozenset({"path", "environ", "getenv", "sep", "cpu_count"})
_OS_PATH_ALLOWED = frozenset({"join", "basename", "dirname", "splitext", "exists", "isfile", "isdir", "abspath"})
# Dunder attributes: everything that leads to code objects, scopes, frames, class graphs, pickling hooks.
_DUNDER_ALLOWED = frozenset({"__init__", "__name__", "__qualname__", "__doc__", "__len__", "__future__"})
_FRAME_ATTRS = frozenset({"f_back", "f_globals", "f_locals", "f_builtins", "f_code", "f_trace", "tb_frame",
                          "tb_next", "gi_frame", "gi_code", "cr_frame", "cr_code", "ag_frame", "ag_code",
                          "co_code", "co_consts", "func_globals"})
# Methods a class may define: anything else dunder (`__del__`, `__torch_function__`, `__reduce__`,
# `__getattr__`, `__init_subclass__`...) runs candidate code when the harness touches an object.
_DUNDER_DEFS_ALLOWED = frozenset({"__init__", "__repr__", "__str__", "__len__", "__hash__", "__eq__",
                                  "__post_init__"})
# torch calls that only allocate, view, reshape, copy or cast: the glue a forward may dispatch.
_TORCH_GLUE_CALLS = frozenset("""
empty empty_like empty_strided zeros zeros_like ones ones_like full full_like arange tensor as_tensor
as_strided cat concat stack reshape flatten unflatten squeeze unsqueeze transpose permute narrow chunk split
movedim broadcast_shapes broadcast_tensors Size device dtype no_grad inference_mode enable_grad is_tensor
is_floating_point is_complex get_default_dtype promote_types result_type finfo iinfo numel
is_available current_device device_count get_device_properties get_device_capability get_device_name
current_stream synchronize set_device is_current_stream_capturing
Parameter Module ModuleList ModuleDict ParameterList ParameterDict Sequential Identity pad
""".split())
# Where torch compute is allowed anyway: `__init__` builds parameters as the reference does.
_COMPUTE_OK_FUNCS = frozenset({"__init__"})
_TORCH_BANNED_ATTRS: dict[str, str] = {
    "Stream": "side_stream", "stream": "side_stream", "set_stream": "side_stream", "graph": "side_stream",
    "CUDAGraph": "side_stream", "graphs": "side_stream", "save": "file_write", "load": "file_write",
    "from_numpy": "forbidden_torch_op", "compile": "dynamic_code", "ops": "forbidden_torch_op",
    "manual_seed": "monkeypatch", "set_default_dtype": "monkeypatch", "set_grad_enabled": "monkeypatch",
    "use_deterministic_algorithms": "monkeypatch", "set_float32_matmul_precision": "monkeypatch",
}
_TENSOR_METHODS_BANNED: dict[str, str] = {"numpy": "forbidden_torch_op", "tolist": "forbidden_torch_op",
                                          "data_ptr_hook": "monkeypatch", "register_hook": "monkeypatch",
                                          "untyped_storage": "forbidden_introspection",
                                          "__torch_function__": "monkeypatch"}
# Tensor methods that compute (the common ones; the runtime recorder sees the rest).
_TENSOR_COMPUTE_METHODS = frozenset("""
sum mean matmul mm bmm addmm baddbmm exp relu softmax log_softmax sqrt rsqrt cumsum cumprod topk argmax
argmin amax amin scatter_add index_select masked_fill clamp tanh sigmoid einsum conv1d conv2d conv3d
prod var std norm argsort searchsorted bucketize
""".split())


def _dotted(node: ast.AST) -> str | None:
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return ".".join(reversed(parts))
    return None


def _module_rule(name: str, allowed_extra: Iterable[str]) -> str | None:
    """The rule an import of `name` breaks, or None (a spec's `ALLOWED_IMPORTS` wins over the bans)."""
    parts = name.split(".")
    for extra in allowed_extra:
        if name == extra or name.startswith(extra + "."):
            return None
    for i in range(len(parts), 0, -1):
        prefix = ".".join(parts[:i])
        if prefix in _BANNED_MODULES:
            return _BANNED_MODULES[prefix]
    for extra in allowed_extra:
        if name == extra or name.startswith(extra + "."):
            return None
    return None if parts[0] in _ALLOWED_MODULES else "import"


class _Checker(ast.NodeVisitor):
    def __init__(self, allowed_imports: Iterable[str]) -> None:
        self.allowed_imports = tuple(allowed_imports)
        self.violations: list[str] = []
        self.aliases: dict[str, str] = {}   # local name -> dotted module/object it stands for
        self.func_stack: list[str] = []
        self.jit_depth = 0
        self.numpy_ok = any(m == "numpy" or m.startswith("numpy.") for m in self.allowed_imports)

    def flag(self, rule: str, what: str) -> None:
        tag = f"{rule}:{what} [policy]"[:160]
        if tag not in self.violations:
            self.violations.append(tag)

    def resolve(self, node: ast.AST) -> str | None:
        """`F.relu` -> "torch.nn.functional.relu" when F aliases torch.nn.functional."""
        dotted = _dotted(node)
        if dotted is None:
            return None
        head, _, rest = dotted.partition(".")
        if head in self.aliases:
            base = self.aliases[head]
            return f"{base}.{rest}" if rest else base
        return dotted

    # -- imports ------------------------------------------------------------------------------------
    def visit_Import(self, node: ast.Import) -> None:
        for a in node.names:
            rule = _module_rule(a.name, self.allowed_imports)
            if rule:
                self.flag(rule, f"import {a.name}")
            self.aliases[a.asname or a.name.split(".")[0]] = a.name if a.asname else a.name.split(".")[0]

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        if node.level:
            self.flag("import", "relative import")
            return
        mod = node.module or ""
        for a in node.names:
            full = f"{mod}.{a.name}"
            if a.name == "*":
                self.flag("import", f"from {mod} import *")
                continue
            rule = _module_rule(mod, self.allowed_imports) or _module_rule(full, self.allowed_imports)
            if rule:
                self.flag(rule, f"from {mod} import {a.name}")
            self.aliases[a.asname or a.name] = full
            self._check_resolved(full, call=False)

    # -- scopes -------------------------------------------------------------------------------------
    def _visit_func(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        if isinstance(node, ast.AsyncFunctionDef):
            self.flag("thread", f"async def {node.name}")
        name = node.name
        if name.startswith("__") and name.endswith("__") and name not in _DUNDER_DEFS_ALLOWED:
            self.flag("monkeypatch", f"defines {name}")
        # A Triton kernel body is Triton, not torch: its `x.sum(axis=0)` is a tl reduction. It still
        # gets every other check (the interpreter runs it as Python).
        jit = any((self.resolve(d.func if isinstance(d, ast.Call) else d) or "").startswith("triton.")
                  for d in node.decorator_list)
        self.func_stack.append(name)
        self.jit_depth += jit
        self.generic_visit(node)
        self.jit_depth -= jit
        self.func_stack.pop()

    visit_FunctionDef = _visit_func
    visit_AsyncFunctionDef = _visit_func

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        for kw in node.keywords:
            if kw.arg == "metaclass":
                self.flag("monkeypatch", f"class {node.name}(metaclass=...)")
        for b in node.bases:
            base = self.resolve(b) or ""
            if base in ("torch.Tensor", "torch._C.TensorBase") or base.endswith(("TorchDispatchMode",
                                                                                  "TorchFunctionMode")):
                self.flag("output_type", f"class {node.name}({base})")
        self.generic_visit(node)

    def visit_Await(self, node: ast.Await) -> None:
        self.flag("thread", "await")
        self.generic_visit(node)

    # -- names and attributes -------------------------------------------------------------------------
    def visit_Name(self, node: ast.Name) -> None:
        if node.id in _BANNED_BUILTINS and node.id not in self.aliases:
            self.flag(_BANNED_BUILTINS[node.id], node.id)
        if node.id.startswith("__") and node.id.endswith("__") and node.id not in _DUNDER_ALLOWED \
                and node.id not in ("__name__", "__file__", "__all__"):
            self.flag("frame_introspection", node.id)

    def visit_Attribute(self, node: ast.Attribute) -> None:
        attr = node.attr
        if attr.startswith("__") and attr.endswith("__") and attr not in _DUNDER_ALLOWED:
            self.flag("frame_introspection", f".{attr}")
        elif attr in _FRAME_ATTRS:
            self.flag("frame_introspection", f".{attr}")
        elif attr in _TENSOR_METHODS_BANNED and not (attr in ("numpy", "tolist") and self.numpy_ok):
            self.flag(_TENSOR_METHODS_BANNED[attr], f".{attr}")
        full = self.resolve(node)
        if full is not None:
            self._check_resolved(full, call=False)
        self.generic_visit(node)

    def _check_resolved(self, full: str, call: bool) -> None:
        parts = full.split(".")
        head = parts[0]
        if head == "os" and len(parts) > 1:
            if parts[1] not in _OS_ALLOWED or (parts[1] == "path" and len(parts) > 2
                                               and parts[2] not in _OS_PATH_ALLOWED):
                self.flag("os", full)
        if head == "torch" and len(parts) > 1:
            for p in parts[1:]:
                if p == "from_numpy" and self.numpy_ok:
                    continue
                if p in _TORCH_BANNED_ATTRS:
                    self.flag(_TORCH_BANNED_ATTRS[p], full)
                    break
            for i in range(len(parts), 1, -1):
                prefix = ".".join(parts[:i])
                if prefix in _BANNED_MODULES:
                    self.flag(_BANNED_MODULES[prefix], full)
                    break
        if head == "triton" and len(parts) > 1:
            for i in range(len(parts), 1, -1):
                prefix = ".".join(parts[:i])
                if prefix in _BANNED_MODULES:
                    self.flag(_BANNED_MODULES[prefix], full)
                    break

    # -- assignments: no patching of anything imported ---------------------------------------------
    def _check_target(self, target: ast.AST) -> None:
        if isinstance(target, (ast.Tuple, ast.List)):
            for t in target.elts:
                self._check_target(t)
            return
        if isinstance(target, ast.Starred):
            self._check_target(target.value)
            return
        if isinstance(target, (ast.Attribute, ast.Subscript)):
            root = target
            while isinstance(root, (ast.Attribute, ast.Subscript)):
                root = root.value
            if isinstance(root, ast.Name) and root.id in self.aliases:
                what = self.resolve(target.value if isinstance(target, ast.Subscript) else target) or root.id
                self.flag("monkeypatch", what)
        if isinstance(target, ast.Name) and target.id in _BANNED_BUILTINS:
            self.flag("monkeypatch", f"rebinds {target.id}")

    def visit_Assign(self, node: ast.Assign) -> None:
        for t in node.targets:
            self._check_target(t)
        self.generic_visit(node)

    def visit_AugAssign(self, node: ast.AugAssign) -> None:
        self._check_target(node.target)
        self.generic_visit(node)

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        self._check_target(node.target)
        self.generic_visit(node)

    def visit_Delete(self, node: ast.Delete) -> None:
        for t in node.targets:
            self._check_target(t)
        self.generic_visit(node)

    def visit_Global(self, node: ast.Global) -> None:
        for n in node.names:
            if n in self.aliases:
                self.flag("monkeypatch", f"global {n}")

    # -- calls ---------------------------------------------------------------------------------------
    def visit_Call(self, node: ast.Call) -> None:
        func = node.func
        full = self.resolve(func)
        in_init = bool(self.func_stack) and self.func_stack[-1] in _COMPUTE_OK_FUNCS
        if isinstance(func, ast.Name) and func.id == "getattr" and "getattr" not in self.aliases:
            name_arg = node.args[1] if len(node.args) > 1 else None
            target = self.resolve(node.args[0]) if node.args else None
            if not (isinstance(name_arg, ast.Constant) and isinstance(name_arg.value, str)):
                # A computed name reaches whatever the text hides (`getattr(torch, "_" + "C")`), in
                # `__init__` too: what it fetches there, the forward can use.
                self.flag("frame_introspection", f"getattr({target or '...'}, <computed name>)")
            elif name_arg.value.startswith("__") or name_arg.value in _FRAME_ATTRS:
                self.flag("frame_introspection", f"getattr(..., {name_arg.value!r})")
        if full is not None and not in_init:
            parts = full.split(".")
            if parts[0] == "torch" and len(parts) > 1:
                leaf = parts[-1]
                if leaf not in _TORCH_GLUE_CALLS and not leaf[:1].isupper() and parts[1] not in ("cuda",) \
                        and leaf not in _TORCH_BANNED_ATTRS:
                    self.flag(f"forbidden_torch_op:{leaf}", full)
                elif parts[1] == "cuda" and leaf not in _TORCH_GLUE_CALLS and leaf not in _TORCH_BANNED_ATTRS:
                    self.flag("forbidden_torch_op", full)
        if isinstance(func, ast.Attribute) and not in_init and not self.jit_depth and full is not None \
                and func.attr in _TENSOR_COMPUTE_METHODS and full.split(".")[0] not in ("torch", "triton", "tl",
                                                                                         "math", "os"):
            root = (_dotted(func) or "").split(".")[0]
            if root not in self.aliases or self.aliases[root].startswith("torch"):
                self.flag(f"forbidden_torch_op:{func.attr}", f".{func.attr}()")
        self.generic_visit(node)


def check_source(source: str, allowed_imports: Iterable[str] = ()) -> list[str]:
    """Violations of the static policy in a candidate's source; empty when it is clean.

    `allowed_imports` extends the import allow-list with trusted packages (a spec's `ALLOWED_IMPORTS`,
    e.g. the case studies' own helpers). A source that does not parse is not a policy matter: the
    harness reports it as a compile error when it imports it.
    """
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return []
    checker = _Checker(allowed_imports)
    checker.visit(tree)
    return checker.violations
