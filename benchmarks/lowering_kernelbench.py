"""Lower every KernelBench problem and check the candidates through the real harness (CPU, reduced sizes).

    python benchmarks/lowering_kernelbench.py --levels 1,2,3 [--max-elems 8192] [--slice 0:20]
        [--root ../shared/kernelbench] [--out results/lowering/kernelbench_cpu.csv] [--device cpu]

Each problem's module-level integer constants are scaled down by the suites' auto-sizer
(`workbench.suites.sizing.auto_size`: FakeTensorMode, no allocation) until every tensor holds at most
`--max-elems` elements; the same overrides go to the lowering and to the harness. One CSV row per
problem with the failure's one-line reason; rows already in the CSV are skipped (resumable).
The KernelBench files are read where they are, never copied.
"""
from __future__ import annotations

import csv
import logging
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("TRITON_INTERPRET", "1")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks import common  # noqa: E402

log = logging.getLogger("lowering_kernelbench")
FIELDS = ["level", "problem", "lowered", "status", "correct", "reason", "n_ops", "overrides", "lower_s", "eval_s",
          "max_abs_err", "commit"]


def _one_line(text: str) -> str:
    lines = [ln.strip() for ln in (text or "").strip().splitlines() if ln.strip()]
    return (lines[0] if lines else "")[:300]


def problems(root: Path, levels: list[int], sl: slice) -> list[tuple[int, Path]]:
    def key(p: Path) -> tuple[int, str]:
        head = p.stem.split("_", 1)[0]
        return (int(head) if head.isdigit() else 10**6, p.name)

    out = []
    for lvl in levels:
        files = sorted((root / f"level{lvl}").glob("*.py"), key=key)
        out += [(lvl, f) for f in files[sl]]
    return out


def main(argv: list[str] | None = None) -> int:
    ap = common.parser(__doc__, out_default="results/lowering/kernelbench_cpu.csv", out_file=True)
    ap.add_argument("--root", default=str(Path(__file__).resolve().parents[2] / "shared" / "kernelbench"))
    ap.add_argument("--levels", default="1,2,3")
    ap.add_argument("--slice", default="::", help="python slice start:stop:step of each level's problems, by number")
    ap.add_argument("--problems", default="", help="comma-separated problem-name prefixes (e.g. 33_,34_)")
    ap.add_argument("--max-elems", type=int, default=8192)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--timeout", type=float, default=240.0)
    args = ap.parse_args(argv)
    common.setup_logging(logging.WARNING)
    root = Path(args.root)
    if not root.is_dir():
        print(f"KernelBench folder not found: {root}", file=sys.stderr)
        return 2
    parts = (args.slice.split(":") + ["", ""])[:3]
    sl = slice(*(int(x) if x else None for x in parts))
    todo = problems(root, [int(x) for x in args.levels.split(",")], sl)
    if args.problems:
        prefixes = tuple(p for p in args.problems.split(",") if p)
        todo = [t for t in todo if t[1].stem.startswith(prefixes)]
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    done = set()
    if out.is_file():
        with out.open() as f:
            done = {(int(r["level"]), r["problem"]) for r in csv.DictReader(f)}
    new_file = not out.is_file()
    import subprocess

    from tqdm import tqdm

    from workbench.harness import Harness
    from workbench.lowering import lower_spec
    from workbench.suites.sizing import auto_size

    # the CSV's own commit format (short, "+dirty" for the lowering code only), kept across resumed runs
    commit = args.commit or subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                                           text=True, cwd=common.REPO).stdout.strip()
    dirty = subprocess.run(["git", "status", "--porcelain", "--", "workbench/lowering"], capture_output=True,
                           text=True, cwd=common.REPO).stdout.strip()
    commit += "+dirty" if dirty else ""

    with Harness(device=args.device) as harness, out.open("a", newline="") as f:
        w = csv.DictWriter(f, fieldnames=FIELDS)
        if new_file:
            w.writeheader()
        for lvl, path in tqdm([t for t in todo if (t[0], t[1].stem) not in done], desc="kernelbench", unit="problem"):
            row = {"level": lvl, "problem": path.stem, "lowered": False, "status": "", "correct": False, "reason": "",
                   "n_ops": 0, "overrides": "", "lower_s": 0.0, "eval_s": 0.0, "max_abs_err": "", "commit": commit}
            try:
                overrides = auto_size(path, args.max_elems) if args.max_elems else {}
            except Exception as exc:  # a spec the sizer cannot load is this problem's failure, with its reason
                row.update(status="sizing_failed", reason=_one_line(f"{type(exc).__name__}: {exc}"))
                w.writerow(row)
                f.flush()
                continue
            row["overrides"] = " ".join(f"{k}={v}" for k, v in sorted(overrides.items()))
            t0 = time.perf_counter()
            res = lower_spec(path, overrides)
            row["lower_s"] = round(time.perf_counter() - t0, 2)
            row["n_ops"] = len(res.ops)
            if res.source is None:
                row.update(status="not_lowered", reason=res.diagnosis)
            else:
                row["lowered"] = True
                t1 = time.perf_counter()
                er = harness.evaluate(path, res.source, trials=1, timeout_s=args.timeout, overrides=overrides)
                row["eval_s"] = round(time.perf_counter() - t1, 2)
                row.update(status=er.status.value, correct=bool(er.correct),
                           reason="" if er.correct else _one_line(er.error or ", ".join(er.violations)),
                           max_abs_err="" if er.max_abs_err is None else f"{er.max_abs_err:.3g}")
            w.writerow(row)
            f.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
