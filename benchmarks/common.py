"""What every benchmark script repeats: the `--out` / `--commit` arguments, logging to the console and to
`<out>/log.txt`, the provenance record (GPU, driver, torch/triton, commit, date) and JSON output.

    ap = common.parser(__doc__)
    ap.add_argument(...)                       # the script's own options
    args = ap.parse_args(argv)
    run = common.start(args)                   # out folder made, logging set up, provenance collected
    ...
    run.write_json("checks.json", {...})       # provenance added under "provenance"

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


def parser(doc: str | None, out_required: bool = True) -> argparse.ArgumentParser:
    """An ArgumentParser described by the first line of `doc`, with `--out DIR` and `--commit SHA`."""
    ap = argparse.ArgumentParser(description=(doc or "").strip().splitlines()[0] if doc else None)
    ap.add_argument("--out", type=Path, required=out_required, help="folder for the results (made if missing)")
    ap.add_argument("--commit", default=None,
                    help="the git commit to record where the copy has no .git (device runs)")
    return ap


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
        path = self.out / name
        path.write_text(json.dumps({"provenance": self.provenance, **doc}, indent=1, default=str))
        return path


def provenance(commit: str | None = None) -> dict[str, Any]:
    """`workbench.provenance.collect()`, with `commit` recorded where git could not say."""
    from workbench.provenance import collect

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
    logging.basicConfig(level=level, format="%(asctime)s %(name)s %(message)s", force=True,
                        handlers=[logging.StreamHandler(sys.stdout), logging.FileHandler(out / "log.txt")])
    run = Run(out=out, provenance=provenance(getattr(args, "commit", None)))
    logging.getLogger("benchmarks").info("provenance %s", json.dumps(run.provenance, default=str))
    return run


def split_list(text: str | None) -> list[str]:
    """"a,b, c" -> ["a", "b", "c"]; None or "" -> []."""
    return [t.strip() for t in (text or "").split(",") if t.strip()]
