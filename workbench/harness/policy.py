"""The static policy: what a candidate's source may contain, checked by the trusted side before it runs.

An allow-list, not a list of spellings to refuse. A candidate may import `torch` (with `torch.nn` and
`torch.nn.functional`), `triton`, `triton.language` (its `math` and `extra` libdevice modules) and `math`,
plus `typing` names for annotations and the trusted packages a spec's `ALLOWED_IMPORTS` names. Through
them it may reach only what the tables below allow: tensor allocation, views and glue, dtypes and
devices, `nn.Module` and its building blocks, Triton's decorators and helpers, every `tl` language
object. Reflection is impossible by construction rather than by a list of names:

- no attribute that starts with an underscore (a dunder or a private name) except `__init__`, and a
  single-underscore name only on `self`/`cls`; no frame, traceback, code or generator attribute;
  no `str.format` with attribute or index fields (`"{0.__class__}"`);
- a module is never a value: it appears only as the head of an attribute chain, so no alias can carry
  it past the checks (`t = torch`, `f(torch)`, `[torch][0]`);
- builtins from an allow-list only (no `getattr`, `type`, `vars`, `eval`, `open`...); no generators,
  async code, class decorators, metaclasses, or dunder methods beyond `__init__`/`__repr__`/`__str__`...;
- nothing imported is assigned to, deleted or rebound;
- a `@triton.jit` body and any hook Triton calls on the host (`@triton.heuristics` values, autotune's
  `prune_configs_by`/`pre_hook`/`post_hook`/`perf_model`, `Config(pre_hook=...)`, any lambda) names no
  torch at all: they are no route for torch compute;
- torch compute (`torch.matmul`, `F.relu`, `x.sum()`) only in `__init__` (parameters built as the
  reference does); the runtime op recorder still sees operators on tensors (`a + b`), which text cannot;
- at least one Triton kernel is defined here, or comes from a spec's trusted package.

    check_source(source) -> ["ctypes:import ctypes [policy]", "forbidden_torch_op:matmul:torch.matmul [policy]"]

A violation is "<rule>:<what> [policy]", so it starts with the same name as its runtime twin (`ctypes`,
`subprocess`, `monkeypatch:time.perf_counter`, `forbidden_torch_op:add`...). `check_source` takes a few
milliseconds and runs in the caller's process before any server, process or GPU context starts.
"""
from __future__ import annotations

import ast
import builtins
import functools
import io
import string
import sys
import tokenize
from collections.abc import Iterable

# Modules a candidate may import. Submodules of these are not implied.
_IMPORTABLE = frozenset({"torch", "torch.nn", "torch.nn.functional", "triton", "triton.language", "math",
                         "typing", "__future__", "os", "triton.language.math", "triton.language.extra",
                         "triton.language.extra.libdevice", "triton.language.extra.cuda",
                         "triton.language.extra.cuda.libdevice", "triton.profiler.language",
                         "triton.tools.tensor_descriptor"})
# Triton's host-side helpers beyond its top level: what each module may be used for.
_TRITON_EXTRA = {"triton.testing": {"do_bench", "do_bench_cudagraph"},
                 "triton.profiler.language": {"enable_semantic", "enter_scope", "exit_scope", "scope", "record"},
                 "triton.tools.tensor_descriptor": {"TensorDescriptor"}}
# How a refused import is named (the rule of its runtime twin); anything else is `import`.
_IMPORT_RULES: dict[str, str] = {
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
    "operator": "forbidden_introspection", "dataclasses": "dynamic_code", "logging": "forbidden_introspection",
    "weakref": "dynamic_code", "functools": "forbidden_introspection",
    "torch.overrides": "monkeypatch", "torch.utils._python_dispatch": "monkeypatch",
    "torch._C": "forbidden_introspection", "torch._dynamo": "dynamic_code", "torch.jit": "dynamic_code",
    "torch.library": "dynamic_code", "torch.utils.cpp_extension": "ctypes", "torch.multiprocessing": "subprocess",
    "torch.distributed": "network", "torch.hub": "network", "torch.utils.collect_env": "subprocess",
    "torch.testing": "forbidden_torch_op", "torch.fx": "dynamic_code", "torch.export": "dynamic_code",
    "torch.compiler": "dynamic_code", "torch._inductor": "dynamic_code", "torch.backends": "monkeypatch",
    "triton.runtime": "monkeypatch", "triton.runtime.jit": "monkeypatch", "triton.runtime.autotuner": "monkeypatch",
    "triton.runtime.interpreter": "monkeypatch", "triton.runtime.driver": "ctypes", "triton.compiler": "dynamic_code",
    "triton.backends": "ctypes", "triton.knobs": "monkeypatch", "triton.tools": "ctypes",
    "triton.testing": "forbidden_torch_op", "torch.cuda": "side_stream", "torch.utils": "forbidden_introspection",
    "torch.ops": "forbidden_torch_op",
}
_BUILTINS_ALLOWED = frozenset("""
abs all any bool dict divmod enumerate filter float frozenset hash int isinstance issubclass iter len list map
max min next pow print range repr reversed round set slice sorted str sum super tuple zip property staticmethod
classmethod hasattr getattr None True False NotImplemented Ellipsis
Exception ValueError RuntimeError TypeError AssertionError NotImplementedError IndexError KeyError
ZeroDivisionError ArithmeticError OverflowError AttributeError LookupError StopIteration OSError ImportError
callable
""".split())
_ALL_BUILTINS = frozenset(dir(builtins))  # an unknown name that is no builtin fails as a NameError when run
# How a refused builtin is named.
_BUILTIN_RULES: dict[str, str] = {
    "eval": "dynamic_code", "exec": "dynamic_code", "compile": "dynamic_code", "__import__": "dynamic_code",
    "globals": "frame_introspection", "locals": "frame_introspection", "vars": "frame_introspection",
    "breakpoint": "frame_introspection", "open": "file_write", "input": "dynamic_code",
    "setattr": "monkeypatch", "delattr": "monkeypatch", "memoryview": "forbidden_torch_op",
    "getattr": "frame_introspection", "type": "forbidden_introspection", "object": "forbidden_introspection",
    "dir": "forbidden_introspection", "help": "forbidden_introspection", "id": "forbidden_introspection",
    "exit": "kill", "quit": "kill", "bytearray": "forbidden_torch_op", "bytes": "forbidden_torch_op",
    "format": "forbidden_introspection",
}
# Attributes that reach frames, tracebacks, code objects and suspended generators.
_FRAME_ATTRS = frozenset({"f_back", "f_globals", "f_locals", "f_builtins", "f_code", "f_trace", "f_lasti",
                          "f_lineno", "func_globals", "func_code", "with_traceback", "mro"})
_FRAME_PREFIXES = ("tb_", "gi_", "cr_", "ag_", "co_")
_DUNDER_ATTRS_ALLOWED = frozenset({"__init__"})
# Methods a class may define: any other dunder (`__del__`, `__torch_function__`, `__reduce__`, `__getattr__`,
# `__init_subclass__`, `__class_getitem__`...) runs candidate code when the harness touches an object.
_DUNDER_DEFS_ALLOWED = frozenset({"__init__", "__repr__", "__str__", "__len__", "__hash__", "__eq__"})
_DUNDER_NAMES_ALLOWED = frozenset({"__name__", "__all__"})

# torch calls a forward may make: allocation, views, reshapes, copies, casts, dtypes, devices, no_grad.
_TORCH_GLUE = frozenset("""
empty empty_like empty_strided zeros zeros_like ones ones_like full full_like arange tensor as_tensor
as_strided cat concat stack reshape flatten unflatten squeeze unsqueeze transpose permute narrow chunk split
movedim broadcast_shapes broadcast_tensors Size device dtype no_grad inference_mode is_tensor
is_floating_point is_complex get_default_dtype promote_types result_type finfo iinfo numel Tensor
Generator contiguous_format channels_last preserve_format strided
""".split())
_TORCH_DTYPES = frozenset("""
float16 float32 float64 bfloat16 half float double int8 int16 int32 int64 uint8 uint16 uint32 uint64 bool
long int short complex64 complex128 cfloat float8_e4m3fn float8_e5m2 float8_e4m3fnuz float8_e5m2fnuz
""".split())
_TORCH_SUBMODULES = frozenset({"nn", "cuda"})
_TORCH_CUDA_ALLOWED = frozenset("""
is_available current_device device_count get_device_properties get_device_capability get_device_name
synchronize set_device is_current_stream_capturing current_stream
""".split())
# What a torch name a forward may not call is called (its runtime twin's rule).
_TORCH_RULES: dict[str, str] = {
    "Stream": "side_stream", "stream": "side_stream", "set_stream": "side_stream", "graph": "side_stream",
    "CUDAGraph": "side_stream", "graphs": "side_stream", "Event": "side_stream", "save": "file_write",
    "load": "file_write", "from_numpy": "forbidden_torch_op", "compile": "dynamic_code", "ops": "forbidden_torch_op",
    "manual_seed": "monkeypatch", "set_default_dtype": "monkeypatch", "set_grad_enabled": "monkeypatch",
    "use_deterministic_algorithms": "monkeypatch", "set_float32_matmul_precision": "monkeypatch",
    "set_default_device": "monkeypatch", "backends": "monkeypatch", "library": "dynamic_code",
    "jit": "dynamic_code", "fx": "dynamic_code", "utils": "forbidden_introspection", "overrides": "monkeypatch",
    "multiprocessing": "subprocess", "distributed": "network", "hub": "network", "testing": "forbidden_torch_op",
}
_NN_FORWARD_OK = frozenset({"Module", "Parameter", "ModuleList", "ModuleDict", "ParameterList", "ParameterDict",
                            "Identity", "Sequential", "functional", "init", "Buffer"})
_TRITON_ALLOWED = frozenset({"jit", "autotune", "heuristics", "Config", "cdiv", "next_power_of_2", "language",
                             "OutOfResources", "CompilationError", "set_allocator", "constexpr_function"})
_TYPING_ALLOWED = frozenset({"Optional", "List", "Tuple", "Dict", "Union", "Any", "Sequence", "Callable",
                             "Iterable", "Mapping", "TYPE_CHECKING", "Literal", "Final"})
# os: only reading a named environment variable (a kernel may read a tuning knob or TRITON_INTERPRET).
_OS_CALLS = frozenset({"os.environ.get", "os.getenv"})
# Tensor methods that compute (in a forward; `__init__` and Triton kernel bodies may use them).
_TENSOR_COMPUTE_METHODS = frozenset("""
sum mean matmul mm bmm addmm baddbmm exp relu softmax log_softmax sqrt rsqrt cumsum cumprod topk argmax
argmin amax amin scatter_add index_select masked_fill clamp tanh sigmoid einsum conv1d conv2d conv3d
prod var std norm argsort searchsorted bucketize
""".split())
_TENSOR_METHODS_BANNED: dict[str, str] = {"numpy": "forbidden_torch_op", "tolist": "forbidden_torch_op",
                                          "apply_": "forbidden_torch_op", "map_": "forbidden_torch_op",
                                          "map2_": "forbidden_torch_op",
                                          "register_hook": "monkeypatch", "untyped_storage": "forbidden_introspection",
                                          "storage": "forbidden_introspection"}
# Keyword arguments through which Triton calls candidate code on the host.
_HOOK_KWARGS = frozenset({"prune_configs_by", "pre_hook", "post_hook", "perf_model", "early_config_prune",
                          "configs_top_k", "init_hook", "do_bench"})
_KERNEL_DECORATORS = frozenset({"triton.jit", "triton.autotune", "triton.heuristics"})


@functools.lru_cache(maxsize=1)
def _tl_names() -> dict[str, frozenset[str]]:
    """Every public non-module object of triton.language and its libdevice modules, read from Triton itself."""
    import types

    import triton.language as tl

    out: dict[str, frozenset[str]] = {}
    mods = {"triton.language": tl, "triton.language.math": tl.math}
    try:
        from triton.language.extra import libdevice

        mods["triton.language.extra.libdevice"] = libdevice
        from triton.language.extra.cuda import libdevice as cuda_libdevice

        mods["triton.language.extra.cuda.libdevice"] = cuda_libdevice
    except ImportError:  # pragma: no cover - an older Triton
        pass
    for name, mod in mods.items():
        out[name] = frozenset(n for n in dir(mod) if not n.startswith("_")
                              and not isinstance(getattr(mod, n, None), types.ModuleType))
    return out


_TL_SUBMODULES = {"triton.language": {"math", "extra"}, "triton.language.extra": {"libdevice", "cuda"},
                  "triton.language.extra.cuda": {"libdevice"}}


@functools.lru_cache(maxsize=512)
def _is_module_name(package: str, name: str) -> bool:
    """Whether `package.name` is (or may be) a module: a standard-library module's name (`torch.sys`,
    `torch.os`, `torch.builtins` are the modules themselves), or a submodule in the package's directory.
    Decided without importing the package (the client checks in milliseconds)."""
    if name in sys.stdlib_module_names or name in sys.builtin_module_names:
        return True
    import importlib.util
    import os

    try:
        found = importlib.util.find_spec(package)
    except (ImportError, ValueError):
        return False
    for where in (found.submodule_search_locations or []) if found else []:
        if os.path.isdir(os.path.join(where, name)) or os.path.isfile(os.path.join(where, name + ".py")):
            return True
    return False


def _dotted(node: ast.AST) -> str | None:
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return ".".join(reversed(parts))
    return None


def _import_rule(name: str, trusted: tuple[str, ...]) -> str | None:
    """None when `name` may be imported, else the rule its import breaks."""
    if name in _IMPORTABLE or any(name == t or name.startswith(t + ".") for t in trusted):
        return None
    parts = name.split(".")
    for i in range(len(parts), 0, -1):
        rule = _IMPORT_RULES.get(".".join(parts[:i]))
        if rule:
            return rule
    return "import"


def _bound_names(tree: ast.AST) -> set[str]:
    """Every name the module binds anywhere (assignments, defs, parameters, imports, loop and with targets)."""
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
            out.add(node.id)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            out.add(node.name)
        elif isinstance(node, ast.arg):
            out.add(node.arg)
        elif isinstance(node, ast.alias):
            out.add(node.asname or node.name.split(".")[0])
        elif isinstance(node, ast.ExceptHandler) and node.name:
            out.add(node.name)
        elif isinstance(node, (ast.MatchAs, ast.MatchStar)) and node.name:
            out.add(node.name)
        elif isinstance(node, ast.MatchMapping) and node.rest:
            out.add(node.rest)
    return out


def _annotation_names(tree: ast.AST) -> set[int]:
    """Ids of the names inside annotations (never evaluated under `from __future__ import annotations`)."""
    anns: list[ast.AST] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.arg) and node.annotation is not None:
            anns.append(node.annotation)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.returns is not None:
            anns.append(node.returns)
        elif isinstance(node, ast.AnnAssign):
            anns.append(node.annotation)
    return {id(n) for a in anns for n in ast.walk(a) if isinstance(n, ast.Name)}


def _format_fields_plain(text: str) -> bool:
    """True when a format string's fields are positions or names only (no `.attr`, no `[index]`)."""
    try:
        fields = [f for _, f, _, _ in string.Formatter().parse(text) if f is not None]
    except ValueError:
        return False
    return all(f == "" or f.isdigit() or f.isidentifier() for f in fields)


class _Checker(ast.NodeVisitor):
    def __init__(self, tree: ast.Module, trusted: Iterable[str]) -> None:
        self.trusted = tuple(trusted)
        self.violations: list[str] = []
        self.modules: dict[str, str] = {}   # local name -> the module it stands for
        self.objects: dict[str, str] = {}   # local name -> the dotted object imported under it
        self.aliases: dict[str, str] = {}   # local name -> the imported class assigned to it (`T = torch.Tensor`)
        self.bound = _bound_names(tree)
        self.annotation_names = _annotation_names(tree)
        self.func_stack: list[str] = []
        self.jit_depth = 0                  # inside a Triton kernel body
        self.hook_depth = 0                 # inside code Triton calls on the host (a hook, a lambda)
        self.hook_names: set[str] = set()   # functions passed to Triton as hooks
        self.kernels = 0
        self.trusted_import = False
        self.numpy_ok = any(m == "numpy" or m.startswith("numpy.") for m in self.trusted)
        self._attr_heads: set[int] = set()  # ids of Name nodes that head an attribute chain
        self._call_funcs: set[int] = set()  # ids of Name nodes called directly
        self._getattr_heads: set[int] = set()  # ids of module names that are getattr's first argument
        self._collect_hooks(tree)

    def flag(self, rule: str, what: str) -> None:
        tag = f"{rule}:{what} [policy]"[:160]
        if tag not in self.violations:
            self.violations.append(tag)

    def resolve(self, node: ast.AST) -> str | None:
        """`F.relu` -> "torch.nn.functional.relu" when F is torch.nn.functional; None for non-module heads."""
        dotted = _dotted(node)
        if dotted is None:
            return None
        head, _, rest = dotted.partition(".")
        base = self.modules.get(head) or self.objects.get(head) or self.aliases.get(head)
        if base is None:
            return None
        return f"{base}.{rest}" if rest else base

    def _trusted(self, full: str) -> bool:
        return any(full == t or full.startswith(t + ".") for t in self.trusted)

    def _collect_hooks(self, tree: ast.AST) -> None:
        for node in ast.walk(tree):
            if isinstance(node, ast.Call):
                for kw in node.keywords:
                    if kw.arg in _HOOK_KWARGS:
                        for sub in ast.walk(kw.value):
                            if isinstance(sub, ast.Name):
                                self.hook_names.add(sub.id)

    # -- imports ------------------------------------------------------------------------------------
    def visit_Import(self, node: ast.Import) -> None:
        for a in node.names:
            rule = _import_rule(a.name, self.trusted)
            if rule:
                self.flag(rule, f"import {a.name}")
            if self._trusted(a.name):
                self.trusted_import = True
            local = a.asname or a.name.split(".")[0]
            self.modules[local] = a.name if a.asname else a.name.split(".")[0]

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        if node.level:
            self.flag("import", "relative import")
            return
        mod = node.module or ""
        for a in node.names:
            if a.name == "*":
                self.flag("import", f"from {mod} import *")
                continue
            full = f"{mod}.{a.name}"
            local = a.asname or a.name
            if mod == "__future__":
                continue
            if self._trusted(mod):
                self.trusted_import = True
                self.objects[local] = full
                continue
            rule = _import_rule(mod, self.trusted)
            if rule:
                specific = _import_rule(full, self.trusted)  # `torch.utils.collect_env`: subprocess
                self.flag(specific if specific != "import" else rule, f"from {mod} import {a.name}")
                self.objects[local] = full  # still followed: what it is used for is named too
                continue
            if full in _IMPORTABLE:
                self.modules[local] = full
            else:
                self._check_path(full, node)
                self.objects[local] = full

    # -- scopes -------------------------------------------------------------------------------------
    def _decorator_path(self, d: ast.AST) -> str:
        return self.resolve(d.func if isinstance(d, ast.Call) else d) or ""

    def _visit_func(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        if isinstance(node, ast.AsyncFunctionDef):
            self.flag("thread", f"async def {node.name}")
        name = node.name
        if name.startswith("__") and name.endswith("__") and name not in _DUNDER_DEFS_ALLOWED:
            self.flag("monkeypatch", f"defines {name}")
        decorators = [self._decorator_path(d) for d in node.decorator_list]
        jit = any(d in _KERNEL_DECORATORS for d in decorators)
        for d, dn in zip(decorators, node.decorator_list):
            ok = d in _KERNEL_DECORATORS or d in ("torch.no_grad", "torch.inference_mode") or \
                (isinstance(dn, ast.Name) and dn.id in ("staticmethod", "classmethod", "property")) or \
                self._trusted(d)
            if not ok:
                self.flag("dynamic_code", f"decorator on {name}")
        self.kernels += jit
        hook = name in self.hook_names
        self.func_stack.append(name)
        self.jit_depth += jit
        self.hook_depth += hook
        for d in node.decorator_list:
            self.visit(d)
        self.visit(node.args)
        if node.returns is not None:
            self.visit(node.returns)
        for stmt in node.body:
            self.visit(stmt)
        self.hook_depth -= hook
        self.jit_depth -= jit
        self.func_stack.pop()

    visit_FunctionDef = _visit_func
    visit_AsyncFunctionDef = _visit_func

    def visit_Lambda(self, node: ast.Lambda) -> None:
        # Triton calls lambdas on the host (grids, heuristics, hooks): no torch in them.
        self.hook_depth += 1
        self.generic_visit(node)
        self.hook_depth -= 1

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        for kw in node.keywords:
            self.flag("monkeypatch", f"class {node.name}({kw.arg}=...)")
        if node.decorator_list:
            self.flag("dynamic_code", f"decorator on class {node.name}")
        for b in node.bases:
            base = self.resolve(b) or ""
            if base in ("torch.Tensor",) or base.startswith("torch._C"):
                self.flag("output_type", f"class {node.name}({base})")
        self.generic_visit(node)

    def visit_Await(self, node: ast.Await) -> None:
        self.flag("thread", "await")
        self.generic_visit(node)

    def visit_Yield(self, node: ast.AST) -> None:
        self.flag("frame_introspection", "generator (yield)")
        self.generic_visit(node)

    visit_YieldFrom = visit_Yield

    def visit_GeneratorExp(self, node: ast.GeneratorExp) -> None:
        # A generator object carries a frame (`gi_frame`); those attributes are refused below, and a
        # generator expression consumed in place (`sum(x for x in ...)`) is ordinary code.
        self.generic_visit(node)

    def visit_Global(self, node: ast.Global) -> None:
        for n in node.names:
            if n in self.modules or n in self.objects:
                self.flag("monkeypatch", f"global {n}")

    visit_Nonlocal = visit_Global

    # -- names and attributes -------------------------------------------------------------------------
    def visit_Name(self, node: ast.Name) -> None:
        n = node.id
        if n.startswith("__") and n.endswith("__") and n not in _DUNDER_NAMES_ALLOWED:
            self.flag("frame_introspection", n)
            return
        if isinstance(node.ctx, ast.Load):
            if n in self.modules and id(node) not in self._attr_heads and id(node) not in self._getattr_heads:
                self.flag("forbidden_introspection", f"module {n} used as a value")
            if n == "getattr" and id(node) not in self._call_funcs and "getattr" not in self.bound:
                self.flag("frame_introspection", "getattr as a value")
            if n not in self.bound and n not in self.modules and n not in self.objects \
                    and n not in _BUILTINS_ALLOWED and n in _ALL_BUILTINS:
                self.flag(_BUILTIN_RULES.get(n, "forbidden_introspection"), n)
            # A name nothing binds is no typo to let through: Triton's interpreter copies its own globals
            # (`np`, `inspect`, its builder) into the module of every kernel it runs.
            if n not in self.bound and n not in self.modules and n not in self.objects and n not in _ALL_BUILTINS \
                    and n not in _DUNDER_NAMES_ALLOWED and id(node) not in self.annotation_names:
                self.flag("import", f"unbound name {n}")
            # A kernel body names no torch at all (the interpreter would run it as Python); host hooks and
            # lambdas get the forward's rules (glue only), checked on every path below.
            if self.jit_depth and (self.modules.get(n, "").startswith("torch")
                                   or self.objects.get(n, "").startswith("torch")):
                self.flag("forbidden_torch_op", "torch in a Triton kernel")

    def visit_Attribute(self, node: ast.Attribute) -> None:
        attr = node.attr
        root = node
        while isinstance(root, ast.Attribute):
            root = root.value
        if isinstance(root, ast.Name):
            self._attr_heads.add(id(root))
        if attr.startswith("__") and attr.endswith("__"):
            if attr not in _DUNDER_ATTRS_ALLOWED:
                self.flag("frame_introspection", f".{attr}")
        elif attr.startswith("_"):
            if not (isinstance(node.value, ast.Name) and node.value.id in ("self", "cls")):
                self.flag("forbidden_introspection", f".{attr}")
        elif attr in _FRAME_ATTRS or attr.startswith(_FRAME_PREFIXES):
            self.flag("frame_introspection", f".{attr}")
        elif attr in ("format", "format_map"):
            # `"{} {}".format` of a literal with plain fields only; any other `.format` reaches attributes
            # through its fields (`"{0.__class__}"`), or is a method value that can be called on any text.
            if not (attr == "format" and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str)
                    and _format_fields_plain(node.value.value)):
                self.flag("forbidden_introspection", f".{attr} with attribute or computed fields")
        else:
            self._check_attr_name(attr, f".{attr}")
        full = self.resolve(node)
        if full is not None:
            self._check_path(full, node)
        self.generic_visit(node)

    def _check_attr_name(self, attr: str, what: str) -> None:
        """An attribute read by name, however it is spelled (`.x`, `getattr(o, "x")`, `case C(x=...)`)."""
        if attr in _TENSOR_METHODS_BANNED and not (attr in ("numpy", "tolist") and self.numpy_ok):
            self.flag(_TENSOR_METHODS_BANNED[attr], what)
        elif not (self.func_stack and self.func_stack[-1] == "__init__") and not self.jit_depth \
                and attr in _TENSOR_COMPUTE_METHODS and what.startswith("getattr"):
            self.flag(f"forbidden_torch_op:{attr}", what)

    def visit_MatchClass(self, node: ast.MatchClass) -> None:
        # A class pattern reads attributes by name (`case torch.Tensor(numpy=f)`) or through the class's
        # `__match_args__`: neither is a kernel's business.
        self.flag("forbidden_introspection", "match class pattern")
        self.generic_visit(node)

    def _check_path(self, full: str, node: ast.AST) -> None:
        """A dotted path through an imported module: only what the tables allow."""
        if self._trusted(full):
            return
        parts = full.split(".")
        head = parts[0]
        in_init = bool(self.func_stack) and self.func_stack[-1] == "__init__"
        if head == "torch":
            self._check_torch(parts, full, in_init)
        elif head == "triton":
            self._check_triton(parts, full)
        elif head == "math":
            if len(parts) > 2 or (len(parts) == 2 and parts[1].startswith("_")):
                self.flag("forbidden_introspection", full)
        elif head == "typing":
            if len(parts) > 1 and parts[1] not in _TYPING_ALLOWED:
                self.flag("forbidden_introspection", full)
        elif head == "os":
            if full not in ("os.environ", "os.getenv", "os.environ.get"):
                self.flag("os", full)

    def _check_torch(self, parts: list[str], full: str, in_init: bool) -> None:
        if len(parts) == 1:
            return
        second = parts[1]
        if second == "from_numpy" and self.numpy_ok:  # a spec that allows NumPy allows its tensors in
            return
        if second in _TORCH_RULES:
            self.flag(_TORCH_RULES[second], full)
            return
        if second in _TORCH_DTYPES or second in _TORCH_GLUE:
            if len(parts) > 2:  # `torch.Tensor.sum(x)`: compute through the class
                self.flag("forbidden_torch_op" if second == "Tensor" else "forbidden_introspection", full)
            return
        if second == "cuda":
            if len(parts) > 2 and parts[2] not in _TORCH_CUDA_ALLOWED:
                self.flag(_TORCH_RULES.get(parts[2], "side_stream" if "tream" in parts[2] or "raph" in parts[2]
                                           else "forbidden_introspection"), full)
            return
        if second == "nn":
            if len(parts) == 2:
                return
            third = parts[2]
            if third == "functional":
                if len(parts) > 3 and not in_init and not self.jit_depth:
                    leaf = parts[3]
                    if leaf != "pad":
                        self.flag(f"forbidden_torch_op:{leaf}", full)
                return
            if third == "init":
                if not in_init:
                    self.flag("forbidden_torch_op:init", full)
                return
            if third in ("modules", "parameter", "utils") or third.startswith("_"):
                self.flag("forbidden_introspection", full)
                return
            if not in_init and third not in _NN_FORWARD_OK and not third[:1].isupper():
                self.flag("forbidden_introspection", full)
            return
        if in_init and len(parts) == 2 and not second.startswith("_") and not _is_module_name("torch", second):
            return  # parameters are built as the reference builds them
        if _is_module_name("torch", second):  # `torch.sys`, `torch.os`: a module is never a value
            self.flag("forbidden_introspection", f"module {full}")
            return
        self.flag(f"forbidden_torch_op:{second}", full)

    def _check_triton(self, parts: list[str], full: str) -> None:
        if len(parts) == 1:
            return
        for mod, names in _TRITON_EXTRA.items():
            n = mod.count(".") + 1
            if ".".join(parts[:n]) == mod:
                if len(parts) > n + 1 or (len(parts) == n + 1 and parts[n] not in names):
                    self.flag("forbidden_introspection", full)
                return
        if parts[1] != "language":
            if parts[1] not in _TRITON_ALLOWED or len(parts) > 2:
                rule = _import_rule(".".join(parts[:2]), ())
                self.flag(rule if rule != "import" else "monkeypatch", full)
            return
        names = _tl_names()
        mod = "triton.language"
        for p in parts[2:]:
            if p in _TL_SUBMODULES.get(mod, ()):
                mod = f"{mod}.{p}"
                continue
            if mod not in names or p not in names[mod]:
                self.flag("forbidden_introspection", full)
                return
            # a language object: its own attributes (`tl.float16.primitive_bitwidth`) carry no route
            return
        if mod not in ("triton.language", "triton.language.math", "triton.language.extra",
                       "triton.language.extra.cuda", "triton.language.extra.libdevice",
                       "triton.language.extra.cuda.libdevice"):
            self.flag("forbidden_introspection", full)

    # -- assignments: no patching or rebinding of anything imported ---------------------------------
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
            if isinstance(root, ast.Name) and (root.id in self.modules or root.id in self.objects
                                               or root.id in self.aliases):
                what = self.resolve(target.value if isinstance(target, ast.Subscript) else target) or root.id
                self.flag("monkeypatch", what)
        if isinstance(target, ast.Name) and (target.id in self.modules or target.id in self.objects
                                             or target.id in _BUILTIN_RULES or target.id in _BUILTINS_ALLOWED):
            self.flag("monkeypatch", f"rebinds {target.id}")

    def visit_Assign(self, node: ast.Assign) -> None:
        # `pl = None` where an optional import failed: a module name may become None, nothing else.
        none = isinstance(node.value, ast.Constant) and node.value.value is None
        for t in node.targets:
            if not (none and isinstance(t, ast.Name) and (t.id in self.modules or t.id in self.objects)):
                self._check_target(t)
        self._alias(node.targets, node.value)
        self.generic_visit(node)

    def _alias(self, targets: list[ast.expr], value: ast.expr | None) -> None:
        """`T = torch.Tensor` makes `T` stand for `torch.Tensor`: what is refused through the path
        (`T.detach = f`, `T.sum(x)`) is refused through the alias."""
        full = self.resolve(value) if value is not None else None
        if full is None:
            return
        if not full.rsplit(".", 1)[-1][:1].isupper():  # classes carry methods to patch; a dtype does not
            return
        for t in targets:
            if isinstance(t, ast.Name) and t.id not in self.modules and t.id not in self.objects:
                self.aliases[t.id] = full

    def visit_NamedExpr(self, node: ast.NamedExpr) -> None:
        self._check_target(node.target)
        self._alias([node.target], node.value)
        self.generic_visit(node)

    def visit_AugAssign(self, node: ast.AugAssign) -> None:
        self._check_target(node.target)
        self.generic_visit(node)

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        self._check_target(node.target)
        self._alias([node.target], node.value)
        self.generic_visit(node)

    def visit_Delete(self, node: ast.Delete) -> None:
        for t in node.targets:
            self._check_target(t)
        self.generic_visit(node)

    def visit_For(self, node: ast.For) -> None:
        self._check_target(node.target)
        self.generic_visit(node)

    def visit_withitem(self, node: ast.withitem) -> None:
        if node.optional_vars is not None:
            self._check_target(node.optional_vars)
        self.generic_visit(node)

    # -- calls ---------------------------------------------------------------------------------------
    def visit_Call(self, node: ast.Call) -> None:
        func = node.func
        in_init = bool(self.func_stack) and self.func_stack[-1] == "__init__"
        if isinstance(func, ast.Name) and func.id == "getattr" and "getattr" not in self.bound:
            name_arg = node.args[1] if len(node.args) > 1 else None
            name = name_arg.value if isinstance(name_arg, ast.Constant) and isinstance(name_arg.value, str) else None
            if name is None or name.startswith("_") or name in _FRAME_ATTRS or name.startswith(_FRAME_PREFIXES) \
                    or name in ("format", "format_map"):
                # a computed name reaches whatever the text hides (`getattr(torch, "_" + "C")`)
                self.flag("frame_introspection", "getattr(..., <computed, private or frame name>)")
            else:
                target = self.resolve(node.args[0]) if node.args else None
                if target is not None:  # `getattr(torch, "mm")` is `torch.mm`
                    self._check_path(f"{target}.{name}", node)
                # `getattr(x, "numpy")` is `x.numpy`: the attribute's own rules, whatever `x` is
                self._check_attr_name(name, f"getattr(..., {name!r})")
        if isinstance(func, ast.Name) and func.id == "hasattr" and "hasattr" not in self.bound:
            name_arg = node.args[1] if len(node.args) > 1 else None
            if not (isinstance(name_arg, ast.Constant) and isinstance(name_arg.value, str)
                    and not name_arg.value.startswith("_")):
                self.flag("frame_introspection", "hasattr(..., <computed or private name>)")
        full = self.resolve(func)
        if full is not None and full.startswith("torch.") and not in_init and not self.jit_depth:
            second = full.split(".")[1]
            if second not in _TORCH_GLUE and second not in _TORCH_DTYPES and second not in _TORCH_SUBMODULES \
                    and not (second == "from_numpy" and self.numpy_ok):
                self.flag(f"forbidden_torch_op:{full.rsplit('.', 1)[-1]}", full)
        if full is not None and full.startswith("os.") and full not in _OS_CALLS:
            self.flag("os", full)
        if full in _OS_CALLS and not (node.args and isinstance(node.args[0], ast.Constant)
                                      and isinstance(node.args[0].value, str)):
            self.flag("os", f"{full}(<computed name>)")
        if isinstance(func, ast.Attribute) and not in_init and not self.jit_depth and full is None \
                and func.attr in _TENSOR_COMPUTE_METHODS and not self._is_builtin_call(func):
            self.flag(f"forbidden_torch_op:{func.attr}", f".{func.attr}()")
        self.generic_visit(node)

    def _is_builtin_call(self, func: ast.Attribute) -> bool:
        """`self.lst.max()` cannot be told from a tensor's; a literal's method (`"a".join`) can."""
        return isinstance(func.value, (ast.Constant, ast.List, ast.Tuple, ast.Dict, ast.Set))


# How deep a candidate's syntax tree may nest: the checker walks it without recursion, and a tree this
# deep is no kernel (a 1,500-term sum nests 1,500 deep; Python's own compiler gives up near 1,000 levels).
MAX_DEPTH = 200
MAX_SOURCE_BYTES = 1 << 20


def source_problem(source: str | bytes) -> str | None:
    """Why a candidate's text cannot be checked as the text Python will run, or None.

    The policy must see exactly what the importer runs. The importer decodes a file by its coding cookie
    (PEP 263: `# -*- coding: utf-7 -*-` hides code from a check of the text decoded any other way), so
    the harness writes every candidate as UTF-8 and refuses any other cookie, any byte that is not
    UTF-8, a lone surrogate (which no encoding writes), NUL bytes and a text over 1 MB. It is decided by
    the importer's own rule (`tokenize.detect_encoding`, the function `importlib` uses) on the bytes
    the harness will write, never raises, and runs whether the static policy is on or off."""
    try:
        if isinstance(source, str):
            try:
                data = source.encode("utf-8")  # a lone surrogate (or surrogateescape'd bytes) fails here
            except UnicodeEncodeError as exc:
                return f"not valid UTF-8 (position {exc.start})"
        else:
            data = bytes(source)
        if len(data) > MAX_SOURCE_BYTES:
            return f"{len(data)} bytes, over the {MAX_SOURCE_BYTES}-byte limit"
        if b"\0" in data:
            return "a NUL byte"
        encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
        if encoding not in ("utf-8", "utf-8-sig"):
            return f"a coding cookie ({encoding}): candidates are UTF-8 without one"
        data.decode(encoding)
    except (SyntaxError, UnicodeError, ValueError, LookupError) as exc:
        return f"not valid UTF-8 ({type(exc).__name__}: {str(exc)[:80]})"
    return None


def decode_source(data: bytes) -> str:
    """A candidate file's bytes as text that never raises: UTF-8, invalid bytes kept as surrogates
    (`surrogateescape`), which `source_problem` then refuses with one line."""
    return data.decode("utf-8", errors="surrogateescape")


def _too_deep(tree: ast.AST, limit: int = MAX_DEPTH) -> bool:
    stack = [(tree, 0)]
    while stack:
        node, depth = stack.pop()
        if depth > limit:
            return True
        stack.extend((child, depth + 1) for child in ast.iter_child_nodes(node))
    return False


def check_source(source: str | bytes, allowed_imports: Iterable[str] = ()) -> list[str]:
    """Violations of the static policy in a candidate's source; empty when it is clean. Never raises:
    a text it cannot check is one violation (`malformed_source`), never an exception in the caller.

    `allowed_imports` extends the import allow-list with trusted packages (a spec's `ALLOWED_IMPORTS`,
    e.g. the case studies' own helpers). A source that does not parse is not a policy matter: the
    harness reports it as a compile error when it imports it.
    """
    problem = source_problem(source)
    if problem is not None:
        return [f"malformed_source:{problem} [policy]"]
    text = source.decode("utf-8-sig") if isinstance(source, bytes) else source
    try:
        try:
            tree = ast.parse(text)
        except (SyntaxError, ValueError):
            return []
        if _too_deep(tree):
            return [f"malformed_source:nesting deeper than {MAX_DEPTH} levels [policy]"]
        return _check_tree(tree, allowed_imports)
    except (RecursionError, MemoryError) as exc:
        return [f"malformed_source:{type(exc).__name__} while checking [policy]"]
    except Exception as exc:  # noqa: BLE001 - a checker bug must reject, never crash the caller or pass
        return [f"malformed_source:the checker failed ({type(exc).__name__}: {str(exc)[:80]}) [policy]"]


def _check_tree(tree: ast.Module, allowed_imports: Iterable[str]) -> list[str]:
    checker = _Checker(tree, allowed_imports)
    # Attribute chains first mark their head names, so a module heading a chain is no bare value.
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            checker._call_funcs.add(id(node.func))
            if node.func.id == "getattr" and node.args and isinstance(node.args[0], ast.Name):
                checker._getattr_heads.add(id(node.args[0]))
        if isinstance(node, ast.Attribute):
            root = node
            while isinstance(root, ast.Attribute):
                root = root.value
            if isinstance(root, ast.Name):
                checker._attr_heads.add(id(root))
    checker.visit(tree)
    if checker.kernels == 0 and not checker.trusted_import:
        checker.flag("no_triton_kernel", "no @triton.jit kernel defined or imported from a trusted package")
    return checker.violations


def allowed_imports_of(spec_path: str) -> list[str] | None:
    """A spec's `ALLOWED_IMPORTS`, read from its text without running it (None: not a literal list, so
    only the server, which loads the spec, can say)."""
    try:
        with open(spec_path, encoding="utf-8") as f:
            tree = ast.parse(f.read())
    except (OSError, SyntaxError, ValueError):
        return None
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "ALLOWED_IMPORTS"
                                                for t in node.targets):
            try:
                value = ast.literal_eval(node.value)
            except ValueError:
                return None
            return [str(v) for v in value] if isinstance(value, (list, tuple)) else None
    return []
