"""The knowledge base's source: markdown sections we write (retrieval/corpus/*.md) and code samples
read from the project's own kernels (case_studies/*/kernel.py, examples/**/*.py) at build time.

Markdown format: every `## Title` is a section, and the line after it carries its tags:

    ## Mask every load and store at the tensor boundary
    <!-- id: mask-boundary | level: general | platform: any | arch: any | topic: masking, correctness -->
"""

from __future__ import annotations

import ast
import hashlib
import logging
import re
from dataclasses import dataclass, field
from pathlib import Path

from retrieval.tags import LEVELS, PLATFORMS, normalize_arch

log = logging.getLogger(__name__)

REPO_ROOT = Path(__file__).resolve().parent.parent
CORPUS_DIR = Path(__file__).resolve().parent / "corpus"
# Globs (relative to the repository root) of the project's own kernels indexed as code samples.
CODE_SAMPLE_GLOBS: tuple[str, ...] = ("case_studies/*/kernel.py", "examples/*.py", "examples/**/*.py")

_HEADING = re.compile(r"^## +(.+?)\s*$")
_TAGLINE = re.compile(r"^<!--\s*(.*?)\s*-->\s*$")


class CorpusError(ValueError):
    """A corpus file breaks the format (missing or bad tag line, duplicate id)."""


@dataclass(frozen=True)
class Section:
    id: str
    title: str
    level: str
    platform: str
    archs: tuple[str, ...]
    topics: tuple[str, ...]
    text: str
    path: str  # relative to the repository root
    kind: str = "doc"  # "doc" | "code"
    header: str = ""  # code samples: the module docstring, kept with every chunk
    extra: dict = field(default_factory=dict, compare=False, hash=False)

    @property
    def tags(self) -> dict[str, object]:
        return {
            "level": self.level,
            "platform": self.platform,
            "arch": list(self.archs),
            "topic": list(self.topics),
        }


def _parse_tagline(line: str, where: str) -> dict[str, str]:
    m = _TAGLINE.match(line.strip())
    if not m:
        raise CorpusError(f"{where}: expected a tag line '<!-- id: ... | level: ... -->' after the heading")
    out: dict[str, str] = {}
    for part in m.group(1).split("|"):
        if ":" not in part:
            raise CorpusError(f"{where}: malformed tag {part!r}")
        k, v = part.split(":", 1)
        out[k.strip()] = v.strip()
    for key in ("id", "level", "platform", "arch", "topic"):
        if key not in out:
            raise CorpusError(f"{where}: tag line lacks {key!r}")
    if out["level"] not in LEVELS:
        raise CorpusError(f"{where}: level {out['level']!r} not in {LEVELS}")
    if out["platform"] not in PLATFORMS:
        raise CorpusError(f"{where}: platform {out['platform']!r} not in {PLATFORMS}")
    return out


def parse_markdown(text: str, path: str) -> list[Section]:
    lines = text.splitlines()
    sections: list[Section] = []
    i = 0
    while i < len(lines):
        m = _HEADING.match(lines[i])
        if not m:
            i += 1
            continue
        title = m.group(1)
        where = f"{path}:{i + 1}"
        if i + 1 >= len(lines):
            raise CorpusError(f"{where}: heading without a tag line")
        tags = _parse_tagline(lines[i + 1], where)
        j = i + 2
        while j < len(lines) and not _HEADING.match(lines[j]):
            j += 1
        body = "\n".join(lines[i + 2 : j]).strip()
        if not body:
            raise CorpusError(f"{where}: section {tags['id']!r} has no text")
        archs = tuple(normalize_arch(a) for a in tags["arch"].split(","))
        sections.append(
            Section(
                id=tags["id"],
                title=title,
                level=tags["level"],
                platform=tags["platform"],
                archs=archs,
                topics=tuple(t.strip() for t in tags["topic"].split(",") if t.strip()),
                text=body,
                path=path,
            )
        )
        i = j
    return sections


def load_markdown_sections(corpus_dir: Path = CORPUS_DIR) -> list[Section]:
    out: list[Section] = []
    for p in sorted(corpus_dir.glob("*.md")):
        out.extend(parse_markdown(p.read_text(encoding="utf-8"), _rel(p)))
    return out


# Keyword -> topic, used to say what a code sample demonstrates (its tags and its embedding text).
_CODE_TOPICS: tuple[tuple[str, str], ...] = (
    (r"tl\.dot\b", "gemm"),
    (r"atomic_(add|max|min|cas|xchg)", "atomics"),
    (r"searchsorted|bucketize|binary search", "bucketize"),
    (r"tl\.(sum|max|min|reduce)\(", "reduction"),
    (r"offsets?\b.*jagged|jagged|ragged|lengths", "jagged"),
    (r"autotune|TUNABLES", "autotune"),
    (r"\bmask\s*=", "masking"),
    (r"conv", "convolution"),
    (r"softmax", "softmax"),
    (r"rms_?norm|layer_?norm", "normalization"),
    (r"gelu|relu|sigmoid|silu", "activation"),
    (r"make_tensor_descriptor|TensorDescriptor", "tma"),
    (r"waves_per_eu", "amd-tuning"),
    (r"embedding|gather", "gather"),
    (r"PROBES", "probes"),
    (r"int64", "int64-offsets"),
)


def _infer_code_tags(src: str) -> tuple[str, tuple[str, ...], tuple[str, ...]]:
    topics = tuple(dict.fromkeys(t for pat, t in _CODE_TOPICS if re.search(pat, src, re.I)))
    if "waves_per_eu" in src or "matrix_instr_nonkdim" in src:
        return "rocm", ("gfx942",), topics
    if "make_tensor_descriptor" in src or "TensorDescriptor" in src:
        return "cuda", ("sm_90",), topics
    return "any", ("any",), topics


def _code_chunks(src: str) -> tuple[str, list[tuple[str, str]]]:
    """Split a module into (docstring, [(name, source of each top-level def/class)]). Falls back to
    one chunk with the whole file when it does not parse (a half-written kernel is still searchable)."""
    try:
        tree = ast.parse(src)
    except SyntaxError:
        return "", [("module", src)]
    doc = ast.get_docstring(tree) or ""
    lines = src.splitlines()
    parts: list[tuple[str, str]] = []
    preamble: list[str] = []
    for node in tree.body:
        start = min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])]) - 1
        seg = "\n".join(lines[start : node.end_lineno])
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            parts.append((node.name, seg))
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            preamble.append(seg)  # TUNABLES and module constants say what the kernel exposes
    if preamble:
        parts.insert(0, ("constants", "\n".join(preamble)))
    return doc, parts or [("module", src)]


def load_code_sections(root: Path = REPO_ROOT, globs: tuple[str, ...] = CODE_SAMPLE_GLOBS) -> list[Section]:
    files: dict[str, Path] = {}
    for g in globs:
        for p in sorted(root.glob(g)):
            if p.is_file() and "__pycache__" not in p.parts and p.name != "__init__.py":
                files[_rel(p, root)] = p
    out: list[Section] = []
    for rel, p in sorted(files.items()):
        try:
            src = p.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            log.warning("code sample %s skipped: %s", rel, exc)
            continue
        if "triton" not in src:
            continue  # only kernels are code samples; helper scripts are reachable by code search
        doc, parts = _code_chunks(src)
        platform, archs, topics = _infer_code_tags(src)
        first = doc.strip().splitlines()[0] if doc.strip() else "Triton kernel"
        out.append(
            Section(
                id=f"code:{rel}",
                title=f"{rel}: {first}",
                level="code_sample",
                platform=platform,
                archs=archs,
                topics=topics,
                text=src,
                path=rel,
                kind="code",
                header=doc,
                extra={"parts": parts},
            )
        )
    return out


def load_all(
    corpus_dir: Path = CORPUS_DIR, root: Path = REPO_ROOT, code_globs: tuple[str, ...] = CODE_SAMPLE_GLOBS
) -> list[Section]:
    secs = load_markdown_sections(corpus_dir) + load_code_sections(root, code_globs)
    seen: dict[str, str] = {}
    for s in secs:
        if s.id in seen:
            raise CorpusError(f"duplicate section id {s.id!r} in {s.path} and {seen[s.id]}")
        seen[s.id] = s.path
    return secs


def source_files(
    corpus_dir: Path = CORPUS_DIR, root: Path = REPO_ROOT, code_globs: tuple[str, ...] = CODE_SAMPLE_GLOBS
) -> list[Path]:
    files = set(corpus_dir.glob("*.md"))
    for g in code_globs:
        files.update(p for p in root.glob(g) if p.is_file() and "__pycache__" not in p.parts)
    return sorted(files)


def fingerprint(files: list[Path]) -> tuple:
    """Cheap change detector (path, size, mtime_ns) checked before each query."""
    out = []
    for p in files:
        try:
            st = p.stat()
            out.append((str(p), st.st_size, st.st_mtime_ns))
        except OSError:
            out.append((str(p), -1, -1))
    return tuple(out)


def corpus_hash(sections: list[Section], salt: str = "") -> str:
    """Content hash of what gets indexed (ids, tags, text) plus the chunker/embedder salt."""
    h = hashlib.sha256(salt.encode())
    for s in sorted(sections, key=lambda s: s.id):
        h.update(repr((s.id, s.title, s.level, s.platform, s.archs, s.topics, s.path)).encode())
        h.update(hashlib.sha256(s.text.encode()).digest())
    return h.hexdigest()


def _rel(p: Path, root: Path = REPO_ROOT) -> str:
    try:
        return p.resolve().relative_to(root.resolve()).as_posix()
    except ValueError:
        return p.as_posix()
