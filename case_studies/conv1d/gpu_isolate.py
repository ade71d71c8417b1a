"""Isolate a failing conv1d call on a GPU: every path and pinned config of one shape, each in its own
process (a CUDA illegal-address error is sticky: it poisons every later call of its process).

    PYTHONPATH=. python -m case_studies.conv1d.gpu_isolate --out "$OUT/isolate.json" \
        --shape 2,32,24,29,3,1,0 --dtype float16

Per case: the output against `reference.conv1d_exact`, or the error; run with CUDA_LAUNCH_BLOCKING=1 so the
error is reported by the launch that caused it.
"""
from __future__ import annotations

import argparse
import json
import logging
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

log = logging.getLogger("conv1d.gpu_isolate")


def cases() -> dict[str, dict[str, Any] | None]:
    from case_studies.conv1d import kernel as ck
    from case_studies.conv1d import tma

    out: dict[str, dict[str, Any] | None] = {"auto": None, "gather_fixed": {"path": "gather"}}
    for i, row in enumerate(ck.AUTOTUNE_SPACE):
        *tiles, nw, ns = row
        out[f"gather_cfg{i}"] = {"path": "gather", **dict(zip(ck.CONFIG_KEYS, tiles)), "num_warps": nw,
                                 "num_stages": ns}
    out["gather_noshift_t"] = {"path": "gather", "SHIFT_T": 0}
    out["gather_loop"] = {"path": "gather", "UNROLL_CI": 0}
    out["cl_default"] = {"path": "cl"}
    out["cl_flat"] = {"path": "cl", "FLAT": 1}
    for i, row in enumerate(tma.CL_AUTOTUNE_SPACE):
        out[f"cl_cfg{i}"] = {"path": "cl", **dict(zip(tma.TMA_CONFIG_KEYS, row[:-1])), "num_warps": row[-1]}
    return out


def run_one(shape: list[int], dtype: str, name: str) -> dict[str, Any]:
    import torch

    from case_studies.conv1d import kernel as ck
    from case_studies.conv1d.reference import conv1d_exact

    bsz, c_in, c_out, length, ksize, stride, padding = shape
    g = torch.Generator().manual_seed(0)
    dt = getattr(torch, dtype)
    x = torch.randn(bsz, c_in, length, generator=g).to("cuda", dt)
    w = (torch.randn(c_out, c_in, ksize, generator=g) * (c_in * ksize) ** -0.5).to("cuda", dt)
    b = (torch.randn(c_out, generator=g) * 0.1).to("cuda", dt)
    cfg = cases()[name]
    rec: dict[str, Any] = {"case": name, "config": cfg}
    try:
        for call in ("first", "second"):
            y = ck.conv1d(x, w, b, stride, padding, config=dict(cfg) if cfg else None).float()
            torch.cuda.synchronize()
            ref = conv1d_exact(x, w, b, stride, padding)
            rec[call] = {"max_abs_err": float((y - ref).abs().max()),
                         "ok": bool(torch.allclose(y, ref, atol=1e-2, rtol=1e-2))}
        rec["ok"] = rec["first"]["ok"] and rec["second"]["ok"]
        rec["autotuned"] = {k: v for k, v in ck.best_config().items()}
    except Exception as e:   # the report is the point
        rec.update(ok=False, error=f"{type(e).__name__}: {e}"[:500])
    return rec


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--shape", required=True, help="B,C_in,C_out,L,K,stride,padding; several: ';'-separated")
    ap.add_argument("--cases", default=None, help="comma-separated case names (default: all)")
    ap.add_argument("--dtype", default="float16")
    ap.add_argument("--jobs", type=int, default=8)
    ap.add_argument("--one", default=None, help=argparse.SUPPRESS)   # the child: one case, JSON to stdout
    args = ap.parse_args(argv)
    if args.one:
        print(json.dumps(run_one([int(v) for v in args.shape.split(",")], args.dtype, args.one), default=str))
        return 0
    names = args.cases.split(",") if args.cases else list(cases())
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s", stream=sys.stdout)
    env = dict(os.environ, CUDA_LAUNCH_BLOCKING="1")

    def child(job: tuple[str, str]) -> dict[str, Any]:
        shape, name = job
        p = subprocess.run([sys.executable, "-m", "case_studies.conv1d.gpu_isolate", "--out", args.out, "--shape",
                            shape, "--dtype", args.dtype, "--one", name], capture_output=True, text=True,
                           env=env, timeout=300)
        lines = [ln for ln in p.stdout.splitlines() if ln.startswith("{")]
        rec = json.loads(lines[-1]) if lines else {"case": name, "ok": False, "error": p.stderr[-800:]}
        return {"shape": shape, **rec}

    jobs = [(shape, name) for shape in args.shape.split(";") for name in names]
    with ThreadPoolExecutor(max_workers=args.jobs) as pool:      # processes share the GPU
        results = list(pool.map(child, jobs))
    for rec in results:
        log.info("%s %s ok=%s %s", rec["shape"], rec["case"], rec.get("ok"), rec.get("error", rec.get("first", "")))
    Path(args.out).write_text(json.dumps({"dtype": args.dtype, "results": results}, indent=1, default=str))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
