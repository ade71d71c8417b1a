"""Lowered KernelBench candidates on a GPU at full size: correctness against eager and speed.

Two steps, because lowering needs this project's torch (2.13, on the development machine) and the GPU
machine has another (2.11) and no KernelBench folder:

    python benchmarks/lowering_gpu.py stage --picks 1:0:30,2:0:15,3:0:8 --dir .cache/lowering_gpu
        # here: lowers each picked problem at its published sizes, stages spec + candidate + manifest
        # in an ignored folder (.cache/ is in .gitignore) that the device call carries; nothing is committed
    PYTHONPATH=. python benchmarks/lowering_gpu.py run --dir .cache/lowering_gpu --out $OUT/gpu.csv
        # there: per problem, Model and ModelNew from the same seed on cuda, outputs compared with the
        # workbench tolerances, then each timed (CUDA events around back-to-back calls, median)

Speedup = eager median / candidate median (no offline tuning: the lowered candidate as generated).
A candidate that raises is recorded with its reason; a CUDA error ends the run (the context is lost),
and the problems left are marked as not run. Rows are written as they finish.
"""
from __future__ import annotations

import argparse
import csv
import importlib.util
import json
import shutil
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

FIELDS = ["level", "problem", "status", "correct", "max_abs_err", "eager_us", "lowered_us", "speedup", "n_kernels",
          "compile_s", "inductor_us", "speedup_vs_inductor", "inductor_compile_s", "reason"]
# torch.compile (inductor) of the reference, side by side, while this many seconds of compilation remain
_COMPILE = {"left_s": 0.0}


def stage(args: argparse.Namespace) -> int:
    from workbench.lowering import LoweringResult

    root = Path(args.root)
    out = Path(args.dir)
    if out.exists() and not args.reuse:
        shutil.rmtree(out)
    (out / "specs").mkdir(parents=True, exist_ok=True)
    (out / "candidates").mkdir(exist_ok=True)
    manifest = []
    for pick in args.picks.split(","):
        lvl, a, b, *step = pick.split(":")
        files = sorted((root / f"level{lvl}").glob("*.py"), key=lambda p: (int(p.stem.split("_")[0]), p.name))
        for f in files[int(a):int(b):int(step[0]) if step else 1]:
            staged = out / "candidates" / f"l{lvl}_{f.name}"
            if args.reuse and staged.is_file():  # lowered by an earlier stage call: same code, same source
                res = LoweringResult(staged.read_text(), "")
            else:
                res = _lower_bounded(f, args.prepare_timeout)
            row = {"level": int(lvl), "problem": f.stem, "spec": f"specs/l{lvl}_{f.name}", "diagnosis": res.diagnosis}
            shutil.copy(f, out / row["spec"])
            if res.source is not None:
                row["candidate"] = f"candidates/l{lvl}_{f.name}"
                (out / row["candidate"]).write_text(res.source)
            manifest.append(row)
            print(f"level {lvl} {f.stem}: {res.diagnosis or 'lowered'}", flush=True)
    (out / "manifest.json").write_text(json.dumps(manifest, indent=1))
    return 0


def _lower_in_child(path: str, conn) -> None:  # noqa: ANN001 - a Pipe end
    from workbench.lowering import lower_spec

    try:
        res = lower_spec(Path(path))
        conn.send((res.source, res.diagnosis))
    except BaseException as e:  # noqa: BLE001 - reported as the problem's diagnosis, the stage goes on
        conn.send((None, f"lowering raised {type(e).__name__}: {e}"))
    finally:
        conn.close()


def _lower_bounded(path: Path, timeout_s: float):  # noqa: ANN202 - a LoweringResult
    """lower_spec in a forked child, killed after timeout_s: L3 38_LSTMBidirectional at published sizes
    ran over 1.5 h and 14 GB under fake tensors and froze every later problem of the stage."""
    import multiprocessing as mp

    from workbench.lowering import LoweringResult

    ctx = mp.get_context("fork")
    parent, child = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=_lower_in_child, args=(str(path), child), daemon=True)
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


def _load(path: Path, name: str):  # noqa: ANN202 - a module
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    sys.modules[name] = mod
    spec.loader.exec_module(mod)  # type: ignore[union-attr]
    return mod


def _flat(o):  # noqa: ANN001, ANN202
    return [y for x in o for y in _flat(x)] if isinstance(o, (list, tuple)) else [o]


def _time_us(fn, budget_s: float = 0.4, max_reps: int = 50) -> float:  # noqa: ANN001
    import torch

    fn()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    fn()
    torch.cuda.synchronize()
    once = time.perf_counter() - t0
    reps = max(3, min(max_reps, int(budget_s / max(once, 1e-6))))
    times = []
    for _ in range(reps):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        fn()
        e.record()
        torch.cuda.synchronize()
        times.append(s.elapsed_time(e) * 1000.0)
    times.sort()
    return times[len(times) // 2]


def run(args: argparse.Namespace) -> int:
    import torch

    from workbench.tolerances import tolerance_for

    d = Path(args.dir)
    manifest = json.loads((d / "manifest.json").read_text())
    deadline = time.monotonic() + args.budget_s
    _COMPILE["left_s"] = args.compile_budget_s
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    lost = ""
    with out.open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=FIELDS)
        w.writeheader()
        for i, item in enumerate(manifest):
            row = {k: "" for k in FIELDS}
            row.update(level=item["level"], problem=item["problem"])
            if "candidate" not in item:
                row.update(status="not_lowered", correct=False, reason=item["diagnosis"])
            elif lost or time.monotonic() > deadline:
                row.update(status="not_run", reason=lost or "device-time budget of this call spent")
            else:
                try:
                    row.update(_one(d, item, i, tolerance_for))
                except Exception as exc:  # the candidate's own failure, with its reason
                    msg = f"{type(exc).__name__}: {exc}".splitlines()[0][:300]
                    row.update(status="error", correct=False, reason=msg)
                    if "CUDA" in msg or "cuda" in msg or "illegal" in msg:
                        lost = f"not run: an earlier problem broke the CUDA context ({msg[:80]})"
            w.writerow(row)
            f.flush()
            print(f"{row['level']} {row['problem']}: {row['status']} {row['speedup']} {row['reason'][:100]}",
                  flush=True)
            torch.cuda.empty_cache()
    return 0


def _one(d: Path, item: dict, i: int, tolerance_for) -> dict:  # noqa: ANN001
    import torch

    ref = _load(d / item["spec"], f"ref_{i}")
    cand = _load(d / item["candidate"], f"cand_{i}")
    torch.manual_seed(7)
    init = ref.get_init_inputs()
    torch.manual_seed(8)
    model = ref.Model(*init).cuda()
    torch.manual_seed(8)
    model_new = cand.ModelNew(*init).cuda()
    torch.manual_seed(9)
    inputs = [x.cuda() if isinstance(x, torch.Tensor) else x for x in ref.get_inputs()]
    with torch.no_grad():
        want = _flat(model(*inputs))
        t0 = time.perf_counter()
        got = _flat(model_new(*inputs))
        torch.cuda.synchronize()
        compile_s = time.perf_counter() - t0
        worst, ok, why = 0.0, True, ""
        for j, (a, b) in enumerate(zip(want, got)):
            if not isinstance(a, torch.Tensor):
                continue
            if a.shape != b.shape:
                ok, why = False, f"output {j}: shape {tuple(b.shape)} vs {tuple(a.shape)}"
                break
            atol, rtol = tolerance_for(a.dtype)
            err = (b.double() - a.double()).abs()
            worst = max(worst, float(err.max()) if err.numel() else 0.0)
            bad = (err > atol + rtol * a.double().abs()) & ~(torch.isnan(a) & torch.isnan(b))
            if bool(bad.any()):
                ok, why = False, f"output {j}: {int(bad.sum())} of {a.numel()} elements differ (max abs {worst:.3g})"
                break
        eager = _time_us(lambda: model(*inputs))
        lowered = _time_us(lambda: model_new(*inputs))
        ind: dict = {}
        if _COMPILE["left_s"] > 0:
            t0 = time.perf_counter()
            try:
                compiled = torch.compile(model)
                compiled(*inputs)
                torch.cuda.synchronize()
                ind["inductor_compile_s"] = f"{time.perf_counter() - t0:.1f}"
                ind_us = _time_us(lambda: compiled(*inputs))
                ind.update(inductor_us=f"{ind_us:.2f}", speedup_vs_inductor=f"{ind_us / lowered:.4f}")
            except Exception as exc:  # inductor's own failure: the row keeps its eager numbers
                ind["reason"] = "; ".join(x for x in (why, f"torch.compile: {type(exc).__name__}: {exc}"
                                                      .splitlines()[0][:200]) if x)
            _COMPILE["left_s"] -= time.perf_counter() - t0
    n_kernels = (d / item["candidate"]).read_text().count("@triton.jit")
    return {"status": "passed" if ok else "incorrect", "correct": ok, "max_abs_err": f"{worst:.3g}",
            "eager_us": f"{eager:.2f}", "lowered_us": f"{lowered:.2f}", "speedup": f"{eager / lowered:.4f}",
            "n_kernels": n_kernels, "compile_s": f"{compile_s:.2f}", "reason": why, **ind}


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
    r = sub.add_parser("run")
    r.add_argument("--dir", default=".cache/lowering_gpu")
    r.add_argument("--out", default="gpu.csv")
    r.add_argument("--budget-s", type=float, default=240.0)
    r.add_argument("--compile-budget-s", type=float, default=120.0,
                   help="seconds of torch.compile (inductor) of the references, problems in manifest order")
    args = ap.parse_args(argv)
    return stage(args) if args.cmd == "stage" else run(args)


if __name__ == "__main__":
    sys.exit(main())
