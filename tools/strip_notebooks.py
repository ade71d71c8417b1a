"""Strip what running a notebook adds (outputs, execution counts, timings, widget state) before a commit.

    python tools/strip_notebooks.py notebooks/03_trace_inspector.ipynb [more.ipynb ...]

tests/test_notebooks.py fails on a committed notebook that carries any of these: outputs are made by running
the notebook (CI does, on every push), and stored ones grow the repository by 50-150 KB per notebook.
Cell ids, tags and the source are kept; the file is rewritten only when something changed.
"""
from __future__ import annotations

import argparse
import json
import logging
import sys
from pathlib import Path
from typing import Any

log = logging.getLogger("tools.strip_notebooks")
_RUN_METADATA = ("execution", "collapsed", "scrolled")


def strip(nb: dict[str, Any]) -> dict[str, Any]:
    """The notebook without what a run added (a new dict; the input is not changed)."""
    out = json.loads(json.dumps(nb))
    for cell in out.get("cells", []):
        if cell.get("cell_type") == "code":
            cell["outputs"] = []
            cell["execution_count"] = None
        for key in _RUN_METADATA:
            cell.get("metadata", {}).pop(key, None)
    out.get("metadata", {}).pop("widgets", None)
    return out


def strip_file(path: Path) -> bool:
    """Strip one file in place; True when it changed."""
    text = path.read_text(encoding="utf-8")
    nb = json.loads(text)
    new = json.dumps(strip(nb), indent=1, ensure_ascii=False) + "\n"
    if json.loads(new) == nb:
        return False
    path.write_text(new, encoding="utf-8")
    return True


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python tools/strip_notebooks.py", description=__doc__.split("\n")[0])
    ap.add_argument("notebooks", nargs="+", type=Path)
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    for p in args.notebooks:
        try:
            changed = strip_file(p)
        except (OSError, json.JSONDecodeError) as exc:
            log.error("%s: not a readable notebook: %s", p, exc)
            return 2
        log.info("%s: %s", p, "stripped" if changed else "already clean")
    return 0


if __name__ == "__main__":
    sys.exit(main())
