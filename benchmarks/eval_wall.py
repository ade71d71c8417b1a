"""One-shot `workbench eval` as a user runs it: the command's wall, N times, and where it went.

Each run is `python -m workbench.cli eval SPEC CANDIDATE --json` in a fresh process (its own harness server,
started and ended by the command), timed from outside around the whole command. The JSON record's `timings_s`
gives the phases: the server's start (`server_startup`, split into `server_import_*` and `server_spares`), the
job (`client_wall`: `reference_prepare`, `baseline_timing`, `compile_and_first_call`, `correctness`, `timing`,
`judge`, ...); what is left of the command's wall is the client's own (Python, its imports, the policy, the
exit): `client_own_s`.

    python benchmarks/eval_wall.py --out results/harness/eval_wall/gpu.json --device cuda --n 5
    # A/B against another checkout (e.g. `git archive BASE | tar -x -C /tmp/base`), runs interleaved
    python benchmarks/eval_wall.py --out /tmp/ab.json --device cpu --n 5 --root . --root /tmp/base

Each `--root` is a checkout whose `workbench` the command imports (its folder first on `PYTHONPATH`); the
rows of every root are interleaved (A B A B ...) so a machine's drifting load falls on both alike.
"""
from __future__ import annotations

import json
import logging
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks import common  # noqa: E402
from workbench.harness.timing import quantile  # noqa: E402

log = logging.getLogger("benchmarks.eval_wall")

# The phases reported, in the order a one-shot evaluation runs them (keys of the record's `timings_s`).
PHASES = ("server_startup", "server_before_main", "server_import_torch", "server_import_dynamo",
          "server_import_rest", "server_spares", "client_wall", "reference_prepare", "baseline_timing",
          "baseline_rounds_load_s", "baseline_rounds_timed_window_s", "clock_wait", "compile_and_first_call",
          "correctness", "timing", "rounds_reference_staging", "judge", "harness_overhead")


def one_run(root: Path, spec: Path, candidate: Path, device: str, extra: list[str], timeout_s: float) -> dict[str, Any]:
    """One `workbench eval` in a fresh process from `root`: its wall, exit status and record's timings."""
    env = dict(os.environ)
    env["PYTHONPATH"] = str(root) + os.pathsep + env.get("PYTHONPATH", "")
    cmd = [sys.executable, "-m", "workbench.cli", "eval", str(spec), str(candidate), "--json", "--device", device,
           *extra]
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, cwd=root, env=env, capture_output=True, text=True, timeout=timeout_s)
    wall = time.perf_counter() - t0
    row: dict[str, Any] = {"root": str(root), "wall_s": wall, "rc": proc.returncode}
    try:
        rec = json.loads(proc.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        row["error"] = (proc.stderr or proc.stdout)[-500:]
        return row
    t = {k: float(v) for k, v in (rec.get("timings_s") or {}).items() if isinstance(v, (int, float))}
    row.update(status=rec.get("status"), fitness=rec.get("fitness"), timings_s=t)
    row["client_own_s"] = wall - t.get("server_startup", 0.0) - t.get("client_wall", 0.0)
    return row


def summarize(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Median, p20 and p80 of the command's wall; the median of each phase over the runs that have it."""
    walls = [r["wall_s"] for r in rows if "timings_s" in r]
    if not walls:
        return {"runs": len(rows), "ok": 0}
    out: dict[str, Any] = {"runs": len(rows), "ok": len(walls), "wall_median_s": statistics.median(walls),
                           "wall_p20_s": quantile(walls, 0.2), "wall_p80_s": quantile(walls, 0.8),
                           "client_own_median_s": statistics.median(r["client_own_s"] for r in rows
                                                                     if "client_own_s" in r),
                           "statuses": sorted({str(r.get("status")) for r in rows})}
    phases = {}
    for k in PHASES:
        vals = [r["timings_s"][k] for r in rows if k in r.get("timings_s", {})]
        if vals:
            phases[k] = statistics.median(vals)
    out["phases_median_s"] = phases
    return out


def main(argv: list[str] | None = None) -> int:
    ap = common.parser(__doc__, out_file=True)
    ap.add_argument("--spec", type=Path, default=common.REPO / "examples" / "vector_add" / "spec.py")
    ap.add_argument("--candidate", type=Path, default=common.REPO / "examples" / "vector_add" / "candidate.py")
    ap.add_argument("--device", default="auto", help="auto | cpu | cuda (default auto)")
    ap.add_argument("--n", type=int, default=5, help="runs per root (default 5)")
    ap.add_argument("--root", type=Path, action="append", default=None,
                    help="a checkout to run the command from (repeatable: A/B, interleaved); default this one")
    ap.add_argument("--warmup", type=int, default=1, help="runs per root not counted (page cache; default 1)")
    ap.add_argument("--timeout", type=float, default=600.0, help="seconds one command may take (default 600)")
    ap.add_argument("--eval-arg", dest="extra", action="append", default=[],
                    help="passed on to `workbench eval` (repeatable), e.g. --eval-arg=--trials=1")
    args = ap.parse_args(argv)
    common.setup_logging()
    roots = [r.resolve() for r in (args.root or [common.REPO])]
    spec, cand = args.spec.resolve(), args.candidate.resolve()
    rows: list[dict[str, Any]] = []
    for i in range(args.warmup + args.n):
        for root in roots:
            row = one_run(root, spec, cand, args.device, args.extra, args.timeout)
            row["warmup"] = i < args.warmup
            rows.append(row)
            t = row.get("timings_s", {})
            log.info("%s run %d: wall %.2f s (server start %.2f, job %.2f, client %.2f) %s", root.name or root, i,
                     row["wall_s"], t.get("server_startup", float("nan")), t.get("client_wall", float("nan")),
                     row.get("client_own_s", float("nan")), row.get("status") or row.get("error", "")[-200:])
    summary = {str(root): summarize([r for r in rows if r["root"] == str(root) and not r["warmup"]])
               for root in roots}
    for root, s in summary.items():
        log.info("%s: median wall %.2f s (p20 %.2f, p80 %.2f) over %d runs; phases %s", root,
                 s.get("wall_median_s", float("nan")), s.get("wall_p20_s", float("nan")),
                 s.get("wall_p80_s", float("nan")), s.get("ok", 0),
                 json.dumps({k: round(v, 3) for k, v in s.get("phases_median_s", {}).items()}))
    common.write_json(args.out, {"provenance": common.provenance(args.commit), "spec": str(spec),
                                 "candidate": str(cand), "device": args.device, "n": args.n,
                                 "summary": summary, "rows": rows})
    log.info("wrote %s", args.out)
    return 0 if all(s.get("ok") == args.n for s in summary.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
