"""Lab book, frozen: ran at commit 587d1f6 as `case_studies.optimized_fm.gpu_explore`; results:
results/case_studies/optimized_fm/host_us.json, results/case_studies/pffn/explore_tiles.json.
Nothing imports this file and it is not maintained: its imports name the modules as they were at 587d1f6;
to re-run it, check that commit out. The maintained benchmark is `benchmarks/case_studies/run.py`.

One exploratory GPU call for the two fusion case studies (Optimized FM and PFFN): correctness of the
kernels on odd shapes in every dtype, every candidate config timed at the production shapes (CUDA-graph
replay, short runs), the plain-launch cost of our launch path against Triton's own, and the host time of
each piece of a call. Not the recorded benchmark (that is `case_studies/run_gpu_part1.py`): this picks
what goes into the autotune spaces and shows where the host time goes.

    PYTHONPATH=. python -m case_studies.optimized_fm.gpu_explore --out "$OUT" --part optimized_fm
    PYTHONPATH=. python -m case_studies.optimized_fm.gpu_explore --out "$OUT" --part pffn

Writes `explore_<part>.json` and `explore_<part>.txt` to `--out`.
"""
from __future__ import annotations

import argparse
import json
import logging
import sys
import time
from pathlib import Path
from typing import Any

import torch

log = logging.getLogger("gpu_explore")

FM_SHAPES = [(24, 16), (64, 16), (128, 64), (8, 16), (40, 16)]
FM_BF16 = [(24, 16)]
FM_EXTRA = [(256, 1, 2, 1), (256, 8, 4, 2), (256, 2, 8, 2), (128, 2, 4, 2)]
PFFN_SHAPES = [(64, 128), (256, 256), (1024, 256), (4096, 256), (1024, 512), (1024, 100)]
PFFN_BF16: list[tuple[int, int]] = []
PFFN_EXTRA = [(32, 32, 8, 2), (64, 16, 8, 2), (128, 32, 8, 2), (128, 64, 8, 2), (16, 128, 4, 2),
              (16, 64, 8, 2), (64, 64, 8, 3), (16, 32, 8, 2), (16, 16, 4, 2), (32, 16, 8, 2)]


FM_CHECK_SHAPES = [(5, 5, 123, 7), (3, 128, 224, 64), (7, 24, 224, 16), (4, 40, 224, 32)]   # B, N, D, K
FM_CHECK_CONFIGS = [{"BLOCK_D": 256, "BLOCK_B": 1, "num_warps": 4, "num_stages": 1},
                    {"BLOCK_D": 256, "BLOCK_B": 2, "num_warps": 4, "num_stages": 2},
                    {"BLOCK_D": 64, "BLOCK_B": 1, "num_warps": 8, "num_stages": 3}]
PFFN_CHECK_SHAPES = [(2, 5, 123, 48), (3, 70, 512, 256), (16, 64, 128, 256), (2, 33, 200, 256)]  # N, B, D, K
PFFN_CHECK_CONFIGS = [{"BLOCK_B": 32, "BLOCK_KC": 64, "num_warps": 8, "num_stages": 2},
                      {"BLOCK_B": 16, "BLOCK_KC": 32, "num_warps": 4, "num_stages": 3}]


SMOKE = not torch.cuda.is_available()   # a CPU run (interpreter) checks this script's plumbing only
DEV = "cpu" if SMOKE else "cuda"


def fm_params(n: int, k: int) -> dict[str, int]:
    return {"B": 3 if SMOKE else 1024, "N": n, "D": 224, "K": k}


def pffn_params(b: int, d: int) -> dict[str, int]:
    return {"N": 2 if SMOKE else 16, "B": 16 if SMOKE else b, "D": d, "K": 256}


def fm_configs(p: dict[str, int]) -> list[dict[str, Any]]:
    from case_studies.optimized_fm import kernel as fk

    cfgs = [{"BLOCK_D": bd, "BLOCK_B": bb, "PIPELINE": pipe, "TRANSPOSED": tr, "num_warps": nw, "num_stages": ns}
            for bd, bb, pipe, tr, nw, ns in fk.AUTOTUNE_SPACE]
    cfgs += [{"BLOCK_D": bd, "BLOCK_B": bb, "PIPELINE": False, "num_warps": nw, "num_stages": ns}
             for bd, bb, nw, ns in FM_EXTRA]
    d_pow2 = 256
    bn, bk = max(16, 1 << (p["N"] - 1).bit_length()), max(16, 1 << (p["K"] - 1).bit_length())
    return [c for c in cfgs if c["BLOCK_D"] <= d_pow2
            and fk.tile_registers(bn, bk, c["BLOCK_D"], c["num_warps"]) <= 256]


def pffn_configs(p: dict[str, int]) -> list[dict[str, Any]]:
    from case_studies.pffn import kernel as pk

    d_pow2 = max(16, 1 << (p["D"] - 1).bit_length())
    cfgs = [{"BLOCK_B": bb, "BLOCK_KC": kc, "num_warps": nw, "num_stages": ns}
            for bb, kc, nw, ns in pk.AUTOTUNE_SPACE + PFFN_EXTRA]
    return [c for c in cfgs if pk.weight_smem(d_pow2, c["BLOCK_KC"], c["num_stages"]) <= 220 * 1024
            and pk.tile_registers(c["BLOCK_B"], d_pow2, c["BLOCK_KC"], c["num_warps"]) <= 260
            and (c["BLOCK_B"] <= 32 or p["B"] >= 512)]


def _close(out: torch.Tensor, ref: torch.Tensor, dtype: str) -> tuple[bool, float]:
    atol, rtol = {"float16": (1e-2, 1e-2), "bfloat16": (6e-2, 2e-2), "float32": (1e-3, 1e-3)}[dtype]
    err = float((out.float() - ref.float()).abs().max()) if out.numel() else 0.0
    return bool(torch.allclose(out.float(), ref.float(), atol=atol, rtol=rtol)), err


def correctness(part: str) -> list[dict[str, Any]]:
    from case_studies.optimized_fm import kernel as fk
    from case_studies.optimized_fm.reference import optimized_fm_reference
    from case_studies.pffn import kernel as pk
    from case_studies.pffn.reference import pffn_reference

    g = torch.Generator().manual_seed(0)
    recs = []
    for (b, n, d, k) in [] if part != "optimized_fm" else FM_CHECK_SHAPES[:1] if SMOKE else FM_CHECK_SHAPES:
        x0, y0 = torch.randn(b, n, d, generator=g) * d ** -0.25, torch.randn(n, k, generator=g) * n ** -0.5
        for dt in ("float16", "bfloat16", "float32"):
            x, y = x0.to(DEV, getattr(torch, dt)), y0.to(DEV, getattr(torch, dt))
            ref = optimized_fm_reference(x, y)
            for cfg in [None, *FM_CHECK_CONFIGS]:
                rec = {"case": "optimized_fm", "shape": (b, n, d, k), "dtype": dt, "config": cfg}
                try:
                    ok, err = _close(fk.optimized_fm(x, y, config=cfg, autotune=False), ref, dt)
                    ok2, err2 = _close(fk.optimized_fm(x, y, config=cfg, autotune=False), ref, dt)  # cached plan
                    rec.update(ok=ok and ok2, max_abs_err=max(err, err2))
                except Exception as e:
                    rec.update(ok=False, error=f"{type(e).__name__}: {e}"[:400])
                recs.append(rec)
            if not SMOKE and dt == "float16":   # the proton-instrumented build (PROBES=True)
                rec = {"case": "optimized_fm", "shape": (b, n, d, k), "dtype": dt, "config": "probes"}
                try:
                    rec.update(zip(("ok", "max_abs_err"), _close(fk.optimized_fm(x, y, probes=True), ref, dt)))
                except Exception as e:
                    rec.update(ok=False, error=f"{type(e).__name__}: {e}"[:400])
                recs.append(rec)
    for (n, b, d, k) in [] if part != "pffn" else PFFN_CHECK_SHAPES[:1] if SMOKE else PFFN_CHECK_SHAPES:
        ts0 = (torch.randn(n, b, d, generator=g), torch.randn(n, d, k, generator=g) * d ** -0.5,
               torch.randn(n, k, d, generator=g) * k ** -0.5, 1 + 0.1 * torch.randn(k, generator=g),
               1 + 0.1 * torch.randn(d, generator=g))
        for dt in ("float16", "bfloat16", "float32"):
            ts = [t.to(DEV, getattr(torch, dt)) for t in ts0]
            ref = pffn_reference(*ts)
            for cfg in [None, *PFFN_CHECK_CONFIGS]:
                rec = {"case": "pffn", "shape": (n, b, d, k), "dtype": dt, "config": cfg}
                try:
                    ok, err = _close(pk.pffn(*ts, config=cfg, autotune=False), ref, dt)
                    ok2, err2 = _close(pk.pffn(*ts, config=cfg, autotune=False), ref, dt)
                    rec.update(ok=ok and ok2, max_abs_err=max(err, err2))
                except Exception as e:
                    rec.update(ok=False, error=f"{type(e).__name__}: {e}"[:400])
                recs.append(rec)
            if not SMOKE and dt == "float16":
                rec = {"case": "pffn", "shape": (n, b, d, k), "dtype": dt, "config": "probes"}
                try:
                    rec.update(zip(("ok", "max_abs_err"), _close(pk.pffn(*ts, probes=True), ref, dt)))
                except Exception as e:
                    rec.update(ok=False, error=f"{type(e).__name__}: {e}"[:400])
                recs.append(rec)
    return recs


def time_shape(case: str, p: dict[str, int], dtype: str, configs: list[dict[str, Any]]) -> dict[str, Any]:
    """Eager (plain, graph), every config (graph), the best config (plain, through our launch path)."""
    import importlib

    from case_studies.common.timing import bench, bench_graph

    if SMOKE:
        configs = configs[:2]
        bench_graph = bench  # noqa: F811 - no CUDA graphs on a CPU

    bm = importlib.import_module(f"case_studies.{case}.bench")
    km = importlib.import_module(f"case_studies.{case}.kernel")
    rm = importlib.import_module(f"case_studies.{case}.reference")
    fn = getattr(km, case)
    ref_fn = getattr(rm, f"{case}_reference")
    inputs = bm.make_inputs(p, getattr(torch, dtype), DEV)
    ref = ref_fn(*inputs)
    kw = dict(warmup_ms=2, rep_ms=12)
    res: dict[str, Any] = {"case": case, "params": p, "dtype": dtype}
    res["eager_plain"] = bench(lambda: ref_fn(*inputs), **kw).median_us
    res["eager_graph"] = bench_graph(lambda: ref_fn(*inputs), **kw).median_us
    cfg_times = []
    for cfg in configs:
        try:
            ok, err = _close(fn(*inputs, config=cfg), ref, dtype)
            t = bench_graph(lambda cfg=cfg: fn(*inputs, config=cfg), **kw).median_us
            cfg_times.append({"config": cfg, "graph_us": t, "ok": ok, "max_abs_err": err})
        except Exception as e:
            cfg_times.append({"config": cfg, "error": f"{type(e).__name__}: {e}"[:300]})
    res["configs"] = cfg_times
    good = [c for c in cfg_times if c.get("ok")]
    if good:
        best = min(good, key=lambda c: c["graph_us"])
        res["best"] = best
        res["ours_plain"] = bench(lambda: fn(*inputs, config=best["config"]), **kw).median_us
        res["ours_plain_noflush"] = bench(lambda: fn(*inputs, config=best["config"]), flush_l2=False,
                                          **kw).median_us
        res["eager_plain_noflush"] = bench(lambda: ref_fn(*inputs), flush_l2=False, **kw).median_us
    log.info("%s %s %s: eager %.1f/%.1f us (plain/graph); best %s", case, p, dtype, res["eager_plain"],
             res["eager_graph"], {k: res.get("best", {}).get(k) for k in ("config", "graph_us")})
    return res


def host_costs() -> dict[str, float]:
    """Host microseconds a call of each launch path (no sync inside the loop; the GPU keeps up)."""
    import triton

    from case_studies.optimized_fm import kernel as fk
    from case_studies.optimized_fm.bench import make_inputs
    from case_studies.optimized_fm.reference import optimized_fm_reference
    from case_studies.pffn import kernel as pk
    from case_studies.pffn.bench import make_inputs as pffn_inputs
    from case_studies.pffn.reference import pffn_reference

    x, y = make_inputs(fm_params(24, 16), torch.float16, "cuda")
    out = torch.empty(1024, 24, 16, dtype=torch.float16, device="cuda")
    cfg = {"BLOCK_D": 256, "BLOCK_B": 1, "PIPELINE": False, "num_warps": 4, "num_stages": 1}
    named = dict(x_ptr=x, y_ptr=y, out_ptr=out, B=1024, N=24, D=224, K=16, x_stride_b=x.stride(0),
                 x_stride_n=x.stride(1), x_stride_d=x.stride(2), y_stride_n=y.stride(0), y_stride_k=y.stride(1),
                 o_stride_b=out.stride(0), o_stride_n=out.stride(1), o_stride_k=out.stride(2))
    meta = dict(BLOCK_N=32, BLOCK_K=16, D_POW2=256, UPCAST_DOT=False, PROBES=False, DOT_PRECISION="tf32")
    pos = tuple(named.values())
    ts = pffn_inputs(pffn_params(64, 128), torch.float16, "cuda")

    def per_call(f, n=2000) -> float:
        for _ in range(50):
            f()
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(n):
            f()
        dt = (time.perf_counter() - t0) / n * 1e6
        torch.cuda.synchronize()
        return dt

    from triton import knobs

    from case_studies.common.launch import _raw_stream

    fk._plans.clear()
    fk.optimized_fm(x, y, config=cfg)
    fm_plan = next(iter(fk._plans.plans.values()))
    pcfg = {"BLOCK_B": 16, "BLOCK_KC": 128, "num_warps": 4, "num_stages": 2}
    pk._plans.clear()
    pk.pffn(*ts, config=pcfg)
    pffn_plan = next(iter(pk._plans.plans.values()))
    pout = torch.empty_like(ts[0])
    fk.optimized_fm(x, y)      # autotune once
    ck = fk._optimized_fm_kernel
    at = fk._optimized_fm_autotuned
    grid = (1024,)
    pk.pffn(*ts)
    res = {
        "fm_plan_launch_only": per_call(lambda: fm_plan.launch((x, y, out))),
        "pffn_plan_launch_only": per_call(lambda: pffn_plan.launch((*ts, pout))),
        "ours_pffn_fixed_config": per_call(lambda: pk.pffn(*ts, config=pcfg)),
        "hook_check": per_call(lambda: knobs.runtime.launch_enter_hook.calls),
        "raw_stream": per_call(lambda: _raw_stream(0)),
        "empty_like": per_call(lambda: torch.empty_like(ts[0])),
        "torch_empty": per_call(lambda: torch.empty((1024, 24, 16), dtype=torch.float16, device="cuda")),
        "new_empty": per_call(lambda: x.new_empty((1024, 24, 16))),
        "current_device": per_call(torch.cuda.current_device),
        "is_capturing": per_call(torch.cuda.is_current_stream_capturing),
        "key_build": per_call(lambda: (x.shape, y.shape, x.stride(), y.stride(), x.dtype, y.dtype,
                                       torch.cuda.current_device(), (x.data_ptr() | y.data_ptr()) & 15 == 0)),
        "eager_fm": per_call(lambda: optimized_fm_reference(x, y)),
        "triton_jit_kwargs": per_call(lambda: ck[grid](**named, **meta, BLOCK_D=256, BLOCK_B=1, PIPELINE=False,
                                                      TRANSPOSED=False, num_warps=4,
                                                      num_stages=1)),
        "triton_jit_positional": per_call(lambda: ck[grid](*pos, 32, 16, 256, False, "tf32", 256, 1, False, False,
                                                          num_warps=4, num_stages=1)),
        "triton_autotuner": per_call(lambda: at[lambda m: (triton.cdiv(1024, m["BLOCK_B"]),)](**named, **meta)),
        "ours_fm_fixed_config": per_call(lambda: fk.optimized_fm(x, y, config=cfg)),
        "ours_fm_autotuned": per_call(lambda: fk.optimized_fm(x, y)),
        "eager_pffn": per_call(lambda: pffn_reference(*ts)),
        "ours_pffn_autotuned": per_call(lambda: pk.pffn(*ts)),
    }
    try:
        from case_studies.optimized_fm.dispatch import optimized_fm as dfm
        res["dispatch_fm"] = per_call(lambda: dfm(x, y))
    except Exception as e:
        res["dispatch_fm_error"] = str(e)[:200]
    log.info("host us/call %s", {k: round(v, 2) if isinstance(v, float) else v for k, v in res.items()})
    return res


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--part", choices=("optimized_fm", "pffn", "host"), required=True,
                    help="one case a process: a sticky CUDA error in one cannot spoil the other's results")
    ap.add_argument("--skip-warm", action="store_true")
    args = ap.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s",
                        handlers=[logging.StreamHandler(sys.stdout),
                                  logging.FileHandler(out / f"explore_{args.part}.txt")])
    t0 = time.perf_counter()
    from case_studies.common.launch import warm_compile_cache
    from case_studies.optimized_fm import kernel as fk
    from case_studies.pffn import kernel as pk
    from workbench.provenance import collect

    fm = args.part == "optimized_fm"
    res: dict[str, Any] = {"provenance": collect(), "part": args.part}

    def save() -> None:
        (out / f"explore_{args.part}.json").write_text(json.dumps(res, indent=1, default=str))

    if args.part == "host":      # host microseconds a call of each launch path, nothing else
        res["host_us"] = host_costs()
        save()
        return 0

    timing_jobs: list[tuple[str, dict[str, int], str, list[dict[str, Any]]]] = []
    if fm:
        timing_jobs += [("optimized_fm", fm_params(n, k), "float16", fm_configs(fm_params(n, k)))
                        for n, k in (FM_SHAPES[:1] if SMOKE else FM_SHAPES)]
        timing_jobs += [("optimized_fm", fm_params(n, k), "bfloat16", fm_configs(fm_params(n, k)))
                        for n, k in (FM_BF16[:1] if SMOKE else FM_BF16)]
    else:
        timing_jobs += [("pffn", pffn_params(b, d), "float16", pffn_configs(pffn_params(b, d)))
                        for b, d in (PFFN_SHAPES[:1] if SMOKE else PFFN_SHAPES)]
        timing_jobs += [("pffn", pffn_params(b, d), "bfloat16", pffn_configs(pffn_params(b, d)))
                        for b, d in PFFN_BF16]
    jobs = [(c, p, dt, cfg) for c, p, dt, cfgs in timing_jobs for cfg in cfgs]
    for dt in ("float16", "bfloat16", "float32"):
        if fm:
            jobs += [("optimized_fm", {"B": b, "N": n, "D": d, "K": k}, dt, c)
                     for (b, n, d, k) in FM_CHECK_SHAPES for c in [fk.fixed_config(), *FM_CHECK_CONFIGS]]
        else:
            jobs += [("pffn", {"N": n, "B": b, "D": d, "K": k}, dt, c)
                     for (n, b, d, k) in PFFN_CHECK_SHAPES for c in [pk.fixed_config(), *PFFN_CHECK_CONFIGS]]
    if not args.skip_warm:
        warm = warm_compile_cache(jobs)
        res["warm"] = {"jobs": len(jobs), "wall_s": time.perf_counter() - t0,
                       "errors": [w for w in warm if w[2]], "job_s": sorted(w[1] for w in warm)[-5:]}
        log.info("warmed %d jobs in %.1f s (%d errors)", len(jobs), time.perf_counter() - t0,
                 len(res["warm"]["errors"]))
        save()
    t1 = time.perf_counter()
    res["correctness"] = correctness(args.part)
    log.info("correctness %d/%d ok in %.1f s", sum(r.get("ok", False) for r in res["correctness"]),
             len(res["correctness"]), time.perf_counter() - t1)
    for r in res["correctness"]:
        if not r.get("ok"):
            log.error("check failed %s", r)
    save()
    if fm and not SMOKE:
        res["host_us"] = host_costs()
        save()
    res["timing"] = []
    for case, p, dt, cfgs in timing_jobs:
        res["timing"].append(time_shape(case, p, dt, cfgs))
        save()
    log.info("done in %.1f s", time.perf_counter() - t0)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
