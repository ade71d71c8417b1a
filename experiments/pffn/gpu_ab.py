"""Lab book, frozen: ran at commit 549d386 as `case_studies.pffn.gpu_ab`; results: results/case_studies/pffn/
(ab_w2_early.json, host_tma/).
Nothing imports this file and it is not maintained: its imports name the modules as they were at 549d386;
to re-run it, check that commit out. The maintained benchmark is `benchmarks/case_studies/run.py`.

A side-by-side A/B of PFFN kernel configs at one shape on a GPU, before a recorded benchmark.

    PYTHONPATH=. python -m case_studies.pffn.gpu_ab --out "$OUT/ab.json" --shape 16,64,128,256 \
        --configs '[{"BLOCK_B":16,"BLOCK_KC":128,"SPLIT_K":2,"num_warps":4,"num_stages":1,"TMA":0}, ...]'

Each config is checked against the reference in fp16 and bf16, then timed as CUDA-graph replays and
with plain launches (L2 flushed before every call, `case_studies/common/timing.py`), in `--rounds`
interleaved rounds so that slow drift of the machine lands on every config alike; eager PyTorch is timed
in the same rounds. Medians of the round medians go to the JSON. After the checks on the first inputs,
each config is checked again on fresh tensors of the same signature (the recorded launch plan's path,
which must follow the new pointers: host TMA descriptors included), and its host time a call (Python
to the launch, no synchronization) is recorded.
"""
from __future__ import annotations

import argparse
import json
import logging
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import torch

log = logging.getLogger("pffn.gpu_ab")


def _host_us(fn: Any, n: int = 200) -> float:
    """Median host time of one call (no synchronization inside; the queue stays short)."""
    ts = []
    for _ in range(n):
        t0 = time.perf_counter()
        fn()
        ts.append((time.perf_counter() - t0) * 1e6)
        if len(ts) % 20 == 0:
            torch.cuda.synchronize()
    return statistics.median(ts)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--shape", default="16,64,128,256", help="N,B,D,K")
    ap.add_argument("--configs", required=True, help="a JSON list of pffn configs")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--commit", default=None)
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s", stream=sys.stdout)
    from case_studies.common.timing import bench, bench_graph
    from case_studies.pffn import kernel as pk
    from case_studies.pffn.bench import make_inputs
    from case_studies.pffn.reference import pffn_reference
    from workbench.provenance import collect

    n, b, d, k = (int(v) for v in args.shape.split(","))
    p = {"N": n, "B": b, "D": d, "K": k}
    configs: list[dict[str, Any]] = json.loads(args.configs)
    prov = collect()
    if args.commit:
        prov["commit"] = args.commit
    res: dict[str, Any] = {"provenance": prov, "params": p, "configs": configs, "checks": [], "timing": {}}
    tol = {"float16": (1e-2, 1e-2), "bfloat16": (6e-2, 2e-2)}
    for dt, (atol, rtol) in tol.items():
        ins = make_inputs(p, getattr(torch, dt), "cuda")
        ref = pffn_reference(*ins).float()
        for i, cfg in enumerate(configs):
            for _ in range(3):      # back to back: the split-K counters must return to zero
                out = pk.pffn(*ins, config=cfg).float()
            torch.cuda.synchronize()
            res["checks"].append({"dtype": dt, "config": i, "ok": bool(torch.allclose(out, ref, atol=atol, rtol=rtol)),
                                  "max_abs_err": float((out - ref).abs().max())})
            # same shapes, strides and dtype, new pointers (the old tensors live on): the plan path
            fresh = tuple(torch.randn_like(t) * t.float().std().item() + t.float().mean().item() for t in ins)
            out2 = pk.pffn(*fresh, config=cfg).float()
            ref2 = pffn_reference(*fresh).float()
            torch.cuda.synchronize()
            res["checks"].append({"dtype": dt, "config": i, "fresh_tensors": True,
                                  "ok": bool(torch.allclose(out2, ref2, atol=atol, rtol=rtol)),
                                  "max_abs_err": float((out2 - ref2).abs().max())})
    log.info("checks: %s", res["checks"])
    ins = make_inputs(p, torch.float16, "cuda")
    fns = {"eager": lambda: pffn_reference(*ins)}
    for i, cfg in enumerate(configs):
        fns[f"config{i}"] = (lambda c: (lambda: pk.pffn(*ins, config=c)))(cfg)
    res["host_us"] = {name: _host_us(fn) for name, fn in fns.items()}
    log.info("host us a call: %s", {nm: round(v, 2) for nm, v in res["host_us"].items()})
    samples: dict[str, dict[str, list[float]]] = {name: {"graph": [], "plain": []} for name in fns}
    for r in range(args.rounds):
        for name, fn in fns.items():
            samples[name]["graph"].append(bench_graph(fn, warmup_ms=5, rep_ms=30).median_us)
            samples[name]["plain"].append(bench(fn, warmup_ms=5, rep_ms=30).median_us)
        log.info("round %d: %s", r, {nm: {m: round(v[-1], 2) for m, v in s.items()} for nm, s in samples.items()})
    res["timing"] = {name: {m: {"median_us": statistics.median(v), "rounds": v} for m, v in s.items()}
                     for name, s in samples.items()}
    Path(args.out).write_text(json.dumps(res, indent=1, default=str))
    log.info("%s", {nm: {m: round(t["median_us"], 2) for m, t in s.items()} for nm, s in res["timing"].items()})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
