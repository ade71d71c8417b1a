"""What every benchmark script repeats: the `--out` / `--commit` arguments, logging to the console and to
`<out>/log.txt`, the provenance record (GPU, driver, torch/triton, commit, date) and JSON output.

    ap = common.parser(__doc__)
    ap.add_argument(...)                       # the script's own options
    args = ap.parse_args(argv)
    run = common.start(args)                   # out folder made, logging set up, provenance collected
    ...
    run.write_json("checks.json", {...})       # provenance added under "provenance"

A script that writes one file of its own (`--out results/x.json`) or keeps its console logging uses the
parts: `parser(__doc__, out_default=..., out_file=True)`, `setup_logging`, `provenance(args.commit)` and
`write_json`.

The GPU machine gets a copy of the repository without `.git`: `--commit SHA` records the commit there.
"""
from __future__ import annotations

import argparse
import json
import logging
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]


def parser(doc: str | None, out_required: bool = True, *, out_default: str | Path | None = None,
           out_file: bool = False) -> argparse.ArgumentParser:
    """An ArgumentParser described by the first line of `doc`, with `--out` and `--commit SHA`.

    `--out` is the folder for the results, or with `out_file` the one file the script writes. A relative
    `out_default` lies under the repository, so the command means the same from any folder; with a
    default, `--out` is optional."""
    ap = argparse.ArgumentParser(description=(doc or "").strip().splitlines()[0] if doc else None)
    default = None if out_default is None else REPO / out_default
    what = "the file to write (its folder made if missing)" if out_file else "folder for the results (made if missing)"
    ap.add_argument("--out", type=Path, default=default, required=out_required and default is None,
                    help=what + (f"; default {Path(out_default)}" if out_default is not None else ""))
    ap.add_argument("--commit", default=None,
                    help="the git commit to record where the copy has no .git (device runs)")
    return ap


def setup_logging(level: int = logging.INFO, log_file: Path | None = None) -> None:
    """Log to the console (and to `log_file`), one format for every benchmark script."""
    handlers: list[logging.Handler] = [logging.StreamHandler(sys.stdout)]
    if log_file is not None:
        handlers.append(logging.FileHandler(log_file))
    logging.basicConfig(level=level, format="%(asctime)s %(name)s %(message)s", force=True, handlers=handlers)


def write_json(path: Path, doc: dict[str, Any], indent: int = 1) -> Path:
    """`doc` as JSON at `path`, its folder made if missing; written to a temporary file and renamed, so a run
    killed while writing leaves the previous file whole."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(doc, indent=indent, default=str) + "\n")
    tmp.replace(path)
    return path


@dataclass
class Run:
    """One benchmark invocation: its output folder, provenance and clock."""
    out: Path
    provenance: dict[str, Any]
    t0: float = field(default_factory=time.perf_counter)

    def elapsed(self) -> float:
        return time.perf_counter() - self.t0

    def write_json(self, name: str, doc: dict[str, Any]) -> Path:
        """`doc` with this run's provenance, as `<out>/<name>` (written whole each time: a run cut short
        keeps what it had)."""
        return write_json(self.out / name, {"provenance": self.provenance, **doc})


def provenance(commit: str | None = None) -> dict[str, Any]:
    """`platforms.collect()`, with `commit` recorded where git could not say."""
    from platforms import collect

    prov = collect()
    if commit and prov.get("commit") in (None, "unknown"):
        prov["commit"] = f"{commit} (given on the command line: the copy has no .git)"
    elif commit and not str(prov.get("commit", "")).startswith(commit):
        prov["commit_given"] = commit
    return prov


def start(args: argparse.Namespace, level: int = logging.INFO) -> Run:
    """Make `args.out`, log to the console and `<out>/log.txt`, collect provenance (logged once)."""
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    setup_logging(level, out / "log.txt")
    run = Run(out=out, provenance=provenance(getattr(args, "commit", None)))
    logging.getLogger("benchmarks").info("provenance %s", json.dumps(run.provenance, default=str))
    return run


def split_list(text: str | None) -> list[str]:
    """"a,b, c" -> ["a", "b", "c"]; None or "" -> []."""
    return [t.strip() for t in (text or "").split(",") if t.strip()]
