"""Lab book, frozen: ran at commit fc682c5 as `case_studies.pffn.gpu_final`; results: results/case_studies/pffn/
(bench.csv, final*_checks.json, final*_log.txt, final*_profile/).
Nothing imports this file and it is not maintained: its imports name the modules as they were at fc682c5;
to re-run it, check that commit out. The maintained benchmark is `benchmarks/case_studies/run.py`.

The final GPU call for PFFN: the recorded benchmark, then a Proton profile of the kernel it measured.

    PYTHONPATH=. python -m case_studies.pffn.gpu_final --out "$OUT" --budget-s 80 --commit SHA

1. `run_gpu_part1 --cases pffn --quick` in this process (GPU checks; every production sweep: eager,
   torch.compile default, our kernel and its libdevice-erf variant, plain and CUDA-graph replay), which
   writes `pffn.csv`, `checks.json`, `log.txt` under `--out`;
2. Proton, on the configs the calls above ran (the split-K rule at B 64, the autotuner's picks elsewhere):
   kernel times (CUPTI) and probe regions (cycles per region per warp) at B 64 D 128, B 256 D 256 and
   B 4096 D 256, packed into `profile.tar.gz` with a `profile_summary.txt`.
"""
from __future__ import annotations

import argparse
import logging
import tarfile
import tempfile
import time
from pathlib import Path

import torch

log = logging.getLogger("pffn.gpu_final")
PROFILE_SHAPES = [(64, 128), (256, 256), (4096, 256)]


def profile(out: Path) -> str:
    import profiling
    from case_studies.pffn import kernel as pk
    from case_studies.pffn.bench import make_inputs

    pdir = Path(tempfile.mkdtemp()) / "profile"    # only the archive goes to --out (8 files come back)
    pdir.mkdir()
    lines = []
    for b, d in PROFILE_SHAPES:
        p = {"N": 16, "B": b, "D": d, "K": 256}
        ins = make_inputs(p, torch.float16, "cuda")
        pk.pffn(*ins)                                    # the benchmark's path (rule or autotuned pick)
        tuned = [c for k, c in pk.best_config().items() if tuple(k[:3]) == (b, d, 256) and "torch.float16" in k]
        cfg = tuned[0] if tuned else None                # None: the split-K rule applies
        name = f"b{b}_d{d}"
        try:
            with profiling.kernel_session(pdir / f"{name}_kernels"):
                for _ in range(5):
                    pk.pffn(*ins, config=cfg)
                torch.cuda.synchronize()
            opts = profiling.ProbeOptions(buffer_type="global", buffer_size=1 << 16)
            with profiling.probe_session(pdir / f"{name}_probes", options=opts):
                for _ in range(3):
                    pk.pffn(*ins, config=cfg, probes=True)
                torch.cuda.synchronize()
            kern = profiling.summarize(profiling.load(pdir / f"{name}_kernels.hatchet"))
            probes = profiling.summarize(profiling.load(pdir / f"{name}_probes.hatchet", on_error="warn"))
            lines.append(f"## {name} (fp16, N 16, K 256), config {cfg or pk.rule_config(b, d)}\n{kern}\n{probes}\n")
        except Exception as e:  # the benchmark's results stand without the profile: report, go on
            lines.append(f"## {name}: profile failed: {type(e).__name__}: {e}"[:800])
        log.info("%s", lines[-1])
    text = "\n".join(lines)
    (pdir / "profile_summary.txt").write_text(text)
    (out / "profile_summary.txt").write_text(text)
    with tarfile.open(out / "profile.tar.gz", "w:gz") as tf:
        tf.add(pdir, arcname="profile")
    return text


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--budget-s", type=float, default=80.0)
    ap.add_argument("--commit", default=None)
    args = ap.parse_args(argv)
    out = Path(args.out)
    t0 = time.perf_counter()
    from case_studies import run_gpu_part1

    argv1 = ["--out", str(out), "--cases", "pffn", "--quick", "--budget-s", str(args.budget_s)]
    rc = run_gpu_part1.main(argv1 + (["--commit", args.commit] if args.commit else []))
    log.info("benchmark rc %s at %.0f s", rc, time.perf_counter() - t0)
    profile(out)
    log.info("done at %.0f s", time.perf_counter() - t0)
    return rc


if __name__ == "__main__":
    raise SystemExit(main())
