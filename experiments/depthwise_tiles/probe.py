"""Depthwise convolution tiles on the GPU: which [channels, positions] tile the depthwise form wants.

One-off (lab book, nothing imports it). For each staged draft, every (CONV_BLOCK_CO, CONV_BLOCK_P,
CONV_NUM_WARPS) below is set on the candidate module (its forward reads them at call time), checked
against eager and timed with CUDA events, beside eager. Run from the repository root on the GPU machine:

    PYTHONPATH=. python experiments/depthwise_tiles/probe.py --dir .cache/lowering_gpu7 --out OUT/dw.json

It ran against `benchmarks/lowering_gpu_worker.py`, removed since (drafts are timed by the harness only,
through `workbench suite`); `git show ea78175:benchmarks/lowering_gpu_worker.py` brings it back to rerun this.
"""
from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import torch

from benchmarks import lowering_gpu_worker as wk

TILES = [(32, 64, 4), (16, 128, 4), (8, 256, 4), (4, 256, 4), (4, 512, 4), (2, 512, 4), (8, 512, 8), (4, 1024, 8),
         (1, 1024, 4), (16, 256, 8)]


def probe(d: Path, m: dict, dev: str) -> dict:
    t0 = time.perf_counter()
    ref, cand = wk._load(d, m, f"dw_{m['level']}_{m['problem']}")
    model, model_new, inputs = wk.models_and_inputs(ref, cand, dev)
    with torch.no_grad():
        want = wk._flat(model(*inputs))
        eager = wk.time_us(lambda: model(*inputs), dev, 0.05, 15)
        row = {"problem": m["problem"], "eager_us": round(eager, 1), "tiles": []}
        for co, p, nw in TILES:
            cand.CONV_BLOCK_CO, cand.CONV_BLOCK_P, cand.CONV_NUM_WARPS = co, p, nw
            try:
                ok, err, why = wk.compare(want, wk._flat(model_new(*inputs)))
                us = wk.time_us(lambda: model_new(*inputs), dev, 0.05, 15)
                row["tiles"].append({"co": co, "p": p, "warps": nw, "ok": ok, "us": round(us, 1),
                                     "vs_eager": round(eager / us, 3)})
            except Exception as exc:  # noqa: BLE001 - a tile that does not compile or run: recorded
                row["tiles"].append({"co": co, "p": p, "warps": nw, "error": wk._line(exc)[:160]})
            print(m["problem"][:24], row["tiles"][-1], flush=True)
    row["wall_s"] = round(time.perf_counter() - t0, 1)
    return row


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--dir", required=True)
    ap.add_argument("--out", required=True)
    # pure depthwise problems only: a tile narrower than 16 channels cannot feed the other convolutions' tl.dot
    ap.add_argument("--problems", default="82_,83_,84_,85_")
    ap.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    a = ap.parse_args()
    if a.device == "cpu":
        wk.init_worker("cpu")  # the interpreter, before triton is imported by a candidate
    d = Path(a.dir)
    manifest = json.loads((d / "manifest.json").read_text())
    picks = [m for m in manifest if "candidate" in m and any(m["problem"].startswith(p) for p in a.problems.split(","))]
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    rows = []
    for m in picks:
        rows.append(probe(d, m, a.device))
        Path(a.out).write_text(json.dumps(rows, indent=1))
        if a.device == "cuda":
            torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
