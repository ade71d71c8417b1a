"""Lowered KernelBench drafts on a GPU at published sizes: correct against eager, and timed.

Lowering needs this project's torch (2.13, the development machine); the GPU machine has another (2.11)
and no KernelBench folder. So the drafts are staged here, in an ignored folder that the device call carries:

    python benchmarks/lowering_gpu.py stage --picks 1:0:100,2:0:100,3:0:50 --dir .cache/lowering_gpu
        # lowers each picked problem of ../shared/kernelbench at its published sizes (a forked child per
        # problem, killed after --prepare-timeout), copies its spec beside the candidate, writes
        # manifest.json after every problem (--reuse resumes); .cache/ is git-ignored: nothing is committed
    PYTHONPATH=. python benchmarks/lowering_gpu.py run --dir .cache/lowering_gpu --out $OUT --budget-s 400
        # there: phase A warms Triton's and Inductor's caches in --workers processes; phase B checks every
        # draft against eager (same seeds) and times eager, torch.compile and the draft (CUDA events, median),
        # TF32 off unless the spec sets ALLOW_TF32. Writes lowering_gpu.csv, summary.json, provenance.json.

The CPU dry run of the same path: stage with --max-elems 4096 (the suites' auto-sizer) into another
folder, then `run --device cpu --limit N` (the interpreter; times are not speeds).
"""
from __future__ import annotations

import argparse
import csv
import json
import logging
import os
import shutil
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
log = logging.getLogger("lowering_gpu")


def stage(args: argparse.Namespace) -> int:
    root = Path(args.root)
    out = Path(args.dir)
    if out.exists() and not args.reuse:
        shutil.rmtree(out)
    (out / "specs").mkdir(parents=True, exist_ok=True)
    (out / "candidates").mkdir(exist_ok=True)
    manifest = json.loads((out / "manifest.json").read_text()) if args.reuse and (out / "manifest.json").is_file() \
        else []
    for pick in args.picks.split(","):
        lvl, a, b, *step = pick.split(":")
        files = sorted((root / f"level{lvl}").glob("*.py"), key=lambda p: (int(p.stem.split("_")[0]), p.name))
        for f in files[int(a):int(b):int(step[0]) if step else 1]:
            t0 = time.monotonic()
            overrides = {}
            if args.max_elems:
                from workbench.suites.sizing import auto_size

                overrides = auto_size(f, args.max_elems)
            staged = out / "candidates" / f"l{lvl}_{f.name}"
            done = {m["spec"]: m for m in manifest}.get(f"specs/l{lvl}_{f.name}")
            if args.reuse and done is not None and (staged.is_file() or not args.retry_failed):
                continue  # staged by an earlier call
            res = _lower_bounded(f, args.prepare_timeout, overrides)
            row = {"level": int(lvl), "problem": f.stem, "spec": f"specs/l{lvl}_{f.name}", "diagnosis": res.diagnosis,
                   "lower_s": round(time.monotonic() - t0, 1)}
            if overrides:
                row["overrides"] = overrides
            shutil.copy(f, out / row["spec"])
            if res.source is not None:
                row["candidate"] = f"candidates/l{lvl}_{f.name}"
                (out / row["candidate"]).write_text(res.source)
            manifest = [m for m in manifest if m["spec"] != row["spec"]] + [row]
            (out / "manifest.json").write_text(json.dumps(manifest, indent=1))  # after each: resumable
            log.info("level %s %s: %s (%.0f s)", lvl, f.stem, res.diagnosis or "lowered", row["lower_s"])
    return 0


def _lower_in_child(path: str, conn, overrides: dict) -> None:  # noqa: ANN001 - a Pipe end
    from workbench.lowering import lower_spec

    try:
        res = lower_spec(Path(path), overrides=overrides or None)
        conn.send((res.source, res.diagnosis))
    except BaseException as e:  # noqa: BLE001 - reported as the problem's diagnosis, the stage goes on
        conn.send((None, f"lowering raised {type(e).__name__}: {e}"))
    finally:
        conn.close()


def _lower_bounded(path: Path, timeout_s: float, overrides: dict | None = None):  # noqa: ANN202 - a LoweringResult
    """lower_spec in a forked child, killed after timeout_s: L3 38_LSTMBidirectional at published sizes
    ran over 1.5 h and 14 GB under fake tensors and froze every later problem of the stage."""
    import multiprocessing as mp

    from workbench.lowering import LoweringResult

    ctx = mp.get_context("fork")
    parent, child = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=_lower_in_child, args=(str(path), child, overrides or {}), daemon=True)
    proc.start()
    child.close()
    try:
        if parent.poll(timeout_s):
            try:
                source, diagnosis = parent.recv()
            except EOFError:  # the child died without an answer (killed for memory, a native crash)
                proc.join(5)
                return LoweringResult(None, f"lowering died with exit code {proc.exitcode}")
            return LoweringResult(source, diagnosis)
        return LoweringResult(None, f"lowering timed out after {timeout_s:.0f} s")
    finally:
        if proc.is_alive():
            proc.kill()
        proc.join(5)
        parent.close()


FIELDS = ["level", "problem", "status", "correct", "max_abs_err", "eager_us", "compile_us", "draft_us",
          "tuned_draft_us", "speedup_vs_eager", "speedup_vs_compile", "tuned_speedup_vs_eager", "tuned_config",
          "tune_tried", "tune_ok", "n_kernels", "first_call_s",
          "inductor_compile_s", "tf32", "wall_s", "eager_fp64_err", "draft_fp64_err", "reason"]


def _pool(n: int, device: str):  # noqa: ANN202 - a multiprocessing Pool
    import multiprocessing as mp

    from benchmarks import lowering_gpu_worker as wk

    ctx = mp.get_context("spawn")
    return ctx.Pool(n, initializer=wk.init_worker, initargs=(device, ctx.Lock() if n > 1 else None))


def run(args: argparse.Namespace) -> int:
    """Phase A (parallel, warm): every draft's first call and torch.compile in `--workers` processes, which
    fills Triton's and Inductor's on-disk caches and finds the drafts that break a CUDA context. Phase B
    (serial, one process, replaced after a fatal CUDA error): correctness, then CUDA-event medians of eager,
    torch.compile and the draft. Ends before --budget-s; what is left is written as not_run."""
    from benchmarks import lowering_gpu_worker as wk

    t_end = time.monotonic() + args.budget_s
    d = Path(args.dir)
    manifest = json.loads((d / "manifest.json").read_text())
    if args.levels:
        manifest = [m for m in manifest if str(m["level"]) in args.levels.split(",")]
    if args.limit:
        manifest = manifest[:args.limit]
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("TRITON_CACHE_DIR", str(Path(args.cache_dir).resolve() / "triton"))
    os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", str(Path(args.cache_dir).resolve() / "inductor"))
    rows = {i: {"level": m["level"], "problem": m["problem"]} for i, m in enumerate(manifest)}
    todo = []
    for i, m in enumerate(manifest):
        if "candidate" not in m:
            rows[i].update(status="not_lowered", correct=False, reason=m.get("diagnosis", ""))
        else:
            todo.append(i)
    # levels interleaved (1, 2, 3, 1, 2, ...): when the budget ends first, every level has timed rows
    by_level: dict[int, list[int]] = {}
    for i in todo:
        by_level.setdefault(manifest[i]["level"], []).append(i)
    todo = [i for k in range(max(map(len, by_level.values()), default=0)) for lv in sorted(by_level)
            for i in by_level[lv][k:k + 1]]
    job = {"dir": str(d), "device": args.device, "timing": args.timing_s, "max_reps": args.max_reps,
           "tune": args.tune}
    # phase A
    warm: dict[int, dict] = {}
    a_end = time.monotonic() + args.budget_s * args.warm_share
    if args.workers > 0 and todo:
        pool = _pool(args.workers, args.device)
        try:
            pending = {i: pool.apply_async(wk.measure, ({**job, "item": manifest[i], "cap_s": args.cap_s,
                                                         "compile": args.warm_compile, "oom_retries": 3,
                                                         "warm_only": True},)) for i in todo}
            # collected as they finish: waiting on them in order let one problem retrying out of memory
            # hold back every later result until phase A's deadline dropped them (run 3, level 1: 72 of 90)
            while pending and time.monotonic() < a_end:
                done = [i for i, res in pending.items() if res.ready()]
                if not done:
                    time.sleep(0.1)
                    continue
                for i in done:
                    res = pending.pop(i)
                    try:
                        warm[i] = res.get(timeout=0)
                    except Exception as exc:  # noqa: BLE001 - the worker died (killed for memory, native crash)
                        warm[i] = {"status": "error", "correct": False, "fatal": True,
                                   "reason": f"warm-up worker died: {type(exc).__name__}: {exc}"[:300]}
                    if wk.out_of_memory(warm[i]):  # beside the other workers' problems: phase B runs it alone
                        log.info("warm %s %s: out of memory beside the other workers, left to phase B",
                                 manifest[i]["level"], manifest[i]["problem"])
                        warm.pop(i)
                        continue
                    log.info("warm %s %s: %s %s", manifest[i]["level"], manifest[i]["problem"],
                             warm[i].get("status"), str(warm[i].get("reason", ""))[:120])
        finally:
            pool.terminate()
            pool.join()
    # phase B
    compile_left = args.compile_budget_s
    pool = _pool(1, args.device)
    try:
        for i in todo:
            w = warm.get(i, {})
            if w.get("fatal"):
                rows[i].update({k: w.get(k, "") for k in ("status", "correct", "reason", "first_call_s")})
                rows[i]["reason"] = f"(warm-up, not timed: breaks its CUDA context) {w.get('reason', '')}"[:300]
                continue
            left = t_end - time.monotonic() - 5.0
            if left < 3.0:
                if w:  # checked in the warm-up phase, not timed
                    rows[i].update({k: w[k] for k in ("status", "correct", "max_abs_err", "n_kernels", "first_call_s",
                                                      "tf32", "eager_fp64_err", "draft_fp64_err") if k in w})
                    rows[i]["reason"] = ("not timed (budget); correctness from the warm-up phase. "
                                         + str(w.get("reason", "")))[:300]
                else:
                    rows[i].update(status="not_run", reason="the call's --budget-s was spent")
                continue
            use_compile = compile_left > 0 and "compile_reason" not in w and todo.index(i) % args.compile_every == 0
            t0 = time.monotonic()
            res = pool.apply_async(wk.measure, ({**job, "item": manifest[i], "cap_s": min(args.cap_s, left),
                                                 "compile": use_compile, "warm_only": False,
                                                 "tune_configs": w.get("tune_warm")},))
            try:
                r = res.get(timeout=min(args.cap_s, left) + 10)
            except Exception as exc:  # noqa: BLE001 - hung or died: a fresh worker for the next problem
                r = {"status": "error", "correct": False, "fatal": True,
                     "reason": f"worker lost: {type(exc).__name__}: {exc}"[:300]}
            if use_compile:
                compile_left -= time.monotonic() - t0
            r.setdefault("reason", "")
            if w.get("compile_reason") and not r["reason"]:
                r["reason"] = w["compile_reason"]
            rows[i].update(r)
            log.info("%s %s: %s %s", manifest[i]["level"], manifest[i]["problem"], r.get("status"),
                     r.get("reason", "")[:100])
            if r.get("fatal"):
                pool.terminate()
                pool.join()
                pool = _pool(1, args.device)
    finally:
        pool.terminate()
        pool.join()
    for r in rows.values():
        e, c, dr = (float(r.get(k) or 0) for k in ("eager_us", "compile_us", "draft_us"))
        if dr > 0 and r.get("correct"):
            r["speedup_vs_eager"] = f"{e / dr:.4g}" if e else ""
            r["speedup_vs_compile"] = f"{c / dr:.4g}" if c else ""
            t = float(r.get("tuned_draft_us") or 0)
            if t > 0 and e:
                r["tuned_speedup_vs_eager"] = f"{e / min(t, dr):.4g}"
    _write(out, args, [rows[i] for i in range(len(manifest))])
    return 0


def merge(args: argparse.Namespace) -> int:
    """One table from several `run` calls (one device call each, levels or leftovers apart): per problem the
    row of the last part that ran it (status not `not_run`), else the first part's; summary.json over the
    merged rows; provenance.json lists each part's provenance."""
    parts = [Path(p) for p in args.parts.split(",")]
    merged: dict[tuple[str, str], dict] = {}
    for part in parts:
        with (part / "lowering_gpu.csv").open() as f:
            for r in csv.DictReader(f):
                key = (r["level"], r["problem"])
                if key not in merged or r.get("status") != "not_run":
                    merged[key] = {**r, "part": part.name}
    rows = [_typed(r) for r in sorted(merged.values(), key=lambda r: (int(r["level"]), _number(r["problem"])))]
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    with (out / "lowering_gpu.csv").open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=FIELDS + ["part"], extrasaction="ignore")
        w.writeheader()
        for r in rows:
            w.writerow({k: r.get(k, "") for k in FIELDS + ["part"]})
    (out / "summary.json").write_text(json.dumps(summarize(rows), indent=1))
    prov = {"merged_from": {p.name: json.loads((p / "provenance.json").read_text()) for p in parts
                            if (p / "provenance.json").is_file()},
            "rule": "per problem the row of the last part that ran it, else the first part's"}
    (out / "provenance.json").write_text(json.dumps(prov, indent=1))
    log.info("merged %d rows from %d parts into %s", len(rows), len(parts), out)
    return 0


def _number(problem: str) -> int:
    head = problem.split("_")[0]
    return int(head) if head.isdigit() else 0


def _typed(r: dict) -> dict:
    """A CSV row with `level` an int and `correct` a bool again, as `run` holds them."""
    return {**r, "level": int(r["level"]), "correct": r.get("correct") == "True"}


def summarize(rows: list[dict]) -> dict:
    from benchmarks import lowering_gpu_worker as wk

    out = {}
    for lvl in sorted({r["level"] for r in rows}):
        rs = [r for r in rows if r["level"] == lvl]
        ran = [r for r in rs if r.get("status") not in ("not_run", "not_lowered", None)]
        ok = [r for r in rs if r.get("correct") is True]
        ve = [float(r["speedup_vs_eager"]) for r in ok if r.get("speedup_vs_eager")]
        vc = [float(r["speedup_vs_compile"]) for r in ok if r.get("speedup_vs_compile")]
        vt = [float(r.get("tuned_speedup_vs_eager") or r["speedup_vs_eager"]) for r in ok
              if r.get("speedup_vs_eager")]
        tuned = [r for r in ok if r.get("tuned_speedup_vs_eager")]
        # the tuned draft against torch.compile, where both were timed
        vct = [float(r["compile_us"]) / min(float(r.get("tuned_draft_us") or r["draft_us"]), float(r["draft_us"]))
               for r in ok if r.get("compile_us") and r.get("draft_us")]
        out[str(lvl)] = {"problems": len(rs), "ran": len(ran), "correct": len(ok),
                         "timed": len(ve), "compile_timed": len(vc),
                         "correct_share_of_problems": round(len(ok) / len(rs), 4) if rs else None,
                         "geomean_vs_eager": round(wk.geomean(ve), 4) if ve else None,
                         "geomean_vs_compile": round(wk.geomean(vc), 4) if vc else None,
                         "fast_1_vs_eager": round(sum(x > 1 for x in ve) / len(rs), 4) if rs else None,
                         "fast_1_vs_compile": round(sum(x > 1 for x in vc) / len(rs), 4) if rs else None,
                         "below_0.2x_eager": sum(x < 0.2 for x in ve),
                         # after the offline tuner (--tune): each tuned row's best config, the others untuned
                         "tuned_rows": len(tuned),
                         "geomean_vs_eager_tuned": round(wk.geomean(vt), 4) if vt and tuned else None,
                         "fast_1_vs_eager_tuned": round(sum(x > 1 for x in vt) / len(rs), 4) if rs and tuned
                         else None,
                         "below_0.2x_eager_tuned": sum(x < 0.2 for x in vt) if tuned else None,
                         "geomean_vs_compile_tuned": round(wk.geomean(vct), 4) if vct and tuned else None,
                         "fast_1_vs_compile_tuned": round(sum(x > 1 for x in vct) / len(rs), 4) if rs and tuned
                         else None}
    return out


def provenance(args: argparse.Namespace) -> dict:
    import platform
    import subprocess

    import torch
    import triton

    p = {"date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "python": platform.python_version(),
         "torch": torch.__version__, "triton": triton.__version__, "device": args.device,
         "argv": sys.argv[1:], "timing": "CUDA events around each call, median" if args.device == "cuda"
         else "perf_counter, median (CPU interpreter: a dry run, not a speed)",
         "tf32": "off in eager and torch.compile unless the spec sets ALLOW_TF32",
         "tuned_draft_us": (f"--tune {args.tune}: up to {args.tune} configs of each correct draft "
                            "(workbench/lowering/tune.py), each checked against eager, then timed; the fastest "
                            "correct one, the untuned draft included" if args.tune else
                            "not measured: no offline-tuner budget in this call (--tune 0)")}
    # --commit first: a device copy of a working tree has its own git history, whose HEAD is not the code
    # that ran (run 3's files read the copy's base commit)
    try:
        head = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True,
                              cwd=Path(__file__).resolve().parents[1]).stdout.strip()
    except OSError:
        head = ""
    p["commit"] = args.commit or head
    if args.commit and head and not head.startswith(args.commit):
        p["git_head_where_it_ran"] = head
    if args.device == "cuda" and torch.cuda.is_available():
        p["gpu"] = torch.cuda.get_device_name(0)
        try:
            p["driver"] = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                                         capture_output=True, text=True).stdout.strip()
        except OSError:
            p["driver"] = ""
        p["cuda"] = torch.version.cuda
    return p


def _write(out: Path, args: argparse.Namespace, rows: list[dict]) -> None:
    with (out / "lowering_gpu.csv").open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=FIELDS, extrasaction="ignore")
        w.writeheader()
        for r in rows:
            w.writerow({k: r.get(k, "") for k in FIELDS})
    (out / "summary.json").write_text(json.dumps(summarize(rows), indent=1))
    (out / "provenance.json").write_text(json.dumps(provenance(args), indent=1))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("stage")
    s.add_argument("--root", default=str(Path(__file__).resolve().parents[2] / "shared" / "kernelbench"))
    s.add_argument("--picks", default="1:0:90:3,2:0:90:6,3:0:40:5",
                   help="level:start:stop[:step] of each level's problems sorted by number")
    s.add_argument("--dir", default=".cache/lowering_gpu")
    s.add_argument("--reuse", action="store_true", help="keep candidates an earlier stage call wrote")
    s.add_argument("--prepare-timeout", type=float, default=600.0,
                   help="seconds one problem may spend lowering before it is recorded as timed out")
    s.add_argument("--max-elems", type=int, default=0,
                   help="stage at reduced sizes (the suites' auto-sizer), for the CPU dry run; 0: published sizes")
    s.add_argument("--retry-failed", action="store_true", help="with --reuse, lower again the ones that failed")
    r = sub.add_parser("run")
    r.add_argument("--dir", default=".cache/lowering_gpu")
    r.add_argument("--out", default="lowering_gpu_out", help="folder: lowering_gpu.csv, summary.json, provenance.json")
    r.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    r.add_argument("--budget-s", type=float, default=400.0, help="the whole call ends before this many seconds")
    r.add_argument("--warm-share", type=float, default=0.4, help="share of --budget-s for phase A (parallel warm-up)")
    r.add_argument("--workers", type=int, default=8, help="phase A processes (0: no warm-up phase)")
    r.add_argument("--cap-s", type=float, default=60.0, help="seconds one problem may take in either phase")
    r.add_argument("--timing-s", type=float, default=0.15, help="seconds of timed calls per contender")
    r.add_argument("--max-reps", type=int, default=30)
    r.add_argument("--compile-budget-s", type=float, default=150.0,
                   help="phase B seconds for torch.compile (compiled, then timed), problems in manifest order")
    r.add_argument("--compile-every", type=int, default=1,
                   help="torch.compile every K-th problem of phase B's (level-interleaved) order")
    r.add_argument("--warm-compile", action="store_true", help="phase A also runs torch.compile (fills its cache)")
    r.add_argument("--tune", type=int, default=0,
                   help="per correct draft, time up to N configs of its TUNABLES (workbench/lowering/tune.py) after "
                        "the untuned timing, inside --cap-s; fills tuned_draft_us")
    r.add_argument("--levels", default="", help="e.g. 1,2 (default: all in the manifest)")
    r.add_argument("--limit", type=int, default=0, help="the first N problems of the manifest")
    r.add_argument("--cache-dir", default=".cache/lowering_gpu_cache")
    r.add_argument("--commit", default="", help="recorded when git is not available where it runs")
    g = sub.add_parser("merge", help="one table from several run calls' folders")
    g.add_argument("--parts", required=True, help="comma-separated run output folders, earliest first")
    g.add_argument("--out", required=True)
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s", stream=sys.stdout)
    return {"stage": stage, "run": run, "merge": merge}[args.cmd](args)


if __name__ == "__main__":
    sys.exit(main())
