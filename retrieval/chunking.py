"""Sections -> chunks. A chunk is the unit that gets a vector; hits are reported per section.

Doc sections longer than `max_words` are split at paragraph boundaries (MiniLM reads 256 word
pieces; longer input is truncated, so a long section would be judged by its first half only).
Code samples are split into one chunk per top-level function or class, each prefixed with the
module docstring so that every chunk says what the file demonstrates.
"""

from __future__ import annotations

from dataclasses import dataclass

from retrieval.corpus import Section

CHUNKER_VERSION = "1"
MAX_WORDS = 170


@dataclass(frozen=True)
class Chunk:
    id: str  # "<section id>#<n>"
    section_id: str
    text: str  # what a prompt shows
    embed_text: str  # what gets embedded: title and topics + text


def _split_paragraphs(text: str, max_words: int) -> list[str]:
    paras = [p.strip() for p in text.split("\n\n") if p.strip()]
    out: list[str] = []
    cur: list[str] = []
    n = 0
    for p in paras:
        w = len(p.split())
        if cur and n + w > max_words:
            out.append("\n\n".join(cur))
            cur, n = [], 0
        cur.append(p)
        n += w
    if cur:
        out.append("\n\n".join(cur))
    return out


def chunk_section(s: Section, max_words: int = MAX_WORDS) -> list[Chunk]:
    topics = ", ".join(s.topics)
    if s.kind == "code":
        parts = s.extra.get("parts") or [("module", s.text)]
        head = s.header.strip().split("\n\n")[0] if s.header else ""
        chunks = []
        for i, (name, src) in enumerate(parts):
            text = (f'"""{head}"""\n' if head else "") + src
            chunks.append(
                Chunk(f"{s.id}#{i}", s.id, text, f"{s.title}. Code sample ({topics}). {name}: {s.header}\n{src}")
            )
        return chunks
    pieces = _split_paragraphs(s.text, max_words)
    return [Chunk(f"{s.id}#{i}", s.id, p, f"{s.title}. Topics: {topics}.\n{p}") for i, p in enumerate(pieces)]


def chunk_all(sections: list[Section], max_words: int = MAX_WORDS) -> list[Chunk]:
    out: list[Chunk] = []
    for s in sections:
        out.extend(chunk_section(s, max_words))
    return out
