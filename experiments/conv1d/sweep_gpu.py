"""Lab book, frozen: ran at commit 8340f0e as `case_studies.conv1d.sweep_gpu`; results: results/case_studies/conv1d/
(gpu_run5_sweep.json, gpu_run5_sweep_log.txt, gpu_run6_sweep2.json, proton/fused_probes*).
Nothing imports this file and it is not maintained: its imports name the modules as they were at 8340f0e;
to re-run it, check that commit out. The maintained benchmark is `benchmarks/case_studies/run.py`.

One GPU call comparing the conv1d kernel variants side by side (the exploration before the benchmark).

    PYTHONPATH=. python -m case_studies.conv1d.sweep_gpu --out "$OUT" [--budget-s 140]

Variants at the production shape (fp16 and fp32, K = 3), every one checked against F.conv1d in fp32
(TF32 off) and timed with the L2 flushed before every call (`case_studies.common.timing.bench`):
`gather` (kernel.py's pointer kernel, the 127/300 us baseline), `fused` tile configs (fused.py: x staged
channels-last per tile), `tma_cl` (x.transpose(1, 2).contiguous() then tma.py's TMA kernel; also its two
parts alone), eager F.conv1d and a copy of x (the achievable floor). Then the best fused configs at K = 1,
5, B 256 / 4096 and the wide shape, a B * C * L > 2^31 check, and a Proton probe profile of the best
fused config. Everything lands in `sweep.json`; a short table is printed last.
"""
from __future__ import annotations

import argparse
import json
import logging
import multiprocessing
import sys
import time
from concurrent.futures import ProcessPoolExecutor, wait
from functools import partial
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F

from case_studies.conv1d.reference import conv1d_exact

log = logging.getLogger("conv1d.sweep_gpu")

PROD = {"B": 2048, "C_in": 96, "C_out": 96, "L": 200, "K": 3, "stride": 1, "padding": 1}
GATHER = {"path": "gather", "BLOCK_N": 128, "BLOCK_CO": 32, "CO_SUB": 4, "BLOCK_CI": 32, "UNROLL_CI": 1,
          "PERSISTENT": 0, "EVICT": 0, "SHIFT_T": 1, "num_warps": 4, "num_stages": 1}


def _fz(bn: int, ctas: int, nw: int = 4, wk: int = 0, bci: int = 32) -> dict[str, Any]:
    return {"path": "fused", "BLOCK_N": bn, "BLOCK_CO": 32, "CO_SUB": 4, "BLOCK_CI": bci, "CTAS_PER_SM": ctas,
            "W_KMAJOR": wk, "num_warps": nw}


FUSED = {
    "float16": [_fz(128, 2), _fz(128, 3), _fz(64, 4), _fz(64, 6), _fz(64, 8), _fz(256, 1, 8), _fz(128, 2, 8),
                _fz(128, 2, wk=1), _fz(256, 2, 8)],
    "float32": [_fz(128, 2, wk=1), _fz(128, 3, wk=1), _fz(64, 4, wk=1), _fz(64, 6, wk=1), _fz(256, 1, 8, 1),
                _fz(128, 2, 8, 1), _fz(128, 2, wk=0), _fz(64, 4, bci=16, wk=1)],
}
TMA = [{"BLOCK_L": 128, "BLOCK_CO": 32, "CO_SUB": 4, "BLOCK_CI": 32, "STAGES": 3, "TMA_STORE": 0, "num_warps": 4},
       {"BLOCK_L": 64, "BLOCK_CO": 32, "CO_SUB": 4, "BLOCK_CI": 32, "STAGES": 4, "TMA_STORE": 0, "num_warps": 4},
       {"BLOCK_L": 128, "BLOCK_CO": 32, "CO_SUB": 4, "BLOCK_CI": 32, "STAGES": 3, "TMA_STORE": 1, "num_warps": 4}]


def _inputs(p: dict[str, Any], dtype: str, seed: int = 0) -> tuple:
    from case_studies.conv1d import bench as cb

    return cb.make_inputs(p, getattr(torch, dtype), "cuda")




def _transpose(x: torch.Tensor) -> torch.Tensor:
    return x.transpose(1, 2).contiguous()


def _tma_fn(x, w, b, s, pad, cfg, pre_transposed=None, triton_transpose=False):
    """tma_cl: x to channels-last (unless given; torch's copy or tma.to_channels_last), then the TMA
    kernel; returns the callable."""
    from case_studies.conv1d import kernel as ck
    from case_studies.conv1d import tma

    bsz, c_in, l_in = x.shape
    c_out, _, k = w.shape
    wk = x.dtype == torch.float32
    wp = ck.pack_weight(w, True, "kmajor" if wk else "gather")
    _, meta = ck.launch_meta(bsz, c_in, l_in, c_out, k, s, pad, x.dtype, True)
    cfg = tma.fit_tma_config(cfg, c_in, c_out)
    y = torch.empty(bsz, c_out, l_in + 2 * pad - k + 1, dtype=x.dtype, device=x.device)

    def run(xt=pre_transposed):
        if xt is None:
            xt = tma.to_channels_last(x) if triton_transpose else x.transpose(1, 2).contiguous()
        tma.launch(xt, wp, b, y, meta, cfg, w_kmajor=wk)
        return y
    return run


def _warm_job(job: tuple) -> str:
    """Compile one variant by running it once at its real shape (fills Triton's disk cache)."""
    kind, p, dtype, cfg = job
    try:
        from case_studies.conv1d import kernel as ck
        x, w, b, s, pad = _inputs(p, dtype)
        if kind == "tma":
            _tma_fn(x, w, b, s, pad, cfg, triton_transpose=True)()
        else:
            ck.conv1d(x, w, b, s, pad, config=cfg)
        torch.cuda.synchronize()
        return ""
    except Exception as e:
        return f"{job}: {type(e).__name__}: {e}"[:400]


def warm(jobs: list[tuple], timeout_s: float) -> list[str]:
    pool = ProcessPoolExecutor(max_workers=min(14, len(jobs)), mp_context=multiprocessing.get_context("spawn"))
    futs = [pool.submit(_warm_job, j) for j in jobs]
    done, pending = wait(futs, timeout=timeout_s)
    errs = [f.result() for f in done if f.result()]
    errs += [f"not compiled in {timeout_s:.0f} s"] * len(pending)
    procs = list(getattr(pool, "_processes", {}).values())
    pool.shutdown(wait=False, cancel_futures=True)
    for pr in procs:
        if pending and pr.is_alive():
            pr.terminate()
    return errs


_T = {"BLOCK_L": 128, "BLOCK_CO": 32, "CO_SUB": 4, "BLOCK_CI": 32, "STAGES": 3, "TMA_STORE": 0, "W_TMA": 0,
      "num_warps": 4}
TMA2 = [_T, dict(_T, W_TMA=1), dict(_T, W_TMA=1, BLOCK_CO=128, CO_SUB=1),
        dict(_T, W_TMA=1, BLOCK_CO=128, CO_SUB=1, num_warps=8),
        dict(_T, W_TMA=1, BLOCK_CO=128, CO_SUB=1, BLOCK_L=256, num_warps=8),
        dict(_T, W_TMA=1, BLOCK_CO=128, CO_SUB=1, BLOCK_L=64, STAGES=4)]
GATHER2 = [GATHER, dict(GATHER, BLOCK_CO=128, CO_SUB=1), dict(GATHER, BLOCK_CO=128, CO_SUB=1, num_warps=8)]


def phase2(out: Path, budget_s: float, rep_ms: float) -> dict[str, Any]:
    """The channels-last path with every operand by TMA and one 128-wide accumulator, beside the gather
    kernel with a 128-wide accumulator; the Triton transpose alone."""
    from case_studies.common.timing import bench
    from case_studies.conv1d import bench as cb
    from case_studies.conv1d import kernel as ck
    from case_studies.conv1d import tma
    from workbench.provenance import collect

    t0 = time.perf_counter()
    res: dict[str, Any] = {"provenance": collect(), "rows": []}
    jobs = [("tma", PROD, dt, c) for dt in ("float16", "float32") for c in TMA2]
    jobs += [("conv", PROD, dt, c) for dt in ("float16", "float32") for c in GATHER2]
    res["warm_errors"] = warm(jobs, 60.0)
    log.info("warm %.0f s: %s", time.perf_counter() - t0, res["warm_errors"][:3])
    for dt in ("float16", "float32"):
        x, w, b, s, pad = _inputs(PROD, dt)
        r = conv1d_exact(x, w, b, s, pad)
        xt = tma.to_channels_last(x)
        cands = [("transpose_triton", None, partial(tma.to_channels_last, x), None),
                 ("copy_x", None, partial(torch.add, x, 0.0), None)]
        cands += [("gather", c, partial(ck.conv1d, x, w, b, s, pad, config=c), r) for c in GATHER2]
        for c in TMA2:
            cands.append(("cl_total", c, _tma_fn(x, w, b, s, pad, c, triton_transpose=True), r))
            cands.append(("cl_kernel", c, _tma_fn(x, w, b, s, pad, c, pre_transposed=xt), r))
        for name, c, fn, ref in cands:
            if time.perf_counter() - t0 > budget_s:
                break
            rec: dict[str, Any] = {"name": name, "dtype": dt, "config": c}
            try:
                if ref is not None:
                    y = fn()
                    rec["max_abs_err"] = float((y.float() - ref).abs().max())
                    rec["ok"] = bool(torch.allclose(y.float(), ref, atol=1e-2, rtol=1e-2))
                t = bench(fn, warmup_ms=5, rep_ms=rep_ms)
                rec.update(median_us=t.median_us, p20_us=t.p20_us, p80_us=t.p80_us,
                           tbs=cb.nbytes(PROD, dt) / t.median_us / 1e6)
            except Exception as e:
                rec["error"] = f"{type(e).__name__}: {e}"[:300]
            res["rows"].append(rec)
            log.info("%s %s %s: %s", dt[:5], name, {k: v for k, v in (c or {}).items() if k in
                     ("BLOCK_L", "BLOCK_CO", "W_TMA", "num_warps", "BLOCK_N", "STAGES")},
                     f"{rec['median_us']:.1f} us ok={rec.get('ok', '-')}" if "median_us" in rec else rec.get("error"))
            (out / "sweep2.json").write_text(json.dumps(res, indent=1, default=str))
        del x, xt, r
        torch.cuda.empty_cache()
    return res


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--budget-s", type=float, default=140.0)
    ap.add_argument("--rep-ms", type=float, default=30.0)
    ap.add_argument("--phase", type=int, default=1)
    args = ap.parse_args()
    t0 = time.perf_counter()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s",
                        handlers=[logging.StreamHandler(sys.stdout), logging.FileHandler(out / "sweep_log.txt")])
    if args.phase == 2:
        phase2(out, args.budget_s, args.rep_ms)
        return 0
    from case_studies.common.timing import bench
    from case_studies.conv1d import bench as cb
    from case_studies.conv1d import kernel as ck
    from workbench.provenance import collect

    res: dict[str, Any] = {"provenance": collect(), "rows": [], "checks": [], "errors": []}

    def left() -> float:
        return args.budget_s - (time.perf_counter() - t0)

    def save() -> None:
        (out / "sweep.json").write_text(json.dumps(res, indent=1, default=str))

    others = {"k1": dict(PROD, K=1, padding=0), "k5": dict(PROD, K=5, padding=2), "b256": dict(PROD, B=256),
              "b4096": dict(PROD, B=4096), "wide": dict(PROD, B=64, C_in=512, C_out=512, L=256)}
    jobs = [("conv", PROD, dt, c) for dt in FUSED for c in FUSED[dt] + [GATHER]]
    jobs += [("tma", PROD, dt, c) for dt in FUSED for c in TMA]
    jobs += [("conv", p, "float16", c) for p in others.values() for c in FUSED["float16"][:4] + [GATHER]]
    res["warm_errors"] = warm(jobs, min(90.0, left() - 60))
    res["warm_s"] = time.perf_counter() - t0
    log.info("warm %.0f s, %d errors: %s", res["warm_s"], len(res["warm_errors"]), res["warm_errors"][:4])
    save()

    def timed(name: str, p: dict, dt: str, fn, check=None, **extra) -> dict | None:
        rec: dict[str, Any] = {"name": name, "shape": p, "dtype": dt, **extra}
        try:
            if check is not None:
                y = fn()
                rec["rel_err"] = float((y.float() - check).norm() / check.norm())
                rec["max_abs_err"] = float((y.float() - check).abs().max())
                rec["ok"] = bool(torch.allclose(y.float(), check, atol=1e-2, rtol=1e-2))
            t = bench(fn, warmup_ms=5, rep_ms=args.rep_ms)
            rec.update(median_us=t.median_us, p20_us=t.p20_us, p80_us=t.p80_us,
                       tbs=cb.nbytes(p, dt) / t.median_us / 1e6)
        except Exception as e:
            rec["error"] = f"{type(e).__name__}: {e}"[:400]
        res["rows"].append(rec)
        log.info("%s %s %s: %s us %s", name, dt, {k: v for k, v in p.items() if PROD.get(k) != v},
                 f"{rec.get('median_us', float('nan')):.1f}", rec.get("error", rec.get("max_abs_err", "")))
        save()
        return rec

    best: dict[str, list[dict]] = {}
    for dt in ("float16", "float32"):
        x, w, b, s, pad = _inputs(PROD, dt)
        r = conv1d_exact(x, w, b, s, pad)
        timed("eager", PROD, dt, partial(F.conv1d, x, w, b, stride=s, padding=pad), r)
        timed("copy_x", PROD, dt, partial(torch.add, x, 0.0))
        timed("transpose_x", PROD, dt, partial(_transpose, x))
        timed("gather", PROD, dt, partial(ck.conv1d, x, w, b, s, pad, config=GATHER), r, config=GATHER)
        recs = []
        for c in FUSED[dt]:
            if left() < 40:
                break
            recs.append(timed("fused", PROD, dt, partial(ck.conv1d, x, w, b, s, pad, config=c), r, config=c))
        best[dt] = [q["config"] for q in sorted((q for q in recs if q and q.get("ok") and "median_us" in q),
                                                key=lambda q: q["median_us"])[:2]]
        xt = x.transpose(1, 2).contiguous()
        for c in TMA:
            if left() < 40:
                break
            timed("tma_cl", PROD, dt, _tma_fn(x, w, b, s, pad, c), r, config=c)
            timed("tma_cl_kernel_only", PROD, dt, _tma_fn(x, w, b, s, pad, c, pre_transposed=xt), r, config=c)
        del x, xt, r
        torch.cuda.empty_cache()

    for p in others.values():
        if left() < 30:
            break
        x, w, b, s, pad = _inputs(p, "float16")
        r = conv1d_exact(x, w, b, s, pad)
        timed("eager", p, "float16", partial(F.conv1d, x, w, b, stride=s, padding=pad), r)
        timed("gather", p, "float16", partial(ck.conv1d, x, w, b, s, pad, config=GATHER), r, config=GATHER)
        for c in best.get("float16", [])[:2]:
            timed("fused", p, "float16", partial(ck.conv1d, x, w, b, s, pad, config=c), r, config=c)
        del x, r

    # B * C * L past 2^31 (INT64 indexing): the last examples against the reference
    if left() > 20 and best.get("float16"):
        try:
            p = dict(PROD, B=112_000)
            g = torch.Generator(device="cuda").manual_seed(1)
            x = torch.randn(p["B"], 96, 200, device="cuda", dtype=torch.float16, generator=g)
            w = torch.randn(96, 96, 3, device="cuda", dtype=torch.float16, generator=g) / 17.0
            bb = torch.randn(96, device="cuda", dtype=torch.float16, generator=g)
            y = ck.conv1d(x, w, bb, 1, 1, config=best["float16"][0])
            r = conv1d_exact(x[-3:], w, bb, 1, 1)
            err = float((y[-3:].float() - r).abs().max())
            res["checks"].append({"check": "int64 B=112000", "max_abs_err": err, "ok": err < 1e-2})
            del x, y
        except Exception as e:
            res["checks"].append({"check": "int64 B=112000", "error": f"{type(e).__name__}: {e}"[:300]})
        torch.cuda.empty_cache()
        save()

    # probe regions of the best fused config (fp16 and fp32), never timed
    if left() > 15:
        try:
            import profiling

            pdir = out / "proton"
            pdir.mkdir(exist_ok=True)
            ins = {dt: _inputs(PROD, dt) for dt in ("float16", "float32")}
            for dt, (x, w, b, s, pad) in ins.items():
                if best.get(dt):
                    ck.conv1d(x, w, b, s, pad, config=best[dt][0], probes=True)
            torch.cuda.synchronize()
            with profiling.probe_session(pdir / "fused_probes", kernel_times=True):
                for dt, (x, w, b, s, pad) in ins.items():
                    if best.get(dt):
                        for _ in range(2):
                            ck.conv1d(x, w, b, s, pad, config=best[dt][0], probes=True)
                torch.cuda.synchronize()
            res["probe_summary"] = profiling.summarize(profiling.load(pdir / "fused_probes.hatchet"))
        except Exception as e:
            res["probe_error"] = f"{type(e).__name__}: {e}"[:500]
        save()

    res["total_s"] = time.perf_counter() - t0
    save()
    lines = [f"done in {res['total_s']:.0f} s; warm errors {len(res['warm_errors'])}; checks {res['checks']}"]
    for q in res["rows"]:
        diff = {k: v for k, v in q["shape"].items() if PROD.get(k) != v}
        cfg = q.get("config") or {}
        short = ",".join(str(cfg[k]) for k in ("BLOCK_N", "BLOCK_L", "CTAS_PER_SM", "STAGES", "TMA_STORE",
                                                "W_KMAJOR", "BLOCK_CI", "num_warps") if k in cfg)
        lines.append(f"{q['dtype'][:5]} {diff or ''} {q['name']} {short}: "
                     + (f"{q['median_us']:.1f} us ok={q.get('ok', '-')}" if "median_us" in q
                        else q.get("error", "")[:120]))
    log.info("\n".join(lines))
    if "probe_summary" in res:
        log.info("%s", res["probe_summary"][:3000])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
