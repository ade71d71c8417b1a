"""Static repairs of a model's candidate before anything runs it: mechanical fixes that never change
what the code computes, each one recorded as a line (`repaired: added import triton.language as tl`).

Weak local models lose most proposals to mistakes a parser can see (issue 19: 0 of 12 correct on an
elementwise spec with a 0.5B model): prose after an unclosed fence, missing imports, example usage
that crashes at import, `@triton.jit` on a method. The repairs, in the order they run:

1. cut to the longest prefix that parses when the tail does not (prose after the code), but only
   when the prefix keeps every class and kernel the whole text defines;
2. move a `@triton.jit` off a method: a kernel method becomes a module-level function (`self.k[grid]`
   launches become `k[grid]`); on `forward`/`__init__` (host code) the decorator is dropped;
3. remove `if __name__ == "__main__":` blocks and top-level example usage (calls, asserts, loops,
   assignments of call results that no function or class reads), and the reference's input builders
   (`get_inputs`, `get_init_inputs`) copied into the candidate when nothing else calls them: the
   harness takes the inputs from the spec, and their `torch.randn` breaks the policy;
4. add the standard imports the code uses but never binds (torch, torch.nn as nn, torch.nn.functional
   as F, triton, triton.language as tl, math).

    fixed = repair_source(code)
    fixed.source, fixed.repairs   # ("...", ("repaired: added import triton", ...))
"""

from __future__ import annotations

import ast
import re
import textwrap
from dataclasses import dataclass

from workbench.llm.parse import _bound_names  # one definition of "names the code binds" for both

# name the code uses -> the import line that binds it
STANDARD_IMPORTS: dict[str, str] = {
    "torch": "import torch",
    "nn": "import torch.nn as nn",
    "F": "import torch.nn.functional as F",
    "triton": "import triton",
    "tl": "import triton.language as tl",
    "math": "import math",
}
_IMPORT_ORDER = ("math", "torch", "nn", "F", "triton", "tl")
_HOST_METHODS = frozenset({"forward", "__init__", "__call__"})
_SPEC_FUNCTIONS = frozenset({"get_inputs", "get_init_inputs"})
_JIT_NAMES = frozenset({"jit", "autotune", "heuristics"})


@dataclass(frozen=True)
class Repaired:
    """The repaired source and what was done to it (empty `repairs`: nothing needed fixing)."""

    source: str
    repairs: tuple[str, ...] = ()

    @property
    def changed(self) -> bool:
        return bool(self.repairs)


def repair_source(source: str) -> Repaired:
    """Apply every static repair that applies to `source`. Never raises; code that cannot be parsed
    even after the prefix cut comes back with only the repairs that could be made."""
    repairs: list[str] = []
    src = source.replace("\r\n", "\n")
    for step in (_cut_to_parsing_prefix, _move_jit_off_methods, _remove_example_usage, _add_missing_imports):
        try:
            src, done = step(src)
        except (SyntaxError, ValueError, RecursionError):
            continue  # the code does not parse: the later checks report the syntax error itself
        repairs.extend(done)
    return Repaired(src, tuple(repairs))


# -- 1. prose after the code ----------------------------------------------------------------------
def _parses(code: str) -> bool:
    try:
        ast.parse(code)
    except (SyntaxError, ValueError, RecursionError):
        return False
    return True


def _defined_names(code: str) -> set[str]:
    """Classes and functions a (possibly broken) text defines at the top level, read by regex."""
    return set(re.findall(r"^(?:class|def)\s+(\w+)", code, re.M))


def _cut_to_parsing_prefix(src: str) -> tuple[str, list[str]]:
    if _parses(src):
        return src, []
    lines = src.split("\n")
    wanted = _defined_names(src)
    for end in range(len(lines) - 1, 0, -1):
        prefix = "\n".join(lines[:end]).rstrip()
        if not prefix or not _parses(prefix):
            continue
        if not wanted <= _defined_names(prefix):
            break  # the cut would drop a definition: the syntax error is in the code, not after it
        cut = len(lines) - end
        first = next((ln.strip() for ln in lines[end:] if ln.strip()), "")
        return prefix + "\n", [f"repaired: cut {cut} trailing line(s) that do not parse (from `{first[:60]}`)"]
    return src, []


# -- 2. @triton.jit on a method ---------------------------------------------------------------------
def _is_jit_decorator(dec: ast.expr) -> bool:
    target = dec.func if isinstance(dec, ast.Call) else dec
    if isinstance(target, ast.Attribute):
        return target.attr in _JIT_NAMES and isinstance(target.value, ast.Name) and target.value.id == "triton"
    return isinstance(target, ast.Name) and target.id == "jit"


def _move_jit_off_methods(src: str) -> tuple[str, list[str]]:
    tree = ast.parse(src)
    for cls in [n for n in tree.body if isinstance(n, ast.ClassDef)]:
        for fn in cls.body:
            if isinstance(fn, ast.FunctionDef) and any(_is_jit_decorator(d) for d in fn.decorator_list):
                new, note = _fix_jit_method(src, cls, fn)
                rest, more = _move_jit_off_methods(new)  # line numbers moved: re-parse for the next one
                return rest, [note, *more]
    return src, []


def _fix_jit_method(src: str, cls: ast.ClassDef, fn: ast.FunctionDef) -> tuple[str, str]:
    lines = src.split("\n")
    if fn.name in _HOST_METHODS or not _uses_tl(fn):
        # host code: the decorator is the mistake, the body is what the model meant
        for dec in sorted((d for d in fn.decorator_list if _is_jit_decorator(d)), key=lambda d: -d.lineno):
            del lines[dec.lineno - 1 : dec.end_lineno]
        return "\n".join(lines), f"repaired: removed @triton.jit from the method {cls.name}.{fn.name} (host code)"
    start = min(d.lineno for d in fn.decorator_list) - 1
    block = textwrap.dedent("\n".join(lines[start : fn.end_lineno]))
    block = "\n".join(ln for ln in block.split("\n") if ln.strip() not in ("@staticmethod", "@classmethod"))
    first_arg = fn.args.args[0].arg if fn.args.args else None
    if first_arg in ("self", "cls") and not _reads_name(fn, first_arg):
        block = re.sub(rf"(def\s+{fn.name}\s*\(\s*){first_arg}\s*,?\s*", r"\1", block, count=1)
    after = fn.end_lineno
    if after < len(lines) and not lines[after].strip() and (start == 0 or not lines[start - 1].strip()):
        after += 1  # do not leave two blank lines where the method was
    body = lines[:start] + lines[after:]
    if len(cls.body) == 1:
        body.insert(start, " " * fn.col_offset + "pass")  # the class kept no other statement
    cls_start = min([cls.lineno] + [d.lineno for d in cls.decorator_list]) - 1
    out = "\n".join(body[:cls_start] + block.split("\n") + ["", ""] + body[cls_start:])
    out = re.sub(rf"\b(?:self|{cls.name})\.{fn.name}\b", fn.name, out)
    return out, f"repaired: moved the @triton.jit method {cls.name}.{fn.name} to a module-level kernel"


def _uses_tl(fn: ast.FunctionDef) -> bool:
    return any(
        isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and n.value.id == "tl" for n in ast.walk(fn)
    )


def _reads_name(fn: ast.FunctionDef, name: str) -> bool:
    return any(isinstance(n, ast.Name) and n.id == name for stmt in fn.body for n in ast.walk(stmt))


# -- 3. example usage ---------------------------------------------------------------------------------
def _is_main_guard(node: ast.stmt) -> bool:
    if not isinstance(node, ast.If) or not isinstance(node.test, ast.Compare):
        return False
    names = [node.test.left, *node.test.comparators]
    return any(isinstance(n, ast.Name) and n.id == "__name__" for n in names)


def _names_read_by_definitions(tree: ast.Module) -> set[str]:
    """Names the functions and classes read, and (to a fixpoint) what the constants they read read."""
    out: set[str] = set()
    assigns: list[tuple[set[str], set[str]]] = []
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            # free names only: a parameter `x` of forward does not keep a top-level `x = torch.randn(..)`
            loaded = {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
            out |= loaded - (_bound_names(node) - {node.name})
        elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)) and node.value is not None:
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            bound = {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}
            assigns.append((bound, {n.id for n in ast.walk(node.value) if isinstance(n, ast.Name)}))
    grew = True
    while grew:
        grew = False
        for bound, reads in assigns:
            if bound & out and not reads <= out:
                out |= reads
                grew = True
    return out


def _usage_reason(node: ast.stmt, read: set[str], dropped: set[str]) -> str | None:
    """Why a top-level statement is example usage, or None when it must stay."""
    if _is_main_guard(node):
        return 'the `if __name__ == "__main__":` block'
    if isinstance(node, ast.FunctionDef) and node.name in _SPEC_FUNCTIONS and node.name not in read:
        return f"the reference's {node.name}() copied into the candidate"
    if isinstance(node, ast.Expr):
        if isinstance(node.value, ast.Constant):
            return None  # a docstring or a bare string
        return "example usage"
    if isinstance(node, (ast.Assert, ast.For, ast.While, ast.With, ast.AsyncFor, ast.AsyncWith)):
        return "example usage"
    if isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        bound = {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}
        if not bound or bound & read:
            return None  # a constant or object the module's definitions use
        value = node.value
        used = {n.id for n in ast.walk(value) if isinstance(n, ast.Name)} if value is not None else set()
        if value is not None and (any(isinstance(n, ast.Call) for n in ast.walk(value)) or used & dropped):
            return "example usage"
    return None


def _remove_example_usage(src: str) -> tuple[str, list[str]]:
    tree = ast.parse(src)
    read = _names_read_by_definitions(tree)
    lines = src.split("\n")
    dropped: set[str] = set()
    spans: list[tuple[int, int, str]] = []
    for node in tree.body:
        why = _usage_reason(node, read, dropped)
        if why is None:
            continue
        for t in ast.walk(node):
            if isinstance(t, ast.Name) and isinstance(t.ctx, ast.Store):
                dropped.add(t.id)
        spans.append((node.lineno, node.end_lineno or node.lineno, why))
    if not spans:
        return src, []
    notes = []
    for start, end, why in reversed(spans):
        first = lines[start - 1].strip()
        del lines[start - 1 : end]
        notes.append(f"repaired: removed {why} at line {start} (`{first[:60]}`)")
    out = re.sub(r"\n{3,}$", "\n", "\n".join(lines).rstrip() + "\n")
    return out, notes[::-1]


# -- 4. missing imports -------------------------------------------------------------------------------
def _add_missing_imports(src: str) -> tuple[str, list[str]]:
    tree = ast.parse(src)
    used = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
    missing = [name for name in _IMPORT_ORDER if name in used and name not in _bound_names(tree)]
    if not missing:
        return src, []
    lines = src.split("\n")
    at = _import_insertion_line(tree)
    new = [STANDARD_IMPORTS[name] for name in missing]
    gap = [""] if at < len(lines) and lines[at].strip() and not lines[at].startswith(("import ", "from ")) else []
    out = "\n".join(lines[:at] + new + gap + lines[at:])
    return out, [f"repaired: added {line}" for line in new]


def _import_insertion_line(tree: ast.Module) -> int:
    """After the module docstring and any `from __future__` imports (0-based line index)."""
    at = 0
    for node in tree.body:
        is_doc = isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and at == 0
        is_future = isinstance(node, ast.ImportFrom) and node.module == "__future__"
        if is_doc or is_future:
            at = node.end_lineno or node.lineno
        else:
            break
    return at
