"""Find the candidate kernel in a model's reply, however badly the reply is formed.

Weak models wrap code in chatter, forget the fences, open a fence and run out of tokens, or give
two versions. `extract_code` never raises: every outcome is a `CodeExtraction` whose `diagnosis`
says what was found and what was guessed, so a failed step becomes a recorded node with a reason.

Selection rules, in order:
1. fenced blocks (``` or ~~~, any info string): the block that defines `class ModelNew` (the last
   one that parses when there are several: models put the corrected version last); else the longest
   python-like block. Top-level helpers (`@triton.jit` kernels, constants) that the chosen block uses
   but only another block defines are prepended, since weak models often split kernel and module.
2. no fences: bare Python that contains `class ModelNew` or `@triton.jit`, cut from the first
   code-looking line, trimming trailing chatter until it parses.
3. otherwise no code.
An unclosed fence marks the reply `truncated`; the code is still parsed and returned.
"""

from __future__ import annotations

import ast
import builtins
import logging
import re
import textwrap
from dataclasses import dataclass, field

log = logging.getLogger(__name__)

_FENCE_OPEN = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>`{3,}|~{3,})[ \t]*(?P<info>[^`]*?)[ \t]*$")
_INLINE_OPEN = re.compile(r"(?P<fence>`{3,})[ \t]*(?P<info>[A-Za-z0-9_+.-]*)[ \t]*$")
_MODELNEW = re.compile(r"^[ \t]*class[ \t]+ModelNew\b", re.M)
_TRITON_JIT = re.compile(r"^[ \t]*@triton\.(jit|autotune|heuristics)\b", re.M)
_THINK = re.compile(r"<think>.*?</think>", re.S | re.I)
_CODE_START = re.compile(
    r"^(import\s+\w|from\s+[\w.]+\s+import\s|@\w|def\s+\w|class\s+\w|[A-Z_][A-Z0-9_]*\s*=|#)"
)
_PY_LANGS = {"", "python", "py", "python3", "py3", "triton", "pytorch", "torch", "ipython", "python-triton"}


@dataclass(frozen=True)
class CodeExtraction:
    """What the parser found. `code` is None only when there is nothing code-like to try."""

    code: str | None
    diagnosis: str
    n_blocks: int
    truncated: bool
    syntax_ok: bool = False
    defines_model_new: bool = False
    syntax_error: str | None = None
    notes: tuple[str, ...] = field(default=())


@dataclass
class _Block:
    index: int  # 1-based position among the reply's fenced blocks
    lang: str
    code: str
    closed: bool

    @property
    def python_like(self) -> bool:
        return self.lang.lower() in _PY_LANGS


def extract_code(text: str | None, *, finish_reason: str | None = None) -> CodeExtraction:
    """Extract the candidate source from `text`. Never raises.

    `finish_reason="length"` (the server says the reply hit max_tokens) marks the result truncated
    even when the fences happen to be balanced.
    """
    try:
        return _extract(text, finish_reason)
    except Exception as exc:  # noqa: BLE001 - a parser bug must become a recorded failure, not a crash
        log.exception("extract_code failed")
        return CodeExtraction(None, f"parser error ({type(exc).__name__}: {exc})", 0, False)


def _extract(text: str | None, finish_reason: str | None) -> CodeExtraction:
    if not isinstance(text, str) or not text.strip():
        return CodeExtraction(None, "empty response", 0, finish_reason == "length")
    text = text.replace("\r\n", "\n")
    if re.search(r"<think>", text, re.I):
        stripped = _THINK.sub("", text)
        if re.search(r"<think>", stripped, re.I):  # unclosed reasoning: the answer never started
            stripped = re.sub(r"<think>.*", "", stripped, flags=re.S | re.I)
        text = stripped
    length_cut = finish_reason == "length"

    blocks = split_fenced_blocks(text)
    notes: list[str] = []
    if blocks and not any(b.python_like or _MODELNEW.search(b.code) for b in blocks):
        # only shell/json/... blocks: the kernel, if any, is bare text around them
        bare = _from_bare_text(_remove_fenced(text), length_cut, ignored_blocks=len(blocks))
        if bare.code is not None:
            return bare
    if blocks:
        return _from_blocks(blocks, length_cut, notes)
    return _from_bare_text(text, length_cut)


def _remove_fenced(text: str) -> str:
    return re.sub(r"^[ \t]*(`{3,}|~{3,}).*?^[ \t]*\1[ \t]*$", "", text, flags=re.S | re.M)


def split_fenced_blocks(text: str) -> list[_Block]:
    """Fenced code blocks in reading order; an unclosed last fence yields a block with closed=False."""
    blocks: list[_Block] = []
    lines = text.split("\n")
    i = 0
    while i < len(lines):
        line = lines[i]
        m = _FENCE_OPEN.match(line)
        if m:
            fence, info = m.group("fence"), m.group("info")
        else:
            # "Here is the code: ```python" (fence opened at the end of a prose line)
            m = _INLINE_OPEN.search(line)
            if not m or line.count("`") != len(m.group("fence")):
                i += 1
                continue
            fence, info = m.group("fence"), m.group("info")
        lang = info.split()[0] if info.split() else ""
        lang = lang.strip("{}.").lower()
        body: list[str] = []
        closed = False
        j = i + 1
        while j < len(lines):
            cur = lines[j]
            s = cur.strip()
            if s.startswith(fence[0] * 3) and set(s) <= {fence[0]} and len(s) >= len(fence):
                closed = True
                break
            if fence[0] == "`" and s.endswith("```") and not s.startswith("`"):
                # "    return out```": the closing fence glued to the last code line
                n_ticks = len(s) - len(s.rstrip("`"))
                body.append(cur.rstrip()[:-n_ticks])
                closed = True
                break
            body.append(cur)
            j += 1
        code = textwrap.dedent("\n".join(body)).strip("\n")
        if lang in ("", "python") and code.startswith("python\n"):  # ```\npython\n... (label on its own line)
            code = code[len("python\n") :]
        blocks.append(_Block(index=len(blocks) + 1, lang=lang, code=code, closed=closed))
        i = j + 1
    return [b for b in blocks if b.code.strip()]


def _check(code: str) -> tuple[bool, str | None]:
    try:
        ast.parse(code)
    except SyntaxError as exc:
        return False, f"line {exc.lineno}: {exc.msg}"
    except (ValueError, MemoryError, RecursionError) as exc:  # null bytes, absurd nesting
        return False, f"{type(exc).__name__}: {exc}"
    return True, None


def _from_blocks(blocks: list[_Block], length_cut: bool, notes: list[str]) -> CodeExtraction:
    n = len(blocks)
    with_model = [b for b in blocks if _MODELNEW.search(b.code)]
    if with_model:
        parsed = [b for b in with_model if _check(b.code)[0]]
        chosen = (parsed or with_model)[-1]
        if len(with_model) > 1:
            notes.append(
                f"{len(with_model)} blocks define ModelNew; took block {chosen.index} "
                f"(the last {'that parses' if parsed else 'one'})"
            )
        elif n > 1:
            notes.append(f"{n} code blocks; took block {chosen.index}, the one that defines ModelNew")
    else:
        python_blocks = [b for b in blocks if b.python_like] or blocks
        chosen = max(python_blocks, key=lambda b: len(b.code))
        notes.append(
            "no block defines class ModelNew"
            + (f"; took the longest python block ({chosen.index} of {n})" if n > 1 else "")
        )
    code = chosen.code
    merged = _merge_helpers(chosen, blocks)
    if merged is not None:
        code, used = merged
        notes.append(
            f"prepended definitions from block(s) {', '.join(map(str, used))} that block {chosen.index} uses"
        )
    truncated = not chosen.closed or length_cut
    if not chosen.closed:
        notes.insert(0, f"output truncated: code fence of block {chosen.index} never closed")
    elif length_cut:
        notes.insert(0, "output truncated: the reply hit max_tokens")
    return _finish(code, notes, n, truncated)


def _from_bare_text(text: str, length_cut: bool, ignored_blocks: int = 0) -> CodeExtraction:
    model_match = _MODELNEW.search(text)
    jit_match = _TRITON_JIT.search(text)
    if not model_match and not jit_match:
        return CodeExtraction(
            None,
            f"no code block and no 'class ModelNew' or '@triton.jit' in the reply ({len(text)} chars)",
            0,
            length_cut,
        )
    lines = text.split("\n")
    anchor = text[: (model_match or jit_match).start()].count("\n")
    start = next((i for i, line in enumerate(lines[: anchor + 1]) if _CODE_START.match(line)), anchor)
    end = len(lines)
    while end > anchor and not lines[end - 1].strip():
        end -= 1
    fences = (
        f"no python code fences ({ignored_blocks} non-python block(s) ignored)"
        if ignored_blocks
        else "no code fences"
    )
    notes = [
        f"{fences}; took bare code from the reply"
        + (f" (skipped {start} leading line(s) of prose)" if start else "")
    ]
    best = "\n".join(lines[start:end])
    if not _check(best)[0]:
        # chatter after the code: drop trailing lines until the rest parses (never past the anchor)
        for cut in range(end - 1, anchor, -1):
            candidate = "\n".join(lines[start:cut])
            if _MODELNEW.search(candidate) or not model_match:
                if _check(candidate)[0]:
                    notes.append(f"dropped {end - cut} trailing line(s) that do not parse")
                    best = candidate
                    break
    if length_cut:
        notes.insert(0, "output truncated: the reply hit max_tokens")
    return _finish(textwrap.dedent(best).strip("\n"), notes, ignored_blocks, length_cut)


def _finish(code: str, notes: list[str], n_blocks: int, truncated: bool) -> CodeExtraction:
    ok, err = _check(code)
    has_model = bool(_MODELNEW.search(code))
    if not ok:
        notes.append(f"syntax error at {err}")
    if not has_model:
        notes.append("the code does not define class ModelNew")
    # no notes at all means: one closed block, defining ModelNew, that parses
    diagnosis = "; ".join(notes) if notes else "ok: one code block defining ModelNew"
    return CodeExtraction(
        code=code,
        diagnosis=diagnosis,
        n_blocks=n_blocks,
        truncated=truncated,
        syntax_ok=ok,
        defines_model_new=has_model,
        syntax_error=err,
        notes=tuple(notes),
    )


def _top_level_defs(tree: ast.Module) -> set[str]:
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for t in targets:
                names.update(n.id for n in ast.walk(t) if isinstance(n, ast.Name))
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
    return names


def _bound_names(tree: ast.AST) -> set[str]:
    """Every name the code binds anywhere (assignments, parameters, defs, imports, handlers)."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
            names.add(node.id)
        elif isinstance(node, ast.arg):
            names.add(node.arg)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, ast.ExceptHandler) and node.name:
            names.add(node.name)
    return names


def _merge_helpers(chosen: _Block, blocks: list[_Block]) -> tuple[str, list[int]] | None:
    """Prepend other blocks whose top-level definitions the chosen block uses but lacks."""
    try:
        tree = ast.parse(chosen.code)
    except (SyntaxError, ValueError):
        return None
    used = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
    missing = used - _bound_names(tree) - set(dir(builtins))
    if not missing:
        return None
    parts: list[str] = []
    used_blocks: list[int] = []
    for b in blocks:
        if b is chosen or not b.python_like or _MODELNEW.search(b.code):
            continue
        try:
            other = _top_level_defs(ast.parse(b.code))
        except (SyntaxError, ValueError):
            continue
        provides = (other - {"torch", "triton", "tl", "nn", "F", "math", "np"}) & missing
        if provides:
            parts.append(b.code)
            used_blocks.append(b.index)
            missing -= other
    if not parts:
        return None
    return "\n\n\n".join(parts + [chosen.code]), used_blocks
