"""Lab book, frozen: ran at commit 75b3dde as `case_studies.optimized_fm.gpu_ab`; results:
results/case_studies/optimized_fm/gpu_ab/.
Nothing imports this file and it is not maintained: its imports name the modules as they were at 75b3dde;
to re-run it, check that commit out. The maintained benchmark is `benchmarks/case_studies/run.py`.

Does the Optimized FM autotuner pick the fastest config? Every config it may choose, side by side, at
every FP16 shape of the benchmark, on a GPU.

    PYTHONPATH=. python -m case_studies.optimized_fm.gpu_ab --out "$OUT/fm_ab.json" --commit SHA

The autotuner times configs with Triton's `do_bench` (plain launches through its autotuned launch path,
L2 flushed); the recorded benchmark times the chosen kernel as CUDA-graph replays with the L2 flushed.
Here, per shape: the pick of the normal call path (the autotuner's, or the shape's pinned
`kernel.SHAPE_RULES` config), then every config the pruner keeps
(`kernel.configs_for`), each checked against the reference with its output poisoned with NaN first,
then all of them and eager timed as CUDA-graph replays (`case_studies.common.timing.bench_graph`, L2
flushed before every call) in `--rounds` interleaved rounds; medians of the round medians go to the JSON
with the fastest config and the pick's distance from it.
"""
from __future__ import annotations

import argparse
import json
import logging
import statistics
import sys
from pathlib import Path
from typing import Any

import torch

log = logging.getLogger("optimized_fm.gpu_ab")


def benchmark_shapes(dtype: str = "float16") -> list[dict[str, Any]]:
    """Every shape of the benchmark's sweeps in `dtype`, once each, in sweep order."""
    from case_studies.optimized_fm.bench import BENCHMARK

    out, seen = [], set()
    for sweep in BENCHMARK["sweeps"]:
        if dtype in sweep["dtypes"] and "triton" in sweep["contenders"]:
            for s in sweep["shapes"]:
                if s["name"] not in seen:
                    seen.add(s["name"])
                    out.append(s)
    return out


def config_name(cfg: dict[str, Any]) -> str:
    return (f"D{cfg['BLOCK_D']}_B{cfg['BLOCK_B']}_{'pipe' if cfg.get('PIPELINE') else 'nopipe'}"
            f"{'_T' if cfg.get('TRANSPOSED') else ''}_w{cfg['num_warps']}_s{cfg['num_stages']}")


def run_shape(p: dict[str, Any], rounds: int, rep_ms: float) -> dict[str, Any]:
    from case_studies.common.timing import bench_graph
    from case_studies.optimized_fm import kernel as fk
    from case_studies.optimized_fm.bench import TOLERANCES, make_inputs
    from case_studies.optimized_fm.reference import optimized_fm_reference

    x, y = make_inputs(p, torch.float16, "cuda")
    ref = optimized_fm_reference(x, y).float()
    atol, rtol = TOLERANCES["float16"]
    fk.optimized_fm(x, y)                                   # the pick, as the benchmark gets it
    rule = fk.rule_config(p["B"], p["N"], p["D"], p["K"], torch.float16)
    picks = [rule] if rule else [c for k, c in fk.best_config().items() if tuple(k[:3]) == (p["N"], p["D"], p["K"])]
    pick = config_name(picks[0]) if picks else None
    configs = {config_name(c): c for c in fk.configs_for(p)}
    res: dict[str, Any] = {"shape": p["name"], "params": p, "pick": pick, "checks": {}, "timing": {}}
    fns = {"eager": lambda: optimized_fm_reference(x, y)}
    for name, cfg in configs.items():
        out = fk.optimized_fm(x, y, config=cfg)
        out.fill_(float("nan"))                              # the next call must write every element
        out = fk.optimized_fm(x, y, config=cfg).float()
        torch.cuda.synchronize()
        ok = bool(torch.allclose(out, ref, atol=atol, rtol=rtol))
        res["checks"][name] = {"ok": ok, "max_abs_err": float((out - ref).abs().max())}
        if ok:
            fns[name] = (lambda c: (lambda: fk.optimized_fm(x, y, config=c)))(cfg)
    samples: dict[str, list[float]] = {name: [] for name in fns}
    for _ in range(rounds):
        for name, fn in fns.items():
            samples[name].append(bench_graph(fn, warmup_ms=5, rep_ms=rep_ms).median_us)
    med = {name: statistics.median(v) for name, v in samples.items()}
    res["timing"] = {name: {"median_us": med[name], "rounds": samples[name]} for name in fns}
    kern = {n: t for n, t in med.items() if n != "eager"}
    if kern:
        best = min(kern, key=kern.get)
        res["best"] = best
        res["pick_over_best"] = kern[pick] / kern[best] if pick in kern else None
    log.info("%s: pick %s, best %s; %s", p["name"], pick, res.get("best"),
             {n: round(t, 2) for n, t in sorted(med.items(), key=lambda kv: kv[1])})
    return res


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--rep-ms", type=float, default=20.0)
    ap.add_argument("--commit", default=None)
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s", stream=sys.stdout)
    from case_studies.optimized_fm.bench import warm_compile_cache
    from workbench.provenance import collect

    prov = collect()
    if args.commit:
        prov["commit"] = args.commit
    warm_compile_cache()          # every config of every benchmarked shape, compiled in parallel first
    shapes = []
    for p in benchmark_shapes():
        try:
            shapes.append(run_shape(p, args.rounds, args.rep_ms))
        except Exception as exc:  # one shape's failure is reported, the others still run
            log.exception("shape %s failed", p["name"])
            shapes.append({"shape": p["name"], "error": f"{type(exc).__name__}: {exc}"})
        Path(args.out).write_text(json.dumps({"provenance": prov, "rounds": args.rounds, "shapes": shapes},
                                             indent=1, default=str))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
