"""Lab book, frozen: ran at commit 587d1f6 as `case_studies.optimized_fm.profile_n24`; results:
results/case_studies/optimized_fm/proton_n24/.
Nothing imports this file and it is not maintained: its imports name the modules as they were at 587d1f6;
to re-run it, check that commit out. The maintained benchmark is `benchmarks/case_studies/run.py`.

Proton profile of the shipped Optimized FM kernel at the production shape (B 1024, N 24, D 224, K 16,
FP16), beside the harness floor (one read of X) and eager, every launch after a 256 MB L2 flush:

    PYTHONPATH=. python -m case_studies.optimized_fm.profile_n24 --out DIR

Writes `n24_kernels.hatchet` (CUPTI: device time of each kernel, by scope), `n24_probes.hatchet` and
`n24_probes_kernels.hatchet` (the probe regions of the PROBES=True build, fixed config) and
`profile_n24.json` (the summaries and the config) to DIR. Nothing here is timed with host clocks.
"""
from __future__ import annotations

import argparse
import json
import logging
import sys
from pathlib import Path

import torch

log = logging.getLogger("profile_n24")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--iters", type=int, default=20)
    args = ap.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    logging.basicConfig(level=logging.INFO, stream=sys.stdout, format="%(asctime)s %(message)s")
    import profiling
    from case_studies.optimized_fm import kernel as fk
    from case_studies.optimized_fm import variants as fv
    from case_studies.optimized_fm.bench import make_inputs
    from case_studies.optimized_fm.reference import optimized_fm_reference
    from workbench.provenance import collect

    x, y = make_inputs({"B": 1024, "N": 24, "D": 224, "K": 16}, torch.float16, "cuda")
    cfg = fk.fixed_config()
    flat = x.reshape(-1)
    red = torch.empty((flat.numel() + 4095) // 4096, dtype=torch.float32, device="cuda")
    flush = torch.empty(256 * 2**20 // 4, dtype=torch.int32, device="cuda")
    ref = optimized_fm_reference(x, y)
    ours = fk.optimized_fm(x, y, config=cfg)        # compile outside the sessions
    fv.read_kernel[(red.numel(),)](flat, red, flat.numel(), BLOCK=4096, num_warps=4)
    torch.cuda.synchronize()
    res = {"provenance": collect(), "config": cfg,
           "max_abs_err_vs_eager": float((ours.float() - ref.float()).abs().max())}
    nbytes = (x.numel() + y.numel() + ref.numel()) * 2
    with profiling.kernel_session(out / "n24_kernels") as s:
        for _ in range(args.iters):
            flush.zero_()
            with s.scope("ours", bytes=nbytes, flops=4.0 * 1024 * 24 * 224 * 16):
                fk.optimized_fm(x, y, config=cfg)
            flush.zero_()
            with s.scope("read_x", bytes=x.numel() * 2):
                fv.read_kernel[(red.numel(),)](flat, red, flat.numel(), BLOCK=4096, num_warps=4)
            flush.zero_()
            with s.scope("eager"):
                optimized_fm_reference(x, y)
        torch.cuda.synchronize()
    prof = profiling.load(out / "n24_kernels.hatchet")
    res["kernel_summary"] = profiling.summarize(prof, max_kernels=8)
    res["kernels"] = prof.kernels.to_dict("records")
    (out / "profile_n24.json").write_text(json.dumps(res, indent=1, default=str))
    try:
        with profiling.probe_session(out / "n24_probes", kernel_times=True):
            for _ in range(3):
                flush.zero_()
                fk.optimized_fm(x, y, config=cfg, probes=True)
            torch.cuda.synchronize()
        probes = profiling.load(out / "n24_probes.hatchet", out / "n24_probes_kernels.hatchet")
        res["probe_summary"] = profiling.summarize(probes)
        res["regions"] = probes.regions.to_dict("records")
    except Exception as e:  # the kernel-level profile above stands on its own
        res["probe_error"] = f"{type(e).__name__}: {e}"[:800]
    (out / "profile_n24.json").write_text(json.dumps(res, indent=1, default=str))
    log.info("%s", res["kernel_summary"])
    log.info("%s", res.get("probe_summary", res.get("probe_error")))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
