"""`workbench kb build|query|search`: build the knowledge-base index, query it, search code."""

from __future__ import annotations

import argparse
import json
import logging
import sys

log = logging.getLogger(__name__)


def register(subparsers: argparse._SubParsersAction) -> None:
    kb = subparsers.add_parser("kb", help="knowledge base: build the index, query it, search code")
    sub = kb.add_subparsers(dest="kb_command", metavar="VERB")
    emb_help = (
        "minilm (all-MiniLM-L6-v2), hashing (pure-Python TF-IDF fallback) or auto "
        "(default: $WORKBENCH_KB_EMBEDDER or auto)"
    )

    b = sub.add_parser("build", help="build (or verify) the index; rebuilds when the corpus changed")
    b.add_argument("--embedder", default=None, help=emb_help)
    b.add_argument("--force", action="store_true", help="rebuild even if the saved index is valid")
    b.set_defaults(func=_cmd_build)

    q = sub.add_parser("query", help="print the best sections for a text (title, tags, score, text)")
    q.add_argument("text")
    q.add_argument("--top", type=int, default=5, help="number of sections (default 5)")
    q.add_argument("--platform", default=None, help="cuda, rocm, cpu (cpu-interpreter) or any")
    q.add_argument("--arch", default=None, help="sm_80, sm_90, gfx942, cpu-interpreter ...")
    q.add_argument("--embedder", default=None, help=emb_help)
    q.add_argument(
        "--prompt",
        action="store_true",
        help="print the prompt text of retrieve() (needs --platform and --arch) instead of hits",
    )
    q.add_argument("--budget", type=int, default=1200, help="token budget with --prompt")
    q.add_argument("--json", action="store_true", help="one JSON object instead of text")
    q.set_defaults(func=_cmd_query)

    s = sub.add_parser("search", help="code search over case_studies/, examples/ and the corpus")
    s.add_argument("pattern")
    mode = s.add_mutually_exclusive_group()
    mode.add_argument("--regex", action="store_const", const="regex", dest="mode")
    mode.add_argument("--filename", action="store_const", const="filename", dest="mode")
    s.add_argument("-i", "--ignore-case", action="store_true")
    s.add_argument("--context", type=int, default=3)
    s.add_argument("--max", type=int, default=20)
    s.set_defaults(func=_cmd_search, mode="exact")
    kb.set_defaults(func=lambda args: (kb.print_help(), 2)[1])


def _retriever(name: str | None):
    import os

    from retrieval import Retriever

    return Retriever(name or os.environ.get("WORKBENCH_KB_EMBEDDER", "auto"))


def _fail(msg: str) -> int:
    print(f"error: {msg}", file=sys.stderr)
    return 2


def _cmd_build(args: argparse.Namespace) -> int:
    from retrieval import EmbedderUnavailable

    try:
        info = _retriever(args.embedder).build(force=args.force)
    except (EmbedderUnavailable, ValueError) as exc:
        return _fail(str(exc))
    if info["fallback_reason"]:
        print(f"note: using the {info['embedder']} fallback embedder: {info['fallback_reason']}")
    state = f"rebuilt ({info['last_rebuild_reason']})" if info["last_rebuild_reason"] else "up to date"
    print(
        f"knowledge base {state}: {info['n_sections']} sections, {info['n_chunks']} chunks, "
        f"embedder {info['embedder']} ({info['dim']}-d), {info['backend']}/{info['index_kind']} index "
        f"in {info['directory']}"
    )
    return 0


def _cmd_query(args: argparse.Namespace) -> int:
    from retrieval import EmbedderUnavailable
    from retrieval.tags import TagError, TagFilter

    if args.top <= 0:
        return _fail("--top must be positive")
    if not args.text.strip():
        return _fail("empty query: describe the failure or the bottleneck in words")
    try:
        TagFilter.make(args.platform, args.arch)  # reject bad tags before loading the model
    except TagError as exc:
        return _fail(str(exc))
    try:
        r = _retriever(args.embedder)
        if args.prompt:
            if not (args.platform and args.arch):
                return _fail("--prompt needs --platform and --arch")
            res = r.retrieve(args.text, platform=args.platform, arch=args.arch, budget_tokens=args.budget)
            hits = res.hits
        else:
            hits = r.query(args.text, top_k=args.top, platform=args.platform, arch=args.arch)
    except (EmbedderUnavailable, ValueError) as exc:
        return _fail(str(exc))
    info = r.info()
    if args.json:
        print(json.dumps({"info": info, "hits": [h.__dict__ for h in hits]}, indent=1))
        return 0
    if info["fallback_reason"]:
        print(f"note: {info['embedder']} fallback embedder in use: {info['fallback_reason']}\n")
    if args.prompt:
        print(res.text if res.text else "(no section passed the filters)")
        print(f"[{res.tokens} tokens of {args.budget}; embedder {res.embedder}]")
        return 0
    if not hits:
        print("no section matches these platform/arch filters")
    for i, h in enumerate(hits, 1):
        t = h.tags
        print(f"{i}. {h.title}  (score {h.score:.3f})")
        print(
            f"   tags: level={t['level']} platform={t['platform']} arch={','.join(t['arch'])} "
            f"topic={','.join(t['topic'])}   [{h.path}]"
        )
        body = h.text.strip()
        print("   " + "\n   ".join(body.splitlines()[:12]) + ("\n   ..." if body.count("\n") >= 12 else ""))
        print()
    return 0


def _cmd_search(args: argparse.Namespace) -> int:
    from retrieval import code_search

    try:
        matches = code_search(
            args.pattern, args.mode, context=args.context, max_results=args.max, ignore_case=args.ignore_case
        )
    except ValueError as exc:
        return _fail(str(exc))
    for m in matches:
        print(m.render())
    if not matches:
        print("no match")
    return 0 if matches else 1
