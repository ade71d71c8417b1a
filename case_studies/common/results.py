"""Benchmark rows to CSV with provenance on every row (GPU, driver, torch/triton versions, commit, date),
and back. Plain `csv` so it runs wherever torch runs."""
from __future__ import annotations

import csv
import logging
from collections.abc import Iterable
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

PROVENANCE_KEYS = ("gpu", "driver", "cuda", "sm", "torch", "triton", "python", "commit", "date")


def write_rows(rows: Iterable[dict[str, Any]], path: str | Path,
               provenance: dict[str, Any] | None = None) -> Path:
    """Write dict rows to `path` (CSV). Each row gets `prov_<key>` columns from `provenance`
    (default: `platforms.collect()`), so a row copied elsewhere still says where it came from."""
    if provenance is None:
        from platforms import collect

        provenance = collect()
    prov = {f"prov_{k}": provenance.get(k) for k in PROVENANCE_KEYS}
    rows = [dict(r, **prov) for r in rows]
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fields: list[str] = []
    for r in rows:
        fields.extend(k for k in r if k not in fields)
    with path.open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=fields)
        w.writeheader()
        for r in rows:
            w.writerow({k: ("" if v is None else v) for k, v in r.items()})
    log.info("wrote %d rows to %s", len(rows), path)
    return path


def _coerce(v: str) -> Any:
    if v == "":
        return None
    for t in (int, float):
        try:
            return t(v)
        except ValueError:
            pass
    return v


def read_rows(path: str | Path) -> list[dict[str, Any]]:
    """Read a CSV written by `write_rows`, numbers parsed back to int/float, empty cells to None."""
    with Path(path).open(newline="") as f:
        return [{k: _coerce(v) for k, v in r.items()} for r in csv.DictReader(f)]
