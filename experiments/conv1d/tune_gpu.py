"""Lab book, frozen: ran at commit 8340f0e as `case_studies.conv1d.tune_gpu`; results: results/case_studies/conv1d/
(gpu_run3_tuning.json, gpu_run4_tuning.json, gpu_run4_checks.json, gpu_run4_log.txt).
Nothing imports this file and it is not maintained: its imports name the modules as they were at 8340f0e;
to re-run it, check that commit out. The maintained benchmark is `benchmarks/case_studies/run.py`.

One GPU call that checks the conv1d kernel and times candidate tile configs at the production shape
(the exploration step before the official benchmark; its JSON goes to results/case_studies/conv1d/).

    PYTHONPATH=. python -m case_studies.conv1d.tune_gpu --out "$OUT" [--jobs 12]

1. correctness against F.conv1d (fp32 reference, TF32 off) on odd shapes, every dtype, fixed config;
2. every candidate config at the production shape, fp16 and fp32: checked against F.conv1d, then timed
   with the L2 flushed before every call (case_studies.common.timing.bench), with eager F.conv1d and a
   device-to-device copy of the same bytes (the achievable memory floor) beside them;
3. (--other-k) the two best fp16 configs at K = 1 and K = 5.
With --with-benchmark-cases the parallel compile step also builds what the official benchmark
(case_studies/run_gpu_part1.py --cases conv1d) will need, so that run finds it in Triton's cache.
"""
from __future__ import annotations

import argparse
import functools
import json
import logging
import time
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from case_studies.conv1d.prewarm import benchmark_cases, warm

from case_studies.common.timing import bench
from case_studies.conv1d import bench as cb
from case_studies.conv1d import kernel as ck
from case_studies.conv1d.reference import conv1d_exact

log = logging.getLogger("conv1d.tune_gpu")

PROD = {"B": 2048, "C_in": 96, "C_out": 96, "L": 200, "K": 3, "stride": 1, "padding": 1}
ODD = [(3, 5, 7, 123, 3, 1, 1), (4, 32, 17, 64, 3, 1, 1), (2, 96, 96, 200, 5, 1, 2), (2, 40, 24, 29, 3, 2, 1),
       (5, 96, 96, 200, 1, 1, 0), (3, 130, 70, 77, 3, 1, 1)]
# the autotune list plus variants kept out of it, for the table
CANDIDATES = list(ck.AUTOTUNE_SPACE) + [
    # BLOCK_N, BLOCK_CO, CO_SUB, BLOCK_CI, UNROLL_CI, PERSISTENT, EVICT, SHIFT_T, num_warps, num_stages
    (128, 32, 4, 32, 1, 0, 0, 0, 4, 1), (32, 32, 4, 32, 1, 0, 0, 0, 2, 1),   # SHIFT_T off: the A/B pair
    (64, 64, 2, 32, 1, 0, 0, 1, 4, 1),
]


def _cfg(t: tuple) -> dict[str, Any]:
    *tiles, nw, ns = t   # gather-kernel tiles (fp32 would otherwise take the channels-last path)
    return {**dict(zip(ck.CONFIG_KEYS, tiles)), "num_warps": nw, "num_stages": ns, "path": "gather"}


def _time(fn: Any, *args: Any, rep_ms: float, **kwargs: Any) -> Any:
    return bench(functools.partial(fn, *args, **kwargs), warmup_ms=5, rep_ms=rep_ms)




def _other_k(k: int, configs: list[dict], dev: str, rep_ms: float) -> list[dict[str, Any]]:
    """Eager and the given configs at the production shape with kernel size k."""
    p = dict(PROD, K=k, padding=(k - 1) // 2)
    x, w, b, s, pad = cb.make_inputs(p, torch.float16, dev)
    r = conv1d_exact(x, w, b, s, pad)
    rows: list[dict[str, Any]] = [{"K": k, "config": "eager",
                                   "median_us": _time(F.conv1d, x, w, b, stride=s, padding=pad,
                                                      rep_ms=rep_ms).median_us}]
    for cfg in configs:
        y = ck.conv1d(x, w, b, s, pad, config=cfg)
        t = _time(ck.conv1d, x, w, b, s, pad, config=cfg, rep_ms=rep_ms)
        rows.append({"K": k, "config": cfg, "median_us": t.median_us,
                     "max_abs_err": (y.float() - r).abs().max().item()})
    return rows


def summarize(res: dict[str, Any]) -> str:
    """A short table of the tuning results (the device tool returns only the end of the output)."""
    lines = [f"prewarm {res.get('prewarm_s', 0):.0f} s, errors {len(res.get('prewarm_errors', []))}; "
             f"checks {sum(c.get('ok', False) for c in res['checks'])}/{len(res['checks'])} ok"]
    lines += [f"  FAILED {c}" for c in res["checks"] if not c.get("ok")]
    for r in res["tuning"] + res["extra"]:
        cfg = r["config"] if isinstance(r["config"], str) else \
            ",".join(str(r["config"][k]) for k in (*ck.CONFIG_KEYS, "num_warps", "num_stages"))
        lines.append(f"  {r.get('dtype', 'K=%s' % r.get('K'))} {cfg}: "
                     + (f"{r['median_us']:.1f} us err {r.get('max_abs_err', 0):.1e}" if "median_us" in r
                        else r.get("error", "")[:100]))
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--jobs", type=int, default=12)
    ap.add_argument("--rep-ms", type=float, default=30.0)
    ap.add_argument("--with-benchmark-cases", action="store_true",
                    help="also prewarm what run_gpu_part1 --cases conv1d will compile")
    ap.add_argument("--no-odd", action="store_true", help="skip the odd-shape checks (the benchmark checks too)")
    ap.add_argument("--other-k", action="store_true", help="also time the two best configs at K = 1 and 5")
    ap.add_argument("--smoke", action="store_true", help="CPU interpreter, tiny shapes: exercise the script")
    args = ap.parse_args()
    global PROD, ODD, CANDIDATES
    dev = "cuda"
    if args.no_odd:
        ODD = []
    if args.smoke:
        dev, PROD, ODD, CANDIDATES = "cpu", dict(PROD, B=2, L=40), ODD[:2], CANDIDATES[:2] + CANDIDATES[8:9]
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s",
                        handlers=[logging.StreamHandler(), logging.FileHandler(out / "tune_log.txt")])
    torch.backends.cudnn.benchmark = True
    from workbench.provenance import collect

    res: dict[str, Any] = {"provenance": collect(), "checks": [], "tuning": [], "extra": []}

    def save() -> None:
        (out / "tune.json").write_text(json.dumps(res, indent=1, default=str))

    t0 = time.perf_counter()
    odd = [{"B": b, "C_in": ci, "C_out": co, "L": ln, "K": k, "stride": s, "padding": p}
           for (b, ci, co, ln, k, s, p) in ODD]
    cases = [(p, dt, {}, False) for p in odd for dt in ("float16", "float32", "bfloat16")]
    cases += [(PROD, dt, _cfg(c), False) for c in CANDIDATES for dt in ("float16", "float32")]
    if args.with_benchmark_cases:   # the official benchmark's compiles too, in the same parallel pass
        cases += benchmark_cases()
    try:
        res["prewarm_errors"] = warm(cases, args.jobs) if dev == "cuda" else []
    except Exception as e:       # a failed prewarm only costs the compile time it meant to save
        res["prewarm_errors"] = [f"{type(e).__name__}: {e}"]
    res["prewarm_s"] = time.perf_counter() - t0
    save()

    for p in odd:
        for dt in ("float16", "float32", "bfloat16"):
            x, w, b, s, pad = cb.make_inputs(p, getattr(torch, dt), dev)
            rec: dict[str, Any] = {"params": p, "dtype": dt}
            try:
                y = ck.conv1d(x, w, b, s, pad, config={})
                r = conv1d_exact(x, w, b, s, pad)
                err = (y.float() - r).abs().max().item()
                atol = {"float16": 1e-2, "bfloat16": 6e-2, "float32": 1e-2}[dt]
                rec.update(ok=bool(torch.allclose(y.float(), r, atol=atol, rtol=1e-2)), max_abs_err=err)
            except Exception as e:
                rec.update(ok=False, error=f"{type(e).__name__}: {e}"[:500])
            res["checks"].append(rec)
            log.info("check %s", rec)
    save()

    for dt in ("float16", "float32"):
        x, w, b, s, pad = cb.make_inputs(PROD, getattr(torch, dt), dev)
        r = conv1d_exact(x, w, b, s, pad)
        t = _time(F.conv1d, x, w, b, stride=s, padding=pad, rep_ms=args.rep_ms)
        res["tuning"].append({"dtype": dt, "config": "eager", "median_us": t.median_us})
        t = _time(torch.add, x, 0.0, rep_ms=args.rep_ms)   # read x, write a copy
        res["tuning"].append({"dtype": dt, "config": "copy_x", "median_us": t.median_us,
                              "tbs": 2 * x.numel() * x.element_size() / t.median_us / 1e6})
        log.info("%s", res["tuning"][-2:])
        for c in CANDIDATES:
            cfg = _cfg(c)
            rec = {"dtype": dt, "config": cfg}
            try:
                y = ck.conv1d(x, w, b, s, pad, config=cfg)
                err = (y.float() - r).abs().max().item()
                rec["max_abs_err"] = err
                t = _time(ck.conv1d, x, w, b, s, pad, config=cfg, rep_ms=args.rep_ms)
                rec.update(median_us=t.median_us, p20_us=t.p20_us, p80_us=t.p80_us,
                           tflops=cb.flops(PROD) / t.median_us / 1e6,
                           tbs=cb.nbytes(PROD, dt) / t.median_us / 1e6)
            except Exception as e:
                rec["error"] = f"{type(e).__name__}: {e}"[:300]
            res["tuning"].append(rec)
            log.info("tune %s", rec)
            save()

    fp16 = sorted((r for r in res["tuning"] if r["dtype"] == "float16" and "median_us" in r
                   and isinstance(r["config"], dict)), key=lambda r: r["median_us"])
    best = [r["config"] for r in fp16[:2]]
    for k in ((1, 5) if args.other_k else ()):
        try:
            res["extra"] += _other_k(k, best, dev, args.rep_ms)
        except Exception as e:
            res["extra"].append({"K": k, "error": f"{type(e).__name__}: {e}"[:300]})
        log.info("extra %s", res["extra"][-3:])
        save()
    res["total_s"] = time.perf_counter() - t0
    save()
    log.info("done in %.0f s\n%s", res["total_s"], summarize(res))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
