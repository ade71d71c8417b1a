"""Which in-scope ATen-suite ops still cannot be lowered: lower every spec of one dtype, run nothing.

Lab book (experiments/README.md): nothing imports this. It writes the suite's specs (`aten.write_specs`, as
`workbench suite aten` does), lowers each one with `lower_spec` (capture + codegen, no kernel runs) in a forked
child with a timeout, and tabulates the diagnoses: `unsupported: <op>` (the suite's `no seed`), capture
failures, lowering errors, timeouts. Ran from 03f50a2 (float32, 2026-12-06/07) to 8481e94 (int64 after); the
tables and each run's JSON (with its commit) are in results/suites/aten_unsupported_2026-12-07/.

    .venv/bin/python experiments/aten_unsupported/survey.py --out results/suites/aten_unsupported_DATE.md \
        [--dtype float32] [--ops abs linalg.det ...] [--jobs 2] [--timeout 180]
"""
from __future__ import annotations

import argparse
import ast
import json
import multiprocessing as mp
import os
import re
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict
from pathlib import Path


def _lower_child(spec: str, conn) -> None:
    from workbench.lowering import lower_spec

    try:
        res = lower_spec(spec)
        conn.send((res.source is not None, res.diagnosis))
    except BaseException as exc:  # noqa: BLE001 - the child reports anything, the parent tabulates it
        conn.send((False, f"child raised {type(exc).__name__}: {exc}".splitlines()[0][:300]))
    conn.close()


def lower_all(problems, jobs: int, timeout: float) -> dict[str, tuple[bool, str, float]]:
    ctx = mp.get_context("fork")
    pending = list(problems)
    running: dict = {}
    out: dict[str, tuple[bool, str, float]] = {}
    while pending or running:
        while pending and len(running) < jobs:
            p = pending.pop(0)
            parent, child = ctx.Pipe(duplex=False)
            proc = ctx.Process(target=_lower_child, args=(p.spec_path, child), daemon=True)
            proc.start()
            child.close()
            running[p.problem_id] = (proc, parent, time.monotonic())
        time.sleep(0.05)
        for pid, (proc, conn, t0) in list(running.items()):
            dt = time.monotonic() - t0
            if conn.poll():
                try:
                    ok, diag = conn.recv()
                except EOFError:
                    ok, diag = False, f"child died (exit {proc.exitcode})"
                out[pid] = (ok, diag, dt)
            elif not proc.is_alive():
                out[pid] = (False, f"child died (exit {proc.exitcode})", dt)
            elif dt > timeout:
                proc.kill()
                out[pid] = (False, f"timeout after {timeout:.0f} s", dt)
            else:
                continue
            proc.join(1)
            del running[pid]
            print(f"[{len(out)}/{len(problems)}] {pid}: {'lowered' if out[pid][0] else out[pid][1]} "
                  f"({dt:.1f} s)", flush=True)
    return out


def _commit() -> str:
    return subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()


def _n_samples(spec_path: str) -> int:
    """How many OpInfo samples the spec's forward calls (its CALLS list)."""
    m = re.search(r"^CALLS = (.*)$", Path(spec_path).read_text(), re.M)
    return len(ast.literal_eval(m.group(1))) if m else -1


def cause(diag: str) -> str:
    """The diagnosis reduced to what to implement: `unsupported: aten.x.y` -> `aten.x`."""
    m = re.match(r"unsupported: (aten|prims|workbench|[\w:]+)\.(\w+)", diag)
    if m:
        return f"unsupported: {m.group(1)}.{m.group(2)}"
    return diag.split(":")[0] if diag else ""


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--ops", nargs="*")
    ap.add_argument("--dtype", default="float32")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--timeout", type=float, default=180)
    ap.add_argument("--specs", help="folder for the generated specs (a temporary one by default)")
    args = ap.parse_args()

    import torch

    # one intra-op thread before write_specs runs OpInfo's samples here: a forked child that reaches an ATen
    # kernel through FakeTensor's fallback (histogramdd) hung in GNU OpenMP's pool, which a parent that used it
    # leaves dead in a fork (histogramdd's "timeout after 120 s" was this hang: 8.5 s lowered from a clean parent)
    torch.set_num_threads(1)
    from workbench.suites.aten import write_specs

    folder = Path(args.specs or tempfile.mkdtemp(prefix="aten_specs_"))
    t0 = time.time()
    problems = write_specs(folder, args.ops, [args.dtype])
    print(f"{len(problems)} specs in {folder} ({time.time() - t0:.0f} s)", flush=True)
    start = _commit()
    from workbench.lowering.capture import warm_up  # imported and warmed once in the parent: each forked
    warm_up()                                        # child starts with torch.export's machinery loaded

    res = lower_all(problems, args.jobs, args.timeout)
    commit = _commit()
    if commit != start:  # the children import the lowering's modules as they are when each one starts
        commit = f"{start} (at the start; {commit} at the end)"
    samples = {p.problem_id: _n_samples(p.spec_path) for p in problems}
    dirty = subprocess.run(["git", "status", "--porcelain", "workbench"], capture_output=True, text=True).stdout
    by_cause: dict[str, list[str]] = defaultdict(list)
    for pid, (ok, diag, _) in sorted(res.items()):
        if not ok:
            by_cause[cause(diag)].append(pid.split("/")[1])
    n_ok = sum(1 for ok, _, _ in res.values() if ok)
    lines = [f"# ATen suite, {args.dtype}: which in-scope ops lower (nothing run)", "",
             f"Made by `experiments/aten_unsupported/survey.py` at commit {commit}"
             f"{' (workbench/ had uncommitted edits of others)' if dirty else ''}, "
             f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, torch's OpInfo samples for {args.dtype}, "
             f"timeout {args.timeout:.0f} s per op.", "",
             f"**{n_ok} of {len(res)} lower**; {len(res) - n_ok} do not.", "",
             "| cause | ops | which |", "| --- | --- | --- |"]
    for c, ops in sorted(by_cause.items(), key=lambda kv: (-len(kv[1]), kv[0])):
        lines.append(f"| {c} | {len(ops)} | {', '.join(ops)} |")
    lines += ["", "## Each op not lowered, its diagnosis", "", "| op | samples | diagnosis |", "| --- | --- | --- |"]
    for pid, (ok, diag, _) in sorted(res.items()):
        if not ok:
            lines.append(f"| {pid.split('/')[1]} | {samples[pid]} | {diag.replace('|', '/')} |")
    slow = sorted(((v[2], k) for k, v in res.items() if v[0]), reverse=True)[:10]
    lines += ["", "## The slowest ops that lowered", "", "| op | samples | seconds |", "| --- | --- | --- |"]
    lines += [f"| {k.split('/')[1]} | {samples[k]} | {t:.0f} |" for t, k in slow]
    Path(args.out).write_text("\n".join(lines) + "\n", encoding="utf-8")
    Path(args.out).with_suffix(".json").write_text(json.dumps(
        {"commit": commit, "results": {k: {"ok": v[0], "diagnosis": v[1], "seconds": round(v[2], 1),
                                           "samples": samples[k]}
                                       for k, v in sorted(res.items())}}, indent=1), encoding="utf-8")
    counts = Counter(cause(d) for ok, d, _ in res.values() if not ok)
    print(f"{n_ok}/{len(res)} lowered; {counts.most_common(20)}")


if __name__ == "__main__":
    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10000))
    os.environ.setdefault("TRITON_INTERPRET", "1")
    main()
