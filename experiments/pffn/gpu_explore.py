"""Lab book, frozen: ran at commit 5718fa4 as `case_studies.pffn.gpu_explore`; results: results/case_studies/pffn/
(explore_splitk.json, explore_descriptors.json, profile_round1/, profile_round2/).
Nothing imports this file and it is not maintained: its imports name the modules as they were at 5718fa4;
to re-run it, check that commit out. The maintained benchmark is `benchmarks/case_studies/run.py`.

One exploratory GPU call for PFFN: split-K (splitk.py) against the one-pass kernel, side by side.

    PYTHONPATH=. python -m case_studies.pffn.gpu_explore --out "$OUT" [--budget-s 120]

1. compiles every candidate config in parallel worker processes (Triton's disk cache);
2. checks the split-K kernel on the GPU: odd shapes in every dtype (TMA and block-pointer paths),
   back-to-back calls on fresh data (the counters must reset), CUDA-graph replay on fresh data with
   plain calls in between (the same workspace);
3. times eager and every candidate as CUDA-graph replays (L2 flushed, medians), the best of each
   variant with plain launches too;
4. a Proton probe profile (cycles per region) of the one-pass and the split-K kernels at B 64 and the
   one-pass kernel at B 4096.

Writes `explore_splitk.json` and `probes.tar.gz` to `--out`; stops starting new work past the budget.
"""
from __future__ import annotations

import argparse
import json
import logging
import sys
import tarfile
import time
from pathlib import Path
from typing import Any

import torch

log = logging.getLogger("pffn.gpu_explore")
ROUND = 1
SMOKE = not torch.cuda.is_available()   # a CPU dry run of the script's logic (interpreter, tiny shapes)
DEV = "cpu" if SMOKE else "cuda"

F = dict  # a config: BLOCK_B, BLOCK_KC, num_warps, num_stages (+ SPLIT_K for split-K)


def fused(bb: int, kc: int, nw: int, ns: int) -> dict[str, int]:
    return F(BLOCK_B=bb, BLOCK_KC=kc, num_warps=nw, num_stages=ns)


def split(bb: int, kc: int, sk: int, nw: int, ns: int) -> dict[str, int]:
    return F(BLOCK_B=bb, BLOCK_KC=kc, SPLIT_K=sk, num_warps=nw, num_stages=ns)


# (B, D): candidates. The one-pass entries include the configs the autotuner picked in the last run.
CANDIDATES: dict[tuple[int, int], list[dict[str, int]]] = {
    (64, 128): [fused(16, 128, 4, 2), fused(16, 64, 4, 2),
                split(16, 64, 4, 4, 1), split(16, 32, 8, 4, 1), split(16, 128, 2, 4, 1), split(16, 16, 16, 4, 1),
                split(32, 64, 4, 4, 1), split(32, 32, 8, 4, 1), split(32, 16, 16, 4, 1), split(64, 32, 8, 4, 1),
                split(64, 64, 4, 4, 1), split(64, 16, 16, 4, 1), split(16, 64, 2, 4, 2), split(32, 128, 2, 4, 1)],
    (256, 256): [fused(16, 64, 4, 2),
                 split(16, 64, 4, 4, 1), split(16, 64, 2, 4, 2), split(16, 128, 2, 4, 1), split(32, 64, 4, 4, 1),
                 split(32, 32, 8, 4, 1), split(32, 64, 2, 4, 2), split(32, 128, 2, 4, 1), split(64, 64, 4, 8, 1),
                 split(64, 32, 8, 8, 1), split(64, 64, 2, 8, 2), split(64, 128, 2, 8, 1), split(32, 16, 16, 4, 1),
                 split(64, 16, 16, 4, 1)],
    (512, 256): [fused(16, 64, 4, 2), fused(32, 64, 4, 2), fused(128, 64, 8, 2),
                 split(32, 64, 4, 4, 1), split(64, 64, 4, 8, 1), split(64, 64, 2, 8, 2), split(128, 64, 4, 8, 1),
                 split(128, 64, 2, 8, 2), split(64, 32, 8, 8, 1)],
    (1024, 256): [fused(128, 64, 8, 2), fused(128, 32, 8, 3),
                  split(64, 64, 4, 8, 1), split(128, 64, 4, 8, 1), split(128, 64, 2, 8, 2), split(128, 128, 2, 8, 1)],
    (4096, 256): [fused(128, 64, 8, 2), fused(128, 32, 8, 3), fused(128, 32, 8, 4), fused(128, 128, 8, 1),
                  fused(64, 32, 4, 2), fused(64, 64, 4, 2), fused(64, 32, 4, 3), fused(64, 64, 4, 1),
                  split(128, 64, 2, 8, 2)],
    (1024, 64): [fused(128, 64, 8, 2), split(128, 64, 2, 8, 2), split(64, 64, 4, 4, 1)],
    (1024, 128): [fused(128, 64, 8, 2), split(128, 64, 2, 8, 2), split(64, 64, 4, 4, 1)],
    (1024, 100): [fused(128, 64, 8, 2), split(128, 64, 2, 8, 2), split(64, 64, 4, 4, 1)],
    (1024, 200): [fused(128, 64, 8, 2), split(128, 64, 2, 8, 2), split(64, 64, 4, 4, 1)],
}
# Round 2 (after round 1 showed split-K at best level with the one-pass kernel and a profile with much
# of each CTA's time outside the probed regions): the descriptor paths. TMA=0 takes block pointers for
# the weights; IO_TMA=1 moves X and out through TMA boxes too.
def io(cfg: dict[str, int], tma: int = 1, io_tma: int = 0) -> dict[str, int]:
    return dict(cfg, TMA=tma, IO_TMA=io_tma)


def variants(cfg: dict[str, int]) -> list[dict[str, int]]:
    return [io(cfg, t, i) for t in (1, 0) for i in (0, 1)]


ROUND2: dict[tuple[int, int], list[dict[str, int]]] = {
    (64, 128): [*variants(fused(16, 128, 4, 2)), io(fused(16, 64, 4, 2), 0), io(split(16, 64, 4, 4, 1), 0),
                io(split(16, 128, 2, 4, 1), 0)],
    (256, 256): [*variants(fused(16, 64, 4, 2)), io(fused(32, 64, 4, 2), 0), io(fused(32, 64, 4, 2), 0, 1)],
    (512, 256): variants(fused(32, 64, 4, 2)),
    (1024, 256): variants(fused(128, 64, 8, 2)),
    (4096, 256): [*variants(fused(128, 64, 8, 2)), io(fused(64, 64, 4, 1), 1, 1)],
    (1024, 128): [io(fused(128, 64, 8, 2), 1, 1)],
    (1024, 64): [io(fused(128, 64, 8, 2), 1, 1)],
}
CHECK_SHAPES = [(3, 5, 37, 64), (2, 33, 100, 256), (2, 70, 64, 48), (4, 40, 256, 256), (1, 19, 123, 48)]
CHECK_CONFIGS = [split(16, 16, 2, 4, 1), split(32, 32, 4, 4, 1), split(64, 64, 4, 8, 1), split(16, 64, 2, 4, 2)]
CHECK_CONFIGS2 = [io(fused(16, 16, 4, 2), 1, 1), io(fused(32, 32, 4, 2), 0, 1), io(fused(16, 32, 4, 2), 0, 0),
                  io(fused(64, 64, 4, 1), 1, 1)]
TOL = {"float16": (1e-2, 1e-2), "bfloat16": (6e-2, 2e-2), "float32": (1e-4, 1e-4)}


def params(b: int, d: int) -> dict[str, int]:
    return {"N": 2, "B": min(b, 40), "D": d, "K": 64} if SMOKE else {"N": 16, "B": b, "D": d, "K": 256}


def _close(out: torch.Tensor, ref: torch.Tensor, dt: str) -> tuple[bool, float]:
    atol, rtol = TOL[dt]
    err = float((out.float() - ref.float()).abs().max())
    return bool(torch.allclose(out.float(), ref.float(), atol=atol, rtol=rtol)), err


def _rand(n: int, b: int, d: int, k: int, dt: str, seed: int) -> list[torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    ts = (torch.randn(n, b, d, generator=g), torch.randn(n, d, k, generator=g) * d ** -0.5,
          torch.randn(n, k, d, generator=g) * k ** -0.5, 1 + 0.1 * torch.randn(k, generator=g),
          1 + 0.1 * torch.randn(d, generator=g))
    return [t.to(DEV, getattr(torch, dt)) for t in ts]


def checks() -> list[dict[str, Any]]:
    from case_studies.common.timing import capture_graph
    from case_studies.pffn import kernel as pk
    from case_studies.pffn.reference import pffn_reference

    recs = []
    for shape in CHECK_SHAPES[:1] if SMOKE else CHECK_SHAPES:
        for dt in ("float16", "bfloat16", "float32"):
            for cfg in CHECK_CONFIGS if ROUND == 1 else CHECK_CONFIGS2:
                rec: dict[str, Any] = {"shape": shape, "dtype": dt, "config": cfg}
                try:
                    errs = []
                    for seed in range(3):        # back to back on fresh data: the counters reset
                        ts = _rand(*shape, dt, seed)
                        out = pk.pffn(*ts, config=cfg)
                        errs.append(_close(out, pffn_reference(*ts), dt))
                    rec.update(ok=all(e[0] for e in errs), max_abs_err=max(e[1] for e in errs))
                except Exception as e:
                    rec.update(ok=False, error=f"{type(e).__name__}: {e}"[:400])
                recs.append(rec)
    # CUDA-graph replay on fresh data, with plain calls of the same signature in between
    graph_cases = [((16, 64, 128, 256), split(16, 64, 4, 4, 1)), ((16, 256, 256, 256), split(32, 64, 4, 4, 1)),
                   ((3, 37, 100, 96), split(16, 32, 2, 4, 1))]
    for shape, cfg in [] if SMOKE or ROUND == 2 else graph_cases:
        rec = {"shape": shape, "dtype": "float16", "config": cfg, "graph": True}
        try:
            static = _rand(*shape, "float16", 10)
            box: dict[str, torch.Tensor] = {}

            def call(static: list[torch.Tensor] = static, cfg: dict = cfg, box: dict = box) -> None:
                box["out"] = pk.pffn(*static, config=cfg)

            g = capture_graph(call)
            errs = []
            for seed in range(11, 15):
                fresh = _rand(*shape, "float16", seed)
                for s, f in zip(static, fresh, strict=True):
                    s.copy_(f)
                g.replay()
                errs.append(_close(box["out"], pffn_reference(*static), "float16"))
                other = _rand(*shape, "float16", seed + 100)
                errs.append(_close(pk.pffn(*other, config=cfg), pffn_reference(*other), "float16"))
            torch.cuda.synchronize()
            rec.update(ok=all(e[0] for e in errs), max_abs_err=max(e[1] for e in errs))
        except Exception as e:
            rec.update(ok=False, error=f"{type(e).__name__}: {e}"[:400])
        recs.append(rec)
    return recs


def time_shape(b: int, d: int, cfgs: list[dict[str, int]]) -> dict[str, Any]:
    from case_studies.common.timing import bench, bench_graph
    from case_studies.pffn import kernel as pk

    if SMOKE:
        bench_graph = bench  # noqa: F811 - no CUDA graphs on a CPU
        cfgs = cfgs[:2] + [c for c in cfgs if "SPLIT_K" in c][:1]
    from case_studies.pffn.bench import make_inputs
    from case_studies.pffn.reference import pffn_reference

    p = params(b, d)
    ins = make_inputs(p, torch.float16, DEV)
    ref = pffn_reference(*ins)
    kw = dict(warmup_ms=3, rep_ms=15) if not SMOKE else dict(warmup_ms=0.1, rep_ms=0.1, max_iters=1)
    res: dict[str, Any] = {"params": p, "dtype": "float16",
                           "eager_graph": bench_graph(lambda: pffn_reference(*ins), **kw).median_us,
                           "eager_plain": bench(lambda: pffn_reference(*ins), **kw).median_us}
    rows = []
    for cfg in cfgs:
        r: dict[str, Any] = {"config": cfg}
        try:
            ok, err = _close(pk.pffn(*ins, config=cfg), ref, "float16")
            r.update(ok=ok, max_abs_err=err,
                     graph_us=bench_graph(lambda cfg=cfg: pk.pffn(*ins, config=cfg), **kw).median_us)
        except Exception as e:
            r.update(ok=False, error=f"{type(e).__name__}: {e}"[:300])
        rows.append(r)
    res["configs"] = rows
    for variant in ("fused", "split"):
        good = [r for r in rows if r.get("ok") and ("SPLIT_K" in r["config"]) == (variant == "split")]
        if ROUND == 2:
            good = [r for r in rows if r.get("ok")] if variant == "fused" else []
        if good:
            best = min(good, key=lambda r: r["graph_us"])
            res[f"best_{variant}"] = best
            res[f"best_{variant}_plain_us"] = bench(lambda c=best["config"]: pk.pffn(*ins, config=c), **kw).median_us
    log.info("B %d D %d: eager %.1f us graph; best fused %s; best split %s", b, d, res["eager_graph"],
             res.get("best_fused", {}).get("graph_us"), res.get("best_split", {}))
    return res


def probes(out: Path, best: dict[tuple[int, int], dict]) -> dict[str, Any]:
    import profiling
    from case_studies.pffn import kernel as pk
    from case_studies.pffn.bench import make_inputs

    pdir = out / "probes"
    pdir.mkdir(exist_ok=True)
    runs = [("fused_b64_d128", 64, 128, fused(16, 128, 4, 2)), ("fused_b4096_d256", 4096, 256, fused(128, 64, 8, 2))]
    if ROUND == 2:
        runs += [(f"r2_{n}", b, d, c) for n, b, d, c in (("io_b64_d128", 64, 128, io(fused(16, 128, 4, 2), 1, 1)),
                                                         ("io_b4096_d256", 4096, 256, io(fused(128, 64, 8, 2), 1, 1)),
                                                         ("bp_b64_d128", 64, 128, io(fused(16, 128, 4, 2), 0, 0)))]
        best = {}
    if (64, 128) in best:
        runs.append(("split_b64_d128", 64, 128, best[(64, 128)]))
    if (256, 256) in best:
        runs.append(("split_b256_d256", 256, 256, best[(256, 256)]))
    summary = {}
    for name, b, d, cfg in runs:
        ins = make_inputs(params(b, d), torch.float16, "cuda")
        try:
            opts = profiling.ProbeOptions(buffer_type="global", buffer_size=1 << 16)
            with profiling.probe_session(pdir / name, kernel_times=True, options=opts):
                for _ in range(3):
                    pk.pffn(*ins, config=cfg, probes=True)
                torch.cuda.synchronize()
            files = [f for f in sorted(pdir.glob(f"{name}*")) if f.suffix == ".hatchet"]
            summary[name] = profiling.summarize(profiling.load(*files, on_error="warn"))
        except Exception as e:
            summary[name] = f"{type(e).__name__}: {e}"[:600]
        log.info("probes %s: %s", name, summary[name])
    with tarfile.open(out / "probes.tar.gz", "w:gz") as tf:
        tf.add(pdir, arcname="probes")
    return summary


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--budget-s", type=float, default=120.0)
    ap.add_argument("--round", type=int, default=1, choices=(1, 2))
    args = ap.parse_args(argv)
    global ROUND, CANDIDATES
    ROUND = args.round
    if ROUND == 2:
        CANDIDATES = ROUND2
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s",
                        handlers=[logging.StreamHandler(sys.stdout), logging.FileHandler(out / "log.txt")])
    t0 = time.perf_counter()
    from case_studies.common.launch import warm_compile_cache
    from workbench.provenance import collect

    res: dict[str, Any] = {"provenance": collect(), "note": "graph-replay medians (L2 flushed), fp16, N 16, K 256"}

    def save() -> None:
        name = "explore_splitk.json" if ROUND == 1 else "explore_descriptors.json"
        (out / name).write_text(json.dumps(res, indent=1, default=str))

    jobs = [("pffn", params(b, d), "float16", cfg) for (b, d), cfgs in CANDIDATES.items() for cfg in cfgs]
    jobs += [("pffn", dict(zip("NBDK", s, strict=True)), dt, cfg) for s in CHECK_SHAPES
             for dt in ("float16", "bfloat16", "float32") for cfg in (CHECK_CONFIGS if ROUND == 1 else CHECK_CONFIGS2)]
    warm = warm_compile_cache(jobs, timeout_s=45)
    res["warm"] = {"jobs": len(jobs), "failed": [w for w in warm if w[2]], "s": time.perf_counter() - t0}
    log.info("warm: %d jobs in %.0f s, %d failed", len(jobs), time.perf_counter() - t0, len(res["warm"]["failed"]))
    save()
    res["checks"] = checks()
    log.info("checks at %.0f s: %d/%d ok", time.perf_counter() - t0, sum(r["ok"] for r in res["checks"]),
             len(res["checks"]))
    for r in res["checks"]:
        if not r["ok"]:
            log.info("check FAILED %s", r)
    save()
    res["timing"] = []
    for (b, d), cfgs in list(CANDIDATES.items())[:2] if SMOKE else CANDIDATES.items():
        if time.perf_counter() - t0 > args.budget_s * 0.8:
            log.info("budget: skipping B %d D %d", b, d)
            continue
        res["timing"].append(time_shape(b, d, cfgs))
        save()
    best = {(r["params"]["B"], r["params"]["D"]): r["best_split"]["config"] for r in res["timing"]
            if "best_split" in r}
    if not SMOKE and time.perf_counter() - t0 < args.budget_s * 0.85:
        res["probes"] = probes(out, best)
        save()
    for r in res["timing"]:
        bf, bs = r.get("best_fused", {}), r.get("best_split", {})
        nan = float("nan")
        print(f"B{r['params']['B']:5d} D{r['params']['D']:4d} eager {r['eager_graph']:7.1f} | fused "
              f"{bf.get('graph_us', nan):7.1f} {bf.get('config')} | split {bs.get('graph_us', nan):7.1f}"
              f" {bs.get('config')} | plain f {r.get('best_fused_plain_us', nan):.1f} "
              f"s {r.get('best_split_plain_us', float('nan')):.1f}")
    log.info("done in %.0f s", time.perf_counter() - t0)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
