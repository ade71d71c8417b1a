"""Lab book, frozen: ran at commit fd81a7f as `case_studies.conv1d.gpu_flat`; results:
results/case_studies/conv1d/flat/.
Nothing imports this file and it is not maintained: its imports name the modules as they were at fd81a7f;
to re-run it, check that commit out. The maintained benchmark is `benchmarks/case_studies/run.py`.

One GPU call for the channels-last kernel's flattened tiles (`tma.py`, FLAT): checks, then an A/B.

    PYTHONPATH=. python -m case_studies.conv1d.gpu_flat --out "$OUT/flat.json" --commit SHA

Question: fp32 misses 1.73x over `F.conv1d` by 28 us (267 us: transpose 87 + TMA kernel 174). The kernel's
tiles are per example, so L = 200 computes 256 positions (28 % of the MMA rows on padding), and the
autotuner's pick, one 128-wide accumulator for C_out = 96, spends another 25 % on padding channels. FLAT
tiles run over the flattened positions B * L (no padding rows; the rows a tap shifts across an example's
edge are zeroed in registers), so three 32-wide accumulators (no padding channels) may now pay off too.

1. checks against `reference.conv1d_exact`: production shape and odd shapes (examples shorter than a tile,
   K 5, L_out != L_in, which falls back to per-example tiles), fp32 and fp16, first call and second call,
   new weight, no bias; the output's memory is poisoned with NaN before every call (gpu_wtma._compare);
2. `--rounds` interleaved rounds at the production shape: F.conv1d, the shipped path (autotuned), and
   every config end to end (transpose + kernel), plain launches and CUDA-graph replays, plus the kernel
   alone on a prepared channels-last x; L2 flushed before every call; medians of the round medians.
"""
from __future__ import annotations

import argparse
import functools
import json
import logging
import statistics
import sys
from pathlib import Path
from typing import Any

import torch
from case_studies.conv1d.gpu_wtma import PROD, TOL, _compare, _inputs

log = logging.getLogger("conv1d.gpu_flat")

SHIPPED_CL = {"path": "cl", "BLOCK_L": 128, "BLOCK_CO": 128, "CO_SUB": 1, "BLOCK_CI": 32, "STAGES": 3,
              "TMA_STORE": 0, "W_TMA": 1, "PERSIST": 1, "FLAT": 0, "num_warps": 4}   # the fp32 autotuner's pick
SUB3 = dict(SHIPPED_CL, BLOCK_CO=32, CO_SUB=3, W_TMA=0, PERSIST=0, FLAT=1)
CONFIGS: dict[str, dict[str, Any] | None] = {
    "shipped": None,                                       # the normal call path (fp32: cl, autotuned)
    "cl_pick": SHIPPED_CL,
    "flat_pick": dict(SHIPPED_CL, FLAT=1),
    "flat_pick_w8": dict(SHIPPED_CL, FLAT=1, num_warps=8),
    "flat_sub3": SUB3,
    "flat_sub3_p2": dict(SUB3, PERSIST=2),
    "flat_sub3_p1_s4": dict(SUB3, PERSIST=1, STAGES=4),
    "flat_sub3_wtma_p1": dict(SUB3, W_TMA=1, PERSIST=1),
    "flat_sub3_l64": dict(SUB3, BLOCK_L=64),
    "flat_sub3_l256_w8": dict(SUB3, BLOCK_L=256, num_warps=8),
}
ODD = [dict(B=5, C_in=16, C_out=16, L=3, K=3, stride=1, padding=1),      # tiles span many examples
       dict(B=3, C_in=48, C_out=40, L=77, K=5, stride=1, padding=2),
       dict(B=2, C_in=32, C_out=24, L=29, K=3, stride=1, padding=0)]     # L_out != L_in: per-example tiles
CHECKED = ("shipped", "flat_pick", "flat_sub3", "flat_sub3_p2", "flat_sub3_wtma_p1", "flat_sub3_l256_w8")


def _call(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor | None, *, stride: int, padding: int,
          config: dict[str, Any] | None) -> torch.Tensor:
    from case_studies.conv1d import kernel as ck

    return ck.conv1d(x, w, b, stride, padding, config=dict(config) if config else None)


def checks(g: torch.Generator, dtypes: list[str]) -> list[dict[str, Any]]:
    out = []
    for dt in dtypes:
        dtype, (atol, rtol) = getattr(torch, dt), TOL[dt]
        for p in [PROD, *ODD]:
            for name in CHECKED:
                rec: dict[str, Any] = {"dtype": dt, "shape": p, "config": name}
                fn = functools.partial(_call, stride=p["stride"], padding=p["padding"], config=CONFIGS[name])
                try:
                    x, w, b = _inputs(p, dtype, g)
                    res = {"first": _compare(fn, x, w, b, p, atol, rtol),
                           "second": _compare(fn, _inputs(p, dtype, g)[0], w, b, p, atol, rtol),
                           "new_weight": _compare(fn, x, torch.randn_like(w) * 0.2, b, p, atol, rtol),
                           "no_bias": _compare(fn, x, w, None, p, atol, rtol)}
                    rec.update(res, ok=all(r["ok"] for r in res.values()))
                except Exception as e:          # keep the reason; the other checks go on
                    rec.update(ok=False, error=f"{type(e).__name__}: {e}"[:600])
                log.log(logging.INFO if rec["ok"] else logging.ERROR, "check %s %s %s ok=%s %s", dt,
                        tuple(p.values()), name, rec["ok"], rec.get("error", ""))
                out.append(rec)
    return out


def _kernel_only(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor, cfg: dict[str, Any]) -> Any:
    """The TMA kernel alone on a prepared channels-last x (what FLAT changes)."""
    from case_studies.conv1d import kernel as ck
    from case_studies.conv1d import tma

    bsz, c_in, length = x.shape
    c_out, _, ksize = w.shape
    wk = x.dtype == torch.float32
    wp = ck.pack_weight(w, True, "kmajor" if wk else "gather")
    _, meta = ck.launch_meta(bsz, c_in, length, c_out, ksize, 1, 1, x.dtype, True)
    meta = {k: v for k, v in meta.items() if k != "STRIDE"}
    kw = tma.fit_tma_config({k: v for k, v in cfg.items() if k != "path"}, c_in, c_out)
    xt = tma.to_channels_last(x)
    y = torch.empty((bsz, c_out, meta["L_OUT"]), dtype=x.dtype, device=x.device)
    return functools.partial(tma.launch, xt, wp, b, y, meta, kw, wk, torch.cuda.get_device_properties(0)
                             .multi_processor_count)


def timing(g: torch.Generator, dtypes: list[str], rounds: int, warmup_ms: float, rep_ms: float) -> dict[str, Any]:
    import torch.nn.functional as F

    from case_studies.common.timing import bench, bench_graph

    fns: dict[str, Any] = {}
    for dt in dtypes:
        x, w, b = _inputs(PROD, getattr(torch, dt), g)
        fns[f"{dt}/eager"] = functools.partial(F.conv1d, x, w, b, stride=1, padding=1)
        for name, cfg in CONFIGS.items():
            fns[f"{dt}/{name}"] = functools.partial(_call, x, w, b, stride=1, padding=1, config=cfg)
            if cfg is not None:
                fns[f"{dt}/{name}/kernel"] = _kernel_only(x, w, b, cfg)
    for name, fn in list(fns.items()):    # compile (and tune) outside the timed rounds; drop what fails
        try:
            fn()
            torch.cuda.synchronize()
        except Exception as e:
            log.error("%s failed: %s", name, f"{type(e).__name__}: {e}"[:400])
            del fns[name]
    samples: dict[str, dict[str, list[float]]] = {n: {"plain": [], "graph": []} for n in fns}
    for r in range(rounds):
        for name, fn in fns.items():
            samples[name]["plain"].append(bench(fn, warmup_ms=warmup_ms, rep_ms=rep_ms).median_us)
            samples[name]["graph"].append(bench_graph(fn, warmup_ms=warmup_ms, rep_ms=rep_ms).median_us)
        log.info("round %d: %s", r, {n: [round(v[-1], 1) for v in s.values()] for n, s in samples.items()})
    return {n: {m: {"median_us": statistics.median(v), "rounds": v} for m, v in s.items()}
            for n, s in samples.items()}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--commit", default=None)
    ap.add_argument("--dtypes", default="float32,float16")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--warmup-ms", type=float, default=5)
    ap.add_argument("--rep-ms", type=float, default=30)
    ap.add_argument("--no-checks", action="store_true", help="timing only (the checks ran in an earlier call)")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s", stream=sys.stdout)
    from case_studies.conv1d import kernel as ck
    from workbench.provenance import collect

    torch.backends.cudnn.benchmark = True
    prov = collect()
    if args.commit:
        prov["commit"] = args.commit
    dtypes = args.dtypes.split(",")
    g = torch.Generator().manual_seed(0)
    res: dict[str, Any] = {"provenance": prov, "shape": PROD, "configs": CONFIGS, "tolerances": TOL}
    res["checks"] = [] if args.no_checks else checks(g, dtypes)
    Path(args.out).write_text(json.dumps(res, indent=1, default=str))
    res["timing"] = timing(g, dtypes, args.rounds, args.warmup_ms, args.rep_ms)
    res["autotuned"] = ck.best_config()
    Path(args.out).write_text(json.dumps(res, indent=1, default=str))
    log.info("%s", {n: {m: round(t["median_us"], 1) for m, t in s.items()} for n, s in res["timing"].items()})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
