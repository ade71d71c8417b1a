"""A/B of kernel configs of one case study, side by side in one process, from a YAML file; optionally the
same file at another git revision (fla's `run.py --op NAME --base main`).

    PYTHONPATH=. python benchmarks/case_studies/ab.py --case pffn --configs ab.yaml --out OUT
        [--base REV] [--rounds 3] [--commit SHA] [--smoke]

The YAML file (the configs that one-off scripts used to write inline):

    case: pffn                        # optional: must match --case
    shapes: [b256_d256, {name: mine, N: 16, B: 128, D: 256, K: 256}]   # BENCHMARK shape names, or dicts
    dtypes: [float16]                 # float cases; exact cases ignore it
    modes: [graph]                    # plain and/or graph
    rep_ms: 50                        # optional, as in BENCHMARK
    baseline: eager                   # a contender of the case (default eager), timed beside the configs
    configs:
      shipped: null                   # null: the kernel's own choice (autotuner, rules)
      bkc64: {BLOCK_B: 16, BLOCK_KC: 64, num_warps: 4, num_stages: 2}

Each config becomes a contender (`<case>/bench.py: configured(config)`), checked against the baseline's
output like every benchmark row and timed in `--rounds` interleaved rounds (the median of the round
medians is reported: launch-bound timings drift over tens of seconds on the lent machine). Writes
`ab.csv` (one row per shape x dtype x config x mode x revision, provenance on every row), `ab.md` and
`log.txt`. `--base REV` also runs the file on a `git worktree` of REV (a local machine with history: the
GPU machine's copy has no `.git`) and adds the ratio head / base per cell.
"""
from __future__ import annotations

import argparse
import functools
import json
import logging
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

if __package__ in (None, ""):   # run as a script: the repository root on the path, as with PYTHONPATH=.
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    if os.environ.get("AB_CODE_ROOT"):   # --base's child: the case studies of that revision, this driver
        sys.path.insert(0, os.environ["AB_CODE_ROOT"])

from workbench.env import ensure_interpreter_if_no_gpu  # noqa: E402  (before anything imports triton)

ensure_interpreter_if_no_gpu()

import torch  # noqa: E402
from tqdm import tqdm  # noqa: E402

from benchmarks import common  # noqa: E402
from benchmarks.case_studies.registry import CaseConfig, get_case  # noqa: E402

log = logging.getLogger("benchmarks.case_studies.ab")


def load_plan(path: Path) -> dict[str, Any]:
    """The YAML file, checked: a clear ValueError naming what is wrong, nothing half-run."""
    import yaml

    plan = yaml.safe_load(path.read_text())
    if not isinstance(plan, dict) or not isinstance(plan.get("configs"), dict) or not plan["configs"]:
        raise ValueError(f"{path}: expected a mapping with a non-empty `configs:` mapping (name: config or null)")
    if not plan.get("shapes"):
        raise ValueError(f"{path}: `shapes:` lists BENCHMARK shape names or shape dicts")
    for name, cfg in plan["configs"].items():
        if cfg is not None and not isinstance(cfg, dict):
            raise ValueError(f"{path}: config {name!r} must be a mapping or null, got {type(cfg).__name__}")
    bad = [m for m in plan.get("modes", ["plain", "graph"]) if m not in ("plain", "graph")]
    if bad:
        raise ValueError(f"{path}: unknown launch modes {bad}: plain, graph")
    return plan


def resolve_shapes(cfg: CaseConfig, plan: dict[str, Any]) -> list[dict[str, Any]]:
    """Shape names looked up in the case's BENCHMARK; dicts taken as they are (named `shape<i>` if unnamed)."""
    known = {s["name"]: s for sweep in cfg.bench().BENCHMARK["sweeps"] for s in sweep["shapes"]}
    out = []
    for i, s in enumerate(plan["shapes"]):
        if isinstance(s, str):
            if s not in known:
                raise ValueError(f"unknown shape {s!r} for {cfg.name}: one of {', '.join(sorted(known))}")
            out.append(dict(known[s]))
        else:
            out.append({"name": f"shape{i}", **s})
    return out


def contender_factory(cfg: CaseConfig, case: Any, config: dict[str, Any] | None) -> Any:
    """`bench.configured(config)`; at a revision older than it, a float case's kernel function with
    `config=` (the contract every float case study's entry point has). None: the shipped kernel contender."""
    bench = cfg.bench()
    if config is None:
        return case.contenders["triton" if "triton" in case.contenders else bench.KERNELS[0]]
    if hasattr(bench, "configured"):
        return bench.configured(config)
    if cfg.exact:
        raise RuntimeError(f"{cfg.name}: this revision's bench.py has no configured(config)")
    from case_studies.common.contenders import kernel

    return kernel(functools.partial(getattr(cfg.kernel(), cfg.name), config=dict(config)))


def measure(cfg: CaseConfig, plan: dict[str, Any], rounds: int, smoke: bool) -> list[dict[str, Any]]:
    """Every config and the baseline on every shape, in `rounds` interleaved rounds; one row per cell."""
    from case_studies.common.runner import BenchmarkDecl

    bench = cfg.bench()
    shapes = [{"name": "smoke", **cfg.smoke_shape}] if smoke else resolve_shapes(cfg, plan)
    baseline = plan.get("baseline", "eager")
    names = {f"cfg:{k}": v for k, v in plan["configs"].items()}
    case = bench.case()
    case.contenders.update({n: contender_factory(cfg, case, c) for n, c in names.items()})
    case.roles.update({n: "kernel" for n in names})
    modes = ["plain"] if smoke else list(plan.get("modes", ["plain", "graph"]))
    dtypes = bench.BENCHMARK["sweeps"][0]["dtypes"][:1] if cfg.exact else list(plan.get("dtypes", ["float16"]))
    rep_ms = 3 if smoke else float(plan.get("rep_ms", bench.BENCHMARK.get("rep_ms", 50)))
    device = "cuda" if torch.cuda.is_available() else "cpu"
    samples: dict[tuple, list[dict[str, Any]]] = {}
    for _ in tqdm(range(rounds), desc=f"{cfg.name} A/B rounds", unit="round"):
        decl = BenchmarkDecl.from_dict({"name": f"{cfg.name}_ab", "warmup_ms": rep_ms / 5, "rep_ms": rep_ms,
                                        "sweeps": [{"name": "ab", "shapes": shapes, "dtypes": dtypes,
                                                    "contenders": [baseline, *names], "modes": modes}]})
        if cfg.exact:
            from case_studies.common.preprocessing import run_exact_benchmark

            got = run_exact_benchmark(decl, case, device=device, rounds=1)
        else:
            from case_studies.common.runner import run_benchmark

            got = run_benchmark(decl, case, device=device)
        for row in got:
            d = row.to_dict()
            samples.setdefault((d["shape"], d["dtype"], d["contender"], d["mode"]), []).append(d)
    out = []
    for (shape, dtype, contender, mode), rs in samples.items():
        ok = [x for x in rs if x["status"] == "ok" and x["median_us"] is not None]
        meds = sorted(x["median_us"] for x in ok)
        first = rs[0]
        out.append({"shape": shape, "params": first["params"], "dtype": dtype,
                    "config": contender.removeprefix("cfg:"), "mode": mode,
                    "config_json": json.dumps(names.get(contender), sort_keys=True),
                    "status": "ok" if len(ok) == len(rs) else next(x["status"] for x in rs if x not in ok),
                    "median_us": meds[len(meds) // 2] if meds else None, "rounds": len(meds),
                    "round_medians_us": json.dumps([round(m, 3) for m in meds]),
                    "max_abs_err": first.get("max_abs_err"),
                    "error": next((x["error"] for x in rs if x.get("error")), "")[:500]})
    return out


def run_base(args: Any, out: Path) -> list[dict[str, Any]]:
    """This script on a worktree of `args.base` (its case_studies/ code, this file's driver)."""
    root = common.REPO
    tmp = Path(tempfile.mkdtemp(prefix="ab_base_"))
    wt = tmp / "tree"
    subprocess.run(["git", "-C", str(root), "worktree", "add", "--detach", str(wt), args.base], check=True,
                   capture_output=True, text=True)
    try:
        cmd = [sys.executable, str(Path(__file__).resolve()), "--case", args.case, "--configs",
               str(Path(args.configs).resolve()), "--out", str(out / "base"), "--rounds", str(args.rounds),
               "--label", f"base {args.base}"] + (["--smoke"] if args.smoke else [])
        env = {**os.environ, "AB_CODE_ROOT": str(wt), "WB_COMMIT": subprocess.run(
            ["git", "-C", str(wt), "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()}
        subprocess.run(cmd, check=True, cwd=str(wt), env=env)
    finally:
        subprocess.run(["git", "-C", str(root), "worktree", "remove", "--force", str(wt)], capture_output=True)
    from case_studies.common.results import read_rows

    return read_rows(out / "base" / "ab.csv")


def table(rows: list[dict[str, Any]]) -> str:
    """Per (shape, dtype, mode): each config's median, its ratio to the baseline's, and head / base."""
    lines = ["| shape | dtype | mode | config | revision | median us | status | head / base |", "|" + "---|" * 8]
    base = {(r["shape"], r["dtype"], r["mode"], r["config"]): r for r in rows if r["revision"] != "head"}
    for r in sorted(rows, key=lambda r: (r["shape"], r["dtype"], r["mode"], r["config"], r["revision"])):
        b = base.get((r["shape"], r["dtype"], r["mode"], r["config"]))
        ratio = "-"
        if r["revision"] == "head" and b and r["median_us"] and b["median_us"]:
            ratio = f"{float(r['median_us']) / float(b['median_us']):.2f}"
        med = "-" if r["median_us"] in (None, "") else f"{float(r['median_us']):.2f}"
        lines.append(f"| {r['shape']} | {r['dtype']} | {r['mode']} | {r['config']} | {r['revision']} | {med} | "
                     f"{r['status']} | {ratio} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = common.parser(__doc__)
    ap.add_argument("--case", required=True)
    ap.add_argument("--configs", required=True, type=Path, help="the YAML file (see the module docstring)")
    ap.add_argument("--base", default=None, help="a git revision to run the same file at, for head / base")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--label", default="head", help=argparse.SUPPRESS)   # set by --base for its child run
    ap.add_argument("--smoke", action="store_true", help="the case's tiny shape on the CPU: plumbing only")
    args = ap.parse_args(argv)
    try:
        cfg = get_case(args.case)
        plan = load_plan(args.configs)
        if plan.get("case", args.case) != args.case:
            raise ValueError(f"{args.configs} is for case {plan['case']!r}, not {args.case!r}")
    except (KeyError, ValueError, OSError) as e:
        print(f"ab.py: {e.args[0] if isinstance(e, KeyError) else e}", file=sys.stderr)
        return 2
    if not torch.cuda.is_available() and not args.smoke:
        print("ab.py: no CUDA device: A/B timings need a GPU (use --smoke for a CPU plumbing check)", file=sys.stderr)
        return 2
    run = common.start(args)
    try:
        rows = [dict(r, revision=args.label, code_commit=run.provenance.get("commit"))
                for r in measure(cfg, plan, max(1, args.rounds), args.smoke)]
    except ValueError as e:
        log.error("%s", e)
        return 2
    if args.base:
        # the base rows keep their own commit; the provenance columns written below are this run's
        rows += [dict({k: v for k, v in r.items() if not k.startswith("prov_")}, code_commit=r.get("prov_commit"))
                 for r in run_base(args, run.out)]
    from case_studies.common.results import write_rows

    write_rows(rows, run.out / "ab.csv", run.provenance)
    if args.label == "head":
        text = table(rows)
        (run.out / "ab.md").write_text(text + "\n")
        log.info("\n%s", text)
    return 0 if all(r["status"] == "ok" for r in rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())
