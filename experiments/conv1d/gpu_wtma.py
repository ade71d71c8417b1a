"""Lab book, frozen: ran at commit e4e255b as `case_studies.conv1d.gpu_wtma`; results:
results/case_studies/conv1d/wtma/.
Nothing imports this file and it is not maintained: its imports name the modules as they were at e4e255b;
to re-run it, check that commit out. The maintained benchmark is `benchmarks/case_studies/run.py`.

One GPU call for the gather kernel's weights-by-TMA option (`kernel.W_TMA`): checks, then an interleaved A/B.

    PYTHONPATH=. python -m case_studies.conv1d.gpu_wtma --out "$OUT/wtma.json" --commit SHA

Question: the shipped fp16 gather kernel re-reads all 55 KB of packed weights per program with pointer
loads (load_w 25 % of the probe cycles), which Triton then stores to shared memory for wgmma's B operand.
Do host-descriptor TMA loads straight into shared memory (W_TMA 1; W_TMA 2 from the K-major packing, the B
layout TF32 wgmma wants) bring the production shape (B 2048, C 96, L 200, K 3) under the 92 us target?

1. every (shape, dtype, config) compiled first in parallel worker processes (`warm_compile_cache`);
2. checks against `reference.conv1d_exact` at the production shape and odd shapes (C_out 17 and C_in 5:
   TMA does not apply and the option falls back), each config called twice (the second call takes the
   recorded-plan path, which must build this call's descriptor), then after an in-place weight update and
   with a new weight of the same shape; the output's memory is poisoned with NaN before every call;
3. `--rounds` interleaved rounds timing F.conv1d and every config, plain launches and CUDA-graph replays,
   L2 flushed before every call (`case_studies/common/timing.py`); medians of the round medians.
"""
from __future__ import annotations

import argparse
import functools
import json
import logging
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import torch

log = logging.getLogger("conv1d.gpu_wtma")
DEVICE = "cuda"     # --smoke: "cpu" under TRITON_INTERPRET=1, small shapes, no graphs (a dry run of the script)

PROD = {"B": 2048, "C_in": 96, "C_out": 96, "L": 200, "K": 3, "stride": 1, "padding": 1}
ODD = [dict(B=3, C_in=5, C_out=16, L=123, K=3, stride=1, padding=1),
       dict(B=3, C_in=5, C_out=17, L=123, K=3, stride=1, padding=1),     # 34-byte rows: no TMA in fp16
       dict(B=2, C_in=48, C_out=40, L=77, K=5, stride=1, padding=2),     # C_in, C_out off the tiles
       dict(B=2, C_in=40, C_out=24, L=29, K=3, stride=2, padding=1)]
SHIPPED = {"path": "gather", "BLOCK_N": 128, "BLOCK_CO": 32, "CO_SUB": 4, "BLOCK_CI": 32, "UNROLL_CI": 1,
           "PERSISTENT": 0, "EVICT": 0, "SHIFT_T": 1, "W_TMA": 0, "num_warps": 4, "num_stages": 1}
# name -> config (None: the shipped default path, `conv1d(x, w, b, 1, 1)`: "cl", autotuned, for fp32)
CONFIGS: dict[str, dict[str, dict[str, Any] | None]] = {
    "float16": {
        "gather": SHIPPED,
        "wtma1": dict(SHIPPED, W_TMA=1),
        "wtma1_p1": dict(SHIPPED, W_TMA=1, PERSISTENT=1),
        "wtma1_p2": dict(SHIPPED, W_TMA=1, PERSISTENT=2),
        "n256w8": dict(SHIPPED, BLOCK_N=256, num_warps=8),
        "wtma1_n256w8": dict(SHIPPED, W_TMA=1, BLOCK_N=256, num_warps=8),
        "wtma1_loop_s2": dict(SHIPPED, W_TMA=1, UNROLL_CI=0, num_stages=2),   # the pipeliner prefetches TMA
        "wtma1_loop_s3": dict(SHIPPED, W_TMA=1, UNROLL_CI=0, num_stages=3),
    },
    "bfloat16": {"gather": SHIPPED, "wtma1": dict(SHIPPED, W_TMA=1),
                 "wtma1_loop_s3": dict(SHIPPED, W_TMA=1, UNROLL_CI=0, num_stages=3)},
    "float32": {
        "shipped_cl": None,
        "gather": SHIPPED,
        "wtma1": dict(SHIPPED, W_TMA=1),     # C_out-major B: TF32 wgmma needs a shared-memory transpose
        "wtma2": dict(SHIPPED, W_TMA=2),     # K-major B straight from TMA
        "wtma2_loop_s2": dict(SHIPPED, W_TMA=2, UNROLL_CI=0, num_stages=2),
    },
}
TOL = {"float16": (1e-2, 1e-2), "bfloat16": (6e-2, 2e-2), "float32": (2e-2, 1e-2)}   # fp32: TF32
CHECK_ODD = {"gather", "wtma1", "wtma2", "wtma1_p1", "wtma1_loop_s3", "wtma2_loop_s2"}


def _inputs(p: dict[str, int], dtype: torch.dtype, g: torch.Generator) -> tuple[torch.Tensor, ...]:
    x = torch.randn(p["B"], p["C_in"], p["L"], generator=g).to(DEVICE, dtype)
    w = (torch.randn(p["C_out"], p["C_in"], p["K"], generator=g) * (p["C_in"] * p["K"]) ** -0.5).to(DEVICE, dtype)
    b = (torch.randn(p["C_out"], generator=g) * 0.1).to(DEVICE, dtype)
    return x, w, b


def _call(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor | None, *, stride: int, padding: int,
          config: dict[str, Any] | None) -> torch.Tensor:
    from case_studies.conv1d import kernel as ck

    return ck.conv1d(x, w, b, stride, padding, config=config)


def _compare(fn: Any, x: torch.Tensor, w: torch.Tensor, b: torch.Tensor | None, p: dict[str, int], atol: float,
             rtol: float) -> dict[str, Any]:
    from case_studies.conv1d.reference import conv1d_exact

    ref = conv1d_exact(x, w, b, p["stride"], p["padding"])
    poison = torch.full(ref.shape, float("nan"), dtype=x.dtype, device=DEVICE)
    del poison                 # the caching allocator hands this block to the kernel's y
    out = fn(x, w, b).float()
    if DEVICE == "cuda":
        torch.cuda.synchronize()
    err = (out - ref).abs()
    bad = ~torch.isclose(out, ref, atol=atol, rtol=rtol)
    return {"max_abs_err": float(err.nan_to_num(float("inf")).max()),
            "rel_rms": float((out - ref).norm() / ref.norm()), "n_nan": int(out.isnan().sum()),
            "first_bad": None if not bad.any() else [int(i) for i in bad.nonzero()[0]],
            "ok": bool(not bad.any())}


def checks(g: torch.Generator) -> list[dict[str, Any]]:
    from case_studies.conv1d import kernel as ck

    out = []
    for dt, cfgs in CONFIGS.items():
        dtype, (atol, rtol) = getattr(torch, dt), TOL[dt]
        for p in [PROD, *ODD]:
            for name, cfg in cfgs.items():
                if p is not PROD and name not in CHECK_ODD:
                    continue
                rec: dict[str, Any] = {"dtype": dt, "shape": p, "config": name}
                fn = functools.partial(_call, stride=p["stride"], padding=p["padding"], config=cfg)
                try:
                    x, w, b = _inputs(p, dtype, g)
                    res = {"first": _compare(fn, x, w, b, p, atol, rtol)}
                    if cfg is not None:    # the W_TMA the wrapper runs with (0 where TMA does not apply)
                        kw = ck.fit_config({k: dict(ck.fixed_config(), **cfg)[k] for k in ck.CONFIG_KEYS},
                                           p["C_in"], p["C_out"])
                        rec["w_tma_run"] = ck._pack_and_desc(w, kw, True)[1]["W_TMA"]
                    x2 = _inputs(p, dtype, g)[0]                    # the recorded-plan path
                    res["plan"] = _compare(fn, x2, w, b, p, atol, rtol)
                    w.mul_(-0.5)                                    # in place: repack, new descriptor
                    res["in_place"] = _compare(fn, x, w, b, p, atol, rtol)
                    res["new_weight"] = _compare(fn, x, torch.randn_like(w) * 0.2, b, p, atol, rtol)
                    res["no_bias"] = _compare(fn, x, w, None, p, atol, rtol)
                    rec.update(res, ok=all(r["ok"] for r in res.values()))
                except Exception as e:          # keep the reason; the other checks go on
                    rec.update(ok=False, error=f"{type(e).__name__}: {e}"[:600])
                log.log(logging.INFO if rec["ok"] else logging.ERROR, "check %s %s %s ok=%s w_tma_run=%s %s", dt,
                        tuple(p.values()), name, rec["ok"], rec.get("w_tma_run"), rec.get("error", ""))
                out.append(rec)
    return out


def warm() -> list[tuple[str, float, str]]:
    from case_studies.common.launch import warm_compile_cache

    jobs = []
    for dt, cfgs in CONFIGS.items():
        for p in [PROD, *ODD]:
            for name, cfg in cfgs.items():
                if cfg is not None and (p is PROD or name in CHECK_ODD):
                    jobs.append(("conv1d", p, dt, cfg))
    return warm_compile_cache(jobs, timeout_s=150)


def timing(g: torch.Generator, rounds: int, warmup_ms: float, rep_ms: float) -> dict[str, Any]:
    import torch.nn.functional as F

    from case_studies.common.timing import bench, bench_graph

    fns = {}
    for dt, cfgs in CONFIGS.items():
        x, w, b = _inputs(PROD, getattr(torch, dt), g)
        fns[f"{dt}/eager"] = functools.partial(F.conv1d, x, w, b, stride=1, padding=1)
        for name, cfg in cfgs.items():
            fns[f"{dt}/{name}"] = functools.partial(_call, x, w, b, stride=1, padding=1, config=cfg)
    samples: dict[str, dict[str, list[float]]] = {n: {"plain": [], "graph": []} for n in fns}
    for r in range(rounds):
        for name, fn in fns.items():
            samples[name]["plain"].append(bench(fn, warmup_ms=warmup_ms, rep_ms=rep_ms).median_us)
            if DEVICE == "cuda":
                samples[name]["graph"].append(bench_graph(fn, warmup_ms=warmup_ms, rep_ms=rep_ms).median_us)
        log.info("round %d: %s", r, {n: [round(v[-1], 1) for v in s.values() if v] for n, s in samples.items()})
    return {n: {m: {"median_us": statistics.median(v), "rounds": v} for m, v in s.items() if v}
            for n, s in samples.items()}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--commit", default=None)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--warmup-ms", type=float, default=5)
    ap.add_argument("--rep-ms", type=float, default=30)
    ap.add_argument("--smoke", action="store_true", help="CPU dry run (set TRITON_INTERPRET=1)")
    args = ap.parse_args(argv)
    if args.smoke:
        global DEVICE
        DEVICE = "cpu"
        PROD.update(B=2, L=40)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s", stream=sys.stdout)
    from case_studies.conv1d import kernel as ck
    from workbench.provenance import collect

    prov = collect()
    if args.commit:
        prov["commit"] = args.commit
    res: dict[str, Any] = {"provenance": prov, "shape": PROD, "configs": CONFIGS, "tolerances": TOL}
    t0 = time.perf_counter()
    res["compile"] = [] if args.smoke else [r for r in warm() if r[2]]   # failures only, with their reason
    log.info("compiled in %.0f s; failures: %s", time.perf_counter() - t0, res["compile"])
    g = torch.Generator().manual_seed(0)
    res["checks"] = checks(g)
    log.info("checks: %d/%d ok (%.0f s)", sum(c["ok"] for c in res["checks"]), len(res["checks"]),
             time.perf_counter() - t0)
    Path(args.out).write_text(json.dumps(res, indent=1, default=str))
    res["timing"] = timing(g, args.rounds, args.warmup_ms, args.rep_ms)
    res["autotuned"] = ck.best_config()
    Path(args.out).write_text(json.dumps(res, indent=1, default=str))
    for name, t in res["timing"].items():
        log.info("%-24s plain %7.1f  graph %7.1f us", name, t["plain"]["median_us"],
                 t.get("graph", t["plain"])["median_us"])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
