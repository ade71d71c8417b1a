"""Search/replace edits against a parent kernel: parsed from a reply, applied deterministically.

The format (the one aider and OpenEvolve use; small models have seen it):

    <<<<<<< SEARCH
    BLOCK_SIZE = 64
    =======
    BLOCK_SIZE = 256
    >>>>>>> REPLACE

Each SEARCH text must occur exactly once in the parent. It is matched exactly first, then with
trailing whitespace ignored on every line, then with the indentation shifted uniformly (the model
dedented a method body); nothing fuzzier, so an edit either means one place or is refused. An edit
that does not apply is a diagnosis (`edit 2 of 3: SEARCH text not found in the parent`), never a crash.

Region edits are the form a 0.5B model can follow (it ignored the SEARCH/REPLACE format and
rewrote the module, running out of tokens, in the first measurement): the prompt names one part of
the parent (its tunables, one kernel, or `forward`) and the reply is the new version of that part
alone; `apply_region` puts it in place.
"""

from __future__ import annotations

import ast
import re
import textwrap
from dataclasses import dataclass

_BLOCK = re.compile(
    r"^[ \t]*<{5,9}[ \t]*SEARCH[^\n]*\n(?P<search>.*?)^[ \t]*={5,9}[ \t]*\n"
    r"(?P<replace>.*?)^[ \t]*>{5,9}[ \t]*REPLACE[^\n]*$",
    re.S | re.M,
)
_OPEN = re.compile(r"^[ \t]*<{5,9}[ \t]*SEARCH", re.M)


@dataclass(frozen=True)
class Edit:
    search: str
    replace: str


@dataclass(frozen=True)
class EditOutcome:
    """`source` is the edited parent when every edit applied, else None and `diagnosis` says why."""

    source: str | None
    applied: int
    total: int
    diagnosis: str
    notes: tuple[str, ...] = ()


def parse_edits(text: str | None) -> tuple[list[Edit], int]:
    """The complete edit blocks in `text` and how many blocks were opened but never closed."""
    if not text:
        return [], 0
    text = text.replace("\r\n", "\n")
    edits = [Edit(m.group("search"), m.group("replace")) for m in _BLOCK.finditer(text)]
    return edits, max(0, len(_OPEN.findall(text)) - len(edits))


def has_edits(text: str | None) -> bool:
    return bool(text) and bool(_OPEN.search(text or ""))


def apply_edits(parent: str, edits: list[Edit], *, unclosed: int = 0) -> EditOutcome:
    """Apply `edits` in order to `parent`. All or nothing: one edit that does not apply refuses the lot
    (a half-applied change is a program nobody asked for)."""
    n = len(edits)
    if not edits:
        why = "no complete SEARCH/REPLACE block in the reply"
        return EditOutcome(None, 0, 0, why + (f" ({unclosed} left unclosed)" if unclosed else ""))
    src = parent
    notes: list[str] = []
    for i, e in enumerate(edits, 1):
        if not e.search.strip():
            return EditOutcome(None, i - 1, n, f"edit {i} of {n}: empty SEARCH text")
        new, how = _apply_one(src, e)
        if new is None:
            first = next((ln.strip() for ln in e.search.splitlines() if ln.strip()), "")
            return EditOutcome(None, i - 1, n, f"edit {i} of {n}: {how} (SEARCH starts `{first[:70]}`)")
        if how:
            notes.append(f"edit {i}: {how}")
        src = new
    if unclosed:
        notes.append(f"{unclosed} unclosed edit block(s) ignored")
    if src == parent:
        return EditOutcome(None, n, n, f"the {n} edit(s) leave the parent unchanged", tuple(notes))
    return EditOutcome(src, n, n, f"applied {n} edit(s) to the parent", tuple(notes))


def _apply_one(src: str, e: Edit) -> tuple[str | None, str]:
    count = src.count(e.search)
    if count == 1:
        return src.replace(e.search, e.replace, 1), ""
    if count > 1:
        return None, f"SEARCH text occurs {count} times in the parent; it must name one place"
    lines = src.split("\n")
    want = e.search.rstrip("\n").split("\n")
    repl = e.replace.rstrip("\n").split("\n") if e.replace.strip() else []
    hits = _find_lines(lines, want, shift=False)
    how = "matched with trailing whitespace ignored"
    if not hits:
        hits = _find_lines(lines, want, shift=True)
        how = "matched with the indentation shifted"
    if len(hits) != 1:
        if len(hits) > 1:
            return None, f"SEARCH text occurs {len(hits)} times in the parent; it must name one place"
        return None, "SEARCH text not found in the parent"
    start, shift = hits[0]
    if shift > 0:
        repl = [(" " * shift + ln) if ln.strip() else ln for ln in repl]
    elif shift < 0:
        repl = [ln[-shift:] if ln[: -shift].strip() == "" else ln.lstrip() for ln in repl]
    return "\n".join(lines[:start] + repl + lines[start + len(want) :]), how


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" "))


def _find_lines(lines: list[str], want: list[str], *, shift: bool) -> list[tuple[int, int]]:
    """Start lines where `want` matches (trailing whitespace ignored; with `shift`, every non-blank line
    moved by the same number of spaces), with that shift."""
    hits: list[tuple[int, int]] = []
    w = [ln.rstrip() for ln in want]
    first = next((i for i, ln in enumerate(w) if ln.strip()), None)
    if first is None:
        return hits
    for start in range(len(lines) - len(w) + 1):
        got = [ln.rstrip() for ln in lines[start : start + len(w)]]
        if not shift:
            if got == w:
                hits.append((start, 0))
            continue
        delta = _indent(got[first]) - _indent(w[first])
        ok = all(
            (not a.strip() and not b.strip()) or (a.strip() == b.strip() and _indent(a) - _indent(b) == delta)
            for a, b in zip(got, w, strict=True)
        )
        if ok:
            hits.append((start, delta))
    return hits


# -- region edits: the model rewrites one named part of the parent ----------------------------------
@dataclass(frozen=True)
class Region:
    """One part of a parent a weak model can rewrite whole: its module-level tunables block, one
    `@triton.jit` kernel, or `ModelNew.forward`. `text` is the parent's exact lines."""

    name: str
    kind: str  # "tunables" | "kernel" | "forward"
    text: str


def editable_regions(parent: str) -> list[Region]:
    """The parent's regions in a fixed order (tunables, kernels, forward); [] when it does not parse."""
    try:
        tree = ast.parse(parent)
    except (SyntaxError, ValueError):
        return []
    lines = parent.split("\n")
    out: list[Region] = []
    consts = [n for n in tree.body if isinstance(n, ast.Assign) and _upper_targets(n)]
    if consts:
        # the first run of consecutive constant assignments (TUNABLES and its NAME = value lines)
        run = [consts[0]]
        for node in consts[1:]:
            if tree.body.index(node) == tree.body.index(run[-1]) + 1:
                run.append(node)
            else:
                break
        out.append(Region("the tunable constants", "tunables", _segment(lines, run[0], run[-1])))
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and any(_is_jit(d) for d in node.decorator_list):
            out.append(Region(f"the kernel {node.name}", "kernel", _segment(lines, node, node)))
    cls = next((n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "ModelNew"), None)
    fwd = next((n for n in cls.body if isinstance(n, ast.FunctionDef) and n.name == "forward"), None) if cls else None
    if fwd is not None:
        out.append(Region("ModelNew.forward", "forward", _segment(lines, fwd, fwd)))
    return out


def apply_region(parent: str, region: Region, code: str) -> EditOutcome:
    """Replace `region` in `parent` with `code` (the model's new version of it), re-indented to the
    region's indentation. The code must be the same kind of thing: constants for the tunables, a
    function of the same name for a kernel or forward."""
    code = textwrap.dedent(code).strip("\n")
    try:
        tree = ast.parse(code)
    except SyntaxError as exc:
        return EditOutcome(None, 0, 1, f"the reply for {region.name} does not parse: line {exc.lineno}: {exc.msg}")
    if region.kind == "tunables":
        if not tree.body or not all(isinstance(n, ast.Assign) and _upper_targets(n) for n in tree.body):
            return EditOutcome(None, 0, 1, f"the reply for {region.name} is not only NAME = value lines")
    else:
        want = region.name.split()[-1].split(".")[-1]
        defs = [n for n in tree.body if isinstance(n, ast.FunctionDef)]
        if [d.name for d in defs] != [want] or len(tree.body) != len(defs) + _n_imports(tree):
            got = ", ".join(d.name for d in defs) or "no function"
            return EditOutcome(None, 0, 1, f"expected one function {want}, the reply defines {got}")
        code = "\n".join(ln for ln in code.split("\n") if not ln.startswith(("import ", "from ")))
        code = code.strip("\n")
        if region.kind == "kernel" and not any(_is_jit(d) for d in defs[0].decorator_list):
            # the reply kept the body and dropped the decorator: the parent's decorator stays
            decorators = [ln for ln in region.text.split("\n") if ln.lstrip().startswith("@")]
            code = "\n".join(decorators + [code])
    indent = region.text[: len(region.text) - len(region.text.lstrip(" "))]
    new = "\n".join((indent + ln) if ln.strip() else ln for ln in code.split("\n"))
    if parent.count(region.text) != 1:
        return EditOutcome(None, 0, 1, f"{region.name} is not unique in the parent")
    out = parent.replace(region.text, new, 1)
    if out == parent:
        return EditOutcome(None, 1, 1, f"the reply for {region.name} is the same as the parent's")
    return EditOutcome(out, 1, 1, f"replaced {region.name} of the parent")


def _upper_targets(node: ast.Assign) -> bool:
    return all(isinstance(t, ast.Name) and t.id.isupper() for t in node.targets)


def _is_jit(dec: ast.expr) -> bool:
    target = dec.func if isinstance(dec, ast.Call) else dec
    return isinstance(target, ast.Attribute) and target.attr in ("jit", "autotune", "heuristics")


def _n_imports(tree: ast.Module) -> int:
    return sum(isinstance(n, (ast.Import, ast.ImportFrom)) for n in tree.body)


def _segment(lines: list[str], first: ast.stmt, last: ast.stmt) -> str:
    start = min([first.lineno] + [d.lineno for d in getattr(first, "decorator_list", [])]) - 1
    return "\n".join(lines[start : last.end_lineno])
