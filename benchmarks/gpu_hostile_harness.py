"""The hostile-candidate harness on a GPU, in one run: isolation, exploits, honest kernels, overhead.

Usage (on the GPU machine, from the repository root): PYTHONPATH=. python benchmarks/gpu_hostile_harness.py --out DIR

- every exploit in tests/harness/exploits/ and tests/harness/hostile/, with the static policy on and off:
  each must score 0 (a false negative is a candidate scoring > 0 while cheating), except the hostile
  files that EXPECT `passed` (the memo candidate: it must compute every time);
- the bundled examples and the six case-study kernels (spec.py + kernel.py): each must pass (a false
  positive is an honest kernel scoring 0), with speedups, isolation as read from /proc, and the harness
  overhead per candidate (client wall time beyond compile, trials, timed rounds and baseline rounds).
Writes hostile_gpu.json (every row, with provenance) and prints a summary.
"""
from __future__ import annotations

import json
import re
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks import common  # noqa: E402
from workbench.env import ensure_interpreter_if_no_gpu  # noqa: E402

ensure_interpreter_if_no_gpu()

CASES = ["conv1d", "event_truncate", "mapid", "mbdt", "optimized_fm", "pffn"]
# Sandbox escapes: with the static policy off, what counts is that they leave no trace (they may then
# compute honestly and pass); with it on, they must be rejected like every cheat.
ESCAPES = {"dir_fd_write", "proc_snoop", "daemon_fork_exec", "collect_env_shell", "fake_site_packages", "cffi_libc",
           "renices_reference", "forges_other_pipes", "poisons_input_cache", "cuda_ipc"}
TRACES = ["/tmp/wb_hostile_dirfd.txt", "/tmp/wb_hostile_symlink", "/tmp/wb_hostile_link", "/tmp/wb_hostile_daemon",
          "/tmp/wb_hostile_collect_env", "/tmp/wb_hostile_fake_site", "/tmp/wb_hostile_cffi",
          "/tmp/wb_exploit_marker.txt"]
OWN = ("compile_and_first_call", "correctness", "timing", "baseline_timing")


def _expect(path: Path) -> str:
    m = re.search(r"EXPECT status=(\w+)", path.read_text())
    return m.group(1) if m else "?"


def _row(kind: str, name: str, res, policy: bool, expect: str = "") -> dict:
    t = res.timings_s
    return {"kind": kind, "name": name, "policy": policy, "expect": expect, "status": res.status.value,
            "fitness": res.fitness, "runtime_us": res.runtime_us, "baseline_us": res.baseline_runtime_us,
            "violations": res.violations[:6], "error": res.error[:300], "reps": res.details.get("reps"),
            "client_wall_s": t.get("client_wall"), "overhead_s": t.get("client_wall", 0.0) - sum(t.get(k, 0.0)
                                                                                                for k in OWN),
            "isolation": res.isolation}


def main() -> int:
    ap = common.parser(__doc__, out_default="results/harness/hostile_gpu")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--repeat", type=int, default=3, help="evaluations of each honest candidate (overhead)")
    ap.add_argument("--no-policy", default="all",
                    help="comma-separated exploit names to run with the static policy off too (default: all)")
    ap.add_argument("--skip", default="hangs", help="comma-separated exploit names not to run (default: hangs)")
    ap.add_argument("--no-honest", action="store_true", help="only the exploits (the honest part ran elsewhere)")
    args = ap.parse_args()
    from workbench.harness import Harness
    run = common.start(args)
    rows: list[dict] = []
    spec = ROOT / "examples" / "vector_add" / "spec.py"
    t0 = time.perf_counter()
    with Harness(device=args.device) as h:
        h.start()
        for rep in range(0 if args.no_honest else args.repeat):
            for ex in sorted((ROOT / "examples").glob("*/spec.py")):
                res = h.evaluate(ex, ex.parent / "candidate.py")
                rows.append({**_row("example", ex.parent.name, res, True, "passed"), "rep": rep})
                print(f"example {ex.parent.name:12s} rep {rep}: {res.summary()}", flush=True)
        for case in [] if args.no_honest else CASES:
            d = ROOT / "case_studies" / case
            res = h.evaluate(d / "spec.py", d / "kernel.py", trials=2, timeout_s=600)
            rows.append(_row("case_study", case, res, True, "passed"))
            print(f"case {case:14s}: {res.summary()}", flush=True)
        skip = set(args.skip.split(",")) if args.skip else set()
        no_policy = None if args.no_policy == "all" else set(args.no_policy.split(","))
        for folder in ("exploits", "hostile"):
            for p in sorted((ROOT / "tests" / "harness" / folder).glob("*.py")):
                if p.stem in skip:
                    continue
                for policy in (False, True):
                    if not policy and no_policy is not None and p.stem not in no_policy:
                        continue
                    timeout = 30 if p.stem == "hangs" else 180
                    # the small named shapes: the timed shape is then `default` (N 4099), not 16M elements
                    res = h.evaluate(spec, p, trials=3, timeout_s=timeout, policy=policy,
                                     shapes=["default", "small_odd"])
                    rows.append(_row(folder, p.stem, res, policy, _expect(p)))
                    print(f"{folder} {p.stem:24s} policy={policy!s:5s}: {res.summary()[:150]}", flush=True)
    honest = [r for r in rows if r["kind"] in ("example", "case_study")]
    cheats = [r for r in rows if r["kind"] in ("exploits", "hostile") and r["expect"] != "passed"
              and not (r["name"] in ESCAPES and not r["policy"])]
    false_pos = [r["name"] for r in honest if r["status"] != "passed"]
    false_neg = [f"{r['name']} (policy={r['policy']})" for r in cheats if r["fitness"] > 0]
    overhead = [r["overhead_s"] for r in rows if r["kind"] == "example" and r.get("rep", 0) > 0]
    import os
    import subprocess

    traces = [t for t in TRACES if os.path.lexists(t)]
    leftover = subprocess.run(["ps", "-eo", "uid=,pid=,args="], capture_output=True, text=True).stdout.splitlines()
    from workbench.harness.sandbox import UID_BASE, UID_SLOTS

    leftover = [line for line in leftover if line.split() and UID_BASE <= int(line.split()[0]) < UID_BASE + UID_SLOTS]
    summary = {"false_positives": false_pos, "false_negatives": false_neg, "traces_left": traces,
               "candidate_uid_processes_left": leftover,
               "overhead_median_s": statistics.median(overhead) if overhead else None,
               "overhead_max_s": max(overhead) if overhead else None,
               "wall_s": time.perf_counter() - t0, "n_rows": len(rows)}
    run.write_json("hostile_gpu.json", {"summary": summary, "rows": rows})
    print(json.dumps(summary, indent=1))
    return 0 if not (false_pos or false_neg or traces or leftover) else 1


if __name__ == "__main__":
    sys.exit(main())
