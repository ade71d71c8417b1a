"""Lab book, frozen: ran at commit e85d70d as `case_studies.optimized_fm.explore_small_n`; results:
results/case_studies/optimized_fm/explore_small_n/.
Nothing imports this file and it is not maintained: its imports name the modules as they were at e85d70d;
to re-run it, check that commit out. The maintained benchmark is `benchmarks/case_studies/run.py`.

One exploratory GPU call for Optimized FM at small N: where do the 12 us at N 24 go, and does a
streaming kernel (variants.fm_stream_kernel) beat the shipped one?

    PYTHONPATH=. python -m case_studies.optimized_fm.explore_small_n --out "$OUT" --budget-s 150

1. the harness floor, timed exactly as the kernels (timing.bench, L2 flushed, graph and plain): an empty
   launch (1 and 1024 programs), one read of X (a reduction to one value a program), `x.clone()`;
2. every variant checked against eager (output poisoned with NaN first) and timed as a CUDA graph,
   side by side with eager and the shipped kernel's autotuned config, at N 24 K 16 and a few other
   production shapes;
3. Proton: CUPTI kernel times of the floor kernels, the shipped kernel and the best variants, and the
   shipped kernel's probe regions (PROBES=True) at N 24.

Writes `explore_small_n.json`, `explore_small_n.txt` and `proton_explore.tar.gz` to `--out`.
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

log = logging.getLogger("explore_small_n")

# the autotuner's picks before the streaming loop (gpu_run2_checks.json, commit c3e6998f97)
SHIPPED = {(24, 16): (64, 1, 4, 3), (8, 16): (256, 2, 4, 2), (40, 16): (256, 4, 4, 2), (64, 16): (256, 4, 4, 2),
           (24, 64): (64, 1, 4, 3), (64, 64): (64, 1, 4, 3)}
MAIN = (24, 16)
OTHER = [(8, 16), (40, 16), (64, 16), (24, 64), (64, 64)]
GRIDS_MAIN = (132, 264, 396, 528, 1024)
GRIDS_OTHER = (132, 264, 528)


def stream_variants(nk: tuple[int, int]) -> list[dict[str, Any]]:
    if nk == MAIN:
        vs = [dict(stages=s, num_warps=w, transposed=t, prefetch=False)
              for s in (2, 3, 4) for w in (4, 8) for t in (False, True)]
        vs += [dict(stages=1, num_warps=w, transposed=t, prefetch=True) for w in (4, 8) for t in (False, True)]
        return vs
    return [dict(stages=s, num_warps=w, transposed=t, prefetch=False)
            for s in (2, 3) for w in (4, 8) for t in (False, True)]


def _inputs(n: int, k: int, dtype: torch.dtype = torch.float16, b: int = 1024, d: int = 224):
    from case_studies.optimized_fm.bench import make_inputs

    return make_inputs({"B": b, "N": n, "D": d, "K": k}, dtype, "cuda")


def _shipped_cfg(nk: tuple[int, int]) -> dict[str, int]:
    bd, bb, nw, ns = SHIPPED[nk]
    return {"BLOCK_D": bd, "BLOCK_B": bb, "PIPELINE": False, "num_warps": nw, "num_stages": ns}


def _warm(job: tuple) -> tuple[str, float, str]:
    """Compile one kernel in a worker process (Triton's disk cache then serves the parent)."""
    t0 = time.perf_counter()
    try:
        from case_studies.optimized_fm import kernel as fk
        from case_studies.optimized_fm import variants as fv

        kind, nk, kw = job
        x, y = _inputs(*nk)
        if kind == "stream":
            fv.fm_stream(x, y, grid=264, **kw)
        elif kind == "shipped":
            fk.optimized_fm(x, y, config=kw)
        torch.cuda.synchronize()
        return repr(job), time.perf_counter() - t0, ""
    except Exception as e:
        return repr(job), time.perf_counter() - t0, f"{type(e).__name__}: {e}"[:300]


def warm(jobs: list[tuple], timeout_s: float) -> list[tuple[str, float, str]]:
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor, wait

    pool = ProcessPoolExecutor(max_workers=14, mp_context=multiprocessing.get_context("spawn"))
    futs = {pool.submit(_warm, j): repr(j) for j in jobs}
    done, _ = wait(futs, timeout=timeout_s)
    res = [f.result() if f in done else (name, timeout_s, "not finished") for f, name in futs.items()]
    procs = list(getattr(pool, "_processes", {}).values())
    pool.shutdown(wait=False, cancel_futures=True)
    for p in procs:
        if p.is_alive():
            p.terminate()
    return res


def _check(fn, ref: torch.Tensor, out: torch.Tensor) -> tuple[bool, float]:
    out.fill_(float("nan"))
    fn()
    torch.cuda.synchronize()
    err = float((out.float() - ref.float()).abs().max())
    return bool(torch.allclose(out.float(), ref.float(), atol=1e-2, rtol=1e-2)), err


def floor_rows(kw: dict[str, Any]) -> list[dict[str, Any]]:
    from case_studies.common.timing import bench, bench_graph
    from case_studies.optimized_fm import variants as fv

    x, _ = _inputs(*MAIN)
    flat = x.reshape(-1)
    block = 4096
    nprog = (flat.numel() + block - 1) // block
    red = torch.empty(nprog, dtype=torch.float32, device="cuda")
    dummy = torch.empty(1, device="cuda")
    fns = {"empty_1": lambda: fv.empty_kernel[(1,)](dummy),
           "empty_1024": lambda: fv.empty_kernel[(1024,)](dummy),
           "read_x_n24": lambda: fv.read_kernel[(nprog,)](flat, red, flat.numel(), BLOCK=block, num_warps=4),
           "clone_x_n24": lambda: x.clone()}
    rows = []
    for name, fn in fns.items():
        r = {"name": name}
        for mode, b in (("graph", bench_graph), ("plain", bench)):
            r[mode] = b(fn, **kw).median_us
        r["graph_noflush"] = bench_graph(fn, flush_l2=False, **kw).median_us
        rows.append(r)
        log.info("floor %s", r)
    return rows


def time_shape(nk: tuple[int, int], kw: dict[str, Any], deadline: float) -> dict[str, Any]:
    from case_studies.common.timing import bench, bench_graph
    from case_studies.optimized_fm import kernel as fk
    from case_studies.optimized_fm import variants as fv
    from case_studies.optimized_fm.reference import optimized_fm_reference

    x, y = _inputs(*nk)
    ref = optimized_fm_reference(x, y)
    out = torch.empty_like(ref)
    cfg = _shipped_cfg(nk)
    res: dict[str, Any] = {"N": nk[0], "K": nk[1]}
    res["eager_graph"] = bench_graph(lambda: optimized_fm_reference(x, y), **kw).median_us
    res["shipped_cfg"] = cfg
    res["shipped_ok"] = _check(lambda: out.copy_(fk.optimized_fm(x, y, config=cfg)), ref, out)
    res["shipped_graph"] = bench_graph(lambda: fk.optimized_fm(x, y, config=cfg), **kw).median_us
    res["shipped_plain"] = bench(lambda: fk.optimized_fm(x, y, config=cfg), **kw).median_us
    res["shipped_graph_noflush"] = bench_graph(lambda: fk.optimized_fm(x, y, config=cfg), flush_l2=False,
                                               **kw).median_us
    rows = []
    for v in stream_variants(nk):
        for g in (GRIDS_MAIN if nk == MAIN else GRIDS_OTHER):
            if time.perf_counter() > deadline:
                res["cut"] = True
                break
            r = {**v, "grid": g}
            try:
                def f(v=v, g=g):
                    return fv.fm_stream(x, y, grid=g, out=out, **v)
                r["ok"], r["err"] = _check(f, ref, out)
                r["graph"] = bench_graph(f, **kw).median_us
            except Exception as e:
                r["error"] = f"{type(e).__name__}: {e}"[:300]
            rows.append(r)
    res["stream"] = rows
    good = sorted((r for r in rows if r.get("ok")), key=lambda r: r["graph"])
    if good:
        best = good[0]
        res["best"] = best
        bv = {k: best[k] for k in ("stages", "num_warps", "transposed", "prefetch")}
        res["best_plain"] = bench(lambda: fv.fm_stream(x, y, grid=best["grid"], out=out, **bv), **kw).median_us
        res["best_graph_noflush"] = bench_graph(lambda: fv.fm_stream(x, y, grid=best["grid"], out=out, **bv),
                                                flush_l2=False, **kw).median_us
    log.info("N %d K %d: eager %.2f shipped %.2f/%.2f (graph/plain) best stream %s", nk[0], nk[1],
             res["eager_graph"], res["shipped_graph"], res["shipped_plain"],
             {k: res.get("best", {}).get(k) for k in ("graph", "grid", "stages", "num_warps", "transposed",
                                                      "prefetch")})
    return res


def odd_checks() -> list[dict[str, Any]]:
    """The streaming kernel on ragged shapes (B not a multiple of the grid, odd N, D, K), three dtypes."""
    from case_studies.optimized_fm import variants as fv
    from case_studies.optimized_fm.reference import optimized_fm_reference

    recs = []
    g = torch.Generator().manual_seed(1)
    for (b, n, d, k) in [(7, 24, 224, 16), (300, 23, 200, 16), (5, 5, 123, 7)]:
        x0, y0 = torch.randn(b, n, d, generator=g) * d ** -0.25, torch.randn(n, k, generator=g) * n ** -0.5
        for dt, tol in ((torch.float16, 1e-2), (torch.bfloat16, 6e-2)):
            x, y = x0.to("cuda", dt), y0.to("cuda", dt)
            ref = optimized_fm_reference(x, y)
            for tr in (False, True):
                out = torch.full_like(ref, float("nan"))
                fv.fm_stream(x, y, grid=132, stages=3, transposed=tr, out=out)
                torch.cuda.synchronize()
                ok = bool(torch.allclose(out.float(), ref.float(), atol=tol, rtol=2e-2))
                recs.append({"shape": (b, n, d, k), "dtype": str(dt), "transposed": tr, "ok": ok,
                             "err": float((out.float() - ref.float()).abs().max())})
    return recs


def proton_part(out: Path, bests: dict[str, Any]) -> dict[str, Any]:
    import profiling
    from case_studies.optimized_fm import kernel as fk
    from case_studies.optimized_fm import variants as fv

    pdir = out / "proton"
    pdir.mkdir(exist_ok=True)
    x, y = _inputs(*MAIN)
    cfg = _shipped_cfg(MAIN)
    flat = x.reshape(-1)
    red = torch.empty((flat.numel() + 4095) // 4096, dtype=torch.float32, device="cuda")
    flush = torch.empty(256 * 2**20 // 4, dtype=torch.int32, device="cuda")
    o = fk.optimized_fm(x, y, config=cfg)
    with profiling.kernel_session(pdir / "n24_kernels") as s:
        for _ in range(20):
            flush.zero_()
            with s.scope("shipped"):
                fk.optimized_fm(x, y, config=cfg)
            flush.zero_()
            with s.scope("read_x"):
                fv.read_kernel[(red.numel(),)](flat, red, flat.numel(), BLOCK=4096, num_warps=4)
            flush.zero_()
            with s.scope("empty"):
                fv.empty_kernel[(1024,)](red)
            for name, b in bests.items():
                flush.zero_()
                bv = {k: b[k] for k in ("stages", "num_warps", "transposed", "prefetch")}
                with s.scope(name):
                    fv.fm_stream(x, y, grid=b["grid"], out=o, **bv)
        torch.cuda.synchronize()
    res: dict[str, Any] = {}
    try:
        with profiling.probe_session(pdir / "n24_probes", kernel_times=True):
            for _ in range(3):
                flush.zero_()
                fk.optimized_fm(x, y, config=cfg, probes=True)
            torch.cuda.synchronize()
        res["probe_summary"] = profiling.summarize(profiling.load(pdir / "n24_probes.hatchet"))
    except Exception as e:
        res["probe_error"] = f"{type(e).__name__}: {e}"[:500]
    try:
        prof = profiling.load(pdir / "n24_kernels.hatchet")
        res["kernel_summary"] = profiling.summarize(prof, max_kernels=8)
        res["kernels_table"] = prof.kernels.to_dict("records")
    except Exception as e:
        res["kernel_summary_error"] = f"{type(e).__name__}: {e}"[:500]
    with tarfile.open(out / "proton_explore.tar.gz", "w:gz") as tf:
        tf.add(pdir, arcname="proton")
    return res


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--budget-s", type=float, default=150.0)
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s",
                        handlers=[logging.StreamHandler(sys.stdout), logging.FileHandler(out / "explore_small_n.txt")])
    from workbench.provenance import collect

    res: dict[str, Any] = {"provenance": collect()}

    def save() -> None:
        (out / "explore_small_n.json").write_text(json.dumps(res, indent=1, default=str))

    jobs = [("stream", nk, v) for nk in [MAIN, *OTHER] for v in stream_variants(nk)]
    jobs += [("shipped", nk, _shipped_cfg(nk)) for nk in [MAIN, *OTHER]]
    w = warm(jobs, timeout_s=min(60.0, args.budget_s * 0.3))
    res["warm"] = {"jobs": len(jobs), "s": time.perf_counter() - t0, "errors": [x for x in w if x[2]]}
    log.info("warm %d jobs in %.1f s, %d errors", len(jobs), time.perf_counter() - t0, len(res["warm"]["errors"]))
    save()
    kw = dict(warmup_ms=2, rep_ms=15)
    res["odd_checks"] = odd_checks()
    log.info("odd checks %d/%d ok", sum(r["ok"] for r in res["odd_checks"]), len(res["odd_checks"]))
    res["floor"] = floor_rows(kw)
    save()
    res["shapes"] = []
    deadline = t0 + args.budget_s * 0.75
    for nk in [MAIN, *OTHER]:
        res["shapes"].append(time_shape(nk, kw, deadline))
        save()
    main_res = res["shapes"][0]
    good = sorted((r for r in main_res["stream"] if r.get("ok")), key=lambda r: r["graph"])
    bests = {}
    for r in good:      # the best of each orientation/pipelining style
        tag = f"stream_{'T' if r['transposed'] else 'N'}_{'pf' if r['prefetch'] else 's' + str(r['stages'])}"
        bests.setdefault(tag, r)
    try:
        res["proton"] = proton_part(out, dict(list(bests.items())[:4]))
    except Exception as e:
        res["proton_error"] = f"{type(e).__name__}: {e}"[:800]
    save()
    log.info("%s", res.get("proton", {}).get("kernel_summary", res.get("proton_error")))
    log.info("%s", res.get("proton", {}).get("probe_summary", res.get("proton", {}).get("probe_error")))
    for s in res["shapes"]:
        log.info("SUMMARY N %d K %d eager %.2f shipped %.2f graph %.2f plain | best stream %s plain %s",
                 s["N"], s["K"], s["eager_graph"], s["shipped_graph"], s["shipped_plain"],
                 {k: s.get("best", {}).get(k) for k in ("graph", "grid", "stages", "num_warps", "transposed")},
                 s.get("best_plain"))
    for f in res["floor"]:
        log.info("FLOOR %s", f)
    log.info("done in %.1f s", time.perf_counter() - t0)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
