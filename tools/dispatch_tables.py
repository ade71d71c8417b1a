"""Write each case study's shipped dispatch table from its recorded benchmark.

`results/case_studies/<case>/bench.csv` is the record (every contender, with provenance on every row); a
dispatcher decides from a few of its rows (`ShapeDispatcher.reads`). Those rows, unchanged and with their
provenance, go to `case_studies/<case>/dispatch.csv`, package data, so a case study installed from a wheel
dispatches as it does in the repository. Run after a GPU run updates a bench.csv; `--check` fails when a
shipped table no longer matches its record (tests/case_studies/test_dispatch_tables.py runs the check).

    python tools/dispatch_tables.py [--check] [--case NAME ...]
"""
from __future__ import annotations

import argparse
import csv
import importlib
import io
import logging
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:      # run as a script from a checkout
    sys.path.insert(0, str(ROOT))

from case_studies.common.dispatch import ShapeDispatcher  # noqa: E402

CASES = ("conv1d", "event_truncate", "mapid", "mbdt", "optimized_fm", "pffn")
log = logging.getLogger("tools.dispatch_tables")


def dispatcher_class(case: str) -> type[ShapeDispatcher]:
    """The one ShapeDispatcher subclass a case study's dispatch module defines."""
    mod = importlib.import_module(f"case_studies.{case}.dispatch")
    found = [v for v in vars(mod).values() if isinstance(v, type) and issubclass(v, ShapeDispatcher)
             and v is not ShapeDispatcher and v.__module__ == mod.__name__]
    if len(found) != 1:
        raise LookupError(f"case_studies.{case}.dispatch defines {len(found)} dispatchers, expected one")
    return found[0]


def table_text(case: str, root: Path = ROOT) -> str:
    """The shipped table of `case` as CSV text: the record's header, then the rows its dispatcher reads,
    cell for cell as recorded."""
    cls = dispatcher_class(case)
    with (root / "results" / "case_studies" / case / "bench.csv").open(newline="") as f:
        reader = csv.DictReader(f)
        rows = [r for r in reader if cls.reads(r)]
        fields = reader.fieldnames or []
    out = io.StringIO()
    w = csv.DictWriter(out, fieldnames=fields, lineterminator="\n")
    w.writeheader()
    w.writerows(rows)
    return out.getvalue()


def shipped_path(case: str, root: Path = ROOT) -> Path:
    return root / "case_studies" / case / "dispatch.csv"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--check", action="store_true", help="compare only; exit 1 on a stale table")
    ap.add_argument("--case", action="append", choices=CASES, help="default: every case study")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    stale = []
    for case in args.case or CASES:
        text, path = table_text(case), shipped_path(case)
        if path.exists() and path.read_text() == text:
            continue
        if args.check:
            stale.append(case)
            log.error("%s: stale, run `python tools/dispatch_tables.py --case %s`", path.relative_to(ROOT), case)
        else:
            path.write_text(text)
            log.info("wrote %s (%d rows)", path.relative_to(ROOT), text.count("\n") - 1)
    return 1 if stale else 0


if __name__ == "__main__":
    sys.exit(main())
