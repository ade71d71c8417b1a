"""Where the hostile harness's GPU timing bias comes from (issue 15), in one device call.

Frozen experiment, prepared on 2026-12-01 (`git log -- experiments/harness_gpu_timing`), not yet run (see
README.md here); it would write results/harness/gpu_timing_diag/.
Nothing imports it. Run on the GPU machine from the repository root:

    PYTHONPATH=. python experiments/harness_gpu_timing/diag.py --out $OUT/diag

Part A, in one trusted process (no harness), for each bundled example at its production shape, the
reference (eager), torch.compile of it and the example's Triton candidate:
- `events`: CUDA events around one call, inputs from a pool of fresh sets, L2 flushed before each call;
- `round_<warm>`: the harness's protocol imitated: 0.5 s idle (what staging does to the GPU), a warm-up
  (none, 6 fp16 matmuls, 30 ms of matmuls), then R calls on R distinct sets between two reads of
  `perf_counter` around a synchronize; the per-call time is the median over 5 rounds;
- `host_us`: the host-side cost of one call (100 calls without a synchronize, divided by 100).
Part B, the real harness on the same examples, each variant in its own harness server: the default,
`WB_WARM_MS=30`, `WB_GUARDS=off` (no audit hook in the candidate) and `WB_SANDBOX=off` (no namespaces,
no uid drop). A background `nvidia-smi -lms 50` logs SM clocks for the whole run (clocks.csv).
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import math
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
EXAMPLES = ["vector_add", "row_softmax", "matmul"]


def _module(path: Path, name: str):  # noqa: ANN202 - a module (the candidate: not a spec, so not load_spec)
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    sys.modules[name] = mod
    spec.loader.exec_module(mod)  # type: ignore[union-attr]
    return mod


def part_a(out: Path) -> list[dict]:
    import torch

    from workbench.spec import load_spec

    rows = []
    flush = torch.empty(256 * 2**20, dtype=torch.int8, device="cuda")
    w = torch.ones(4096, 4096, dtype=torch.float16, device="cuda")
    wo = torch.empty_like(w)

    def warm(kind: str) -> None:
        if kind == "mm6":
            for _ in range(6):
                torch.mm(w, w, out=wo)
        elif kind == "30ms":
            t0 = time.perf_counter()
            while time.perf_counter() - t0 < 0.03:
                for _ in range(4):
                    torch.mm(w, w, out=wo)
                torch.cuda.synchronize()

    for ex in EXAMPLES:
        loaded = load_spec(ROOT / "examples" / ex / "spec.py", module_name=f"spec_{ex}")
        loaded.apply(loaded.module.SHAPES["production"])
        spec = loaded.module
        cand = _module(ROOT / "examples" / ex / "candidate.py", f"cand_{ex}")
        init = spec.get_init_inputs()
        torch.manual_seed(0)
        ref = spec.Model(*init).cuda()
        new = cand.ModelNew(*init).cuda()
        set_bytes = sum(x.numel() * x.element_size() for x in spec.get_inputs() if isinstance(x, torch.Tensor))
        r_max = max(1, min(1000, (512 * 2**20) // set_bytes))
        pool = [[x.cuda() if isinstance(x, torch.Tensor) else x for x in spec.get_inputs()] for _ in range(r_max)]
        compiled = torch.compile(ref)
        with torch.no_grad():
            compiled(*pool[0])
            contenders = {"eager": ref, "compile": compiled, "candidate": new}
            for name, fn in contenders.items():
                fn(*pool[0])
                torch.cuda.synchronize()
                ev = []
                for i in range(30):
                    flush.zero_()
                    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                    s.record()
                    fn(*pool[i % len(pool)])
                    e.record()
                    torch.cuda.synchronize()
                    ev.append(s.elapsed_time(e) * 1e3)
                row = {"example": ex, "contender": name, "set_MB": set_bytes / 2**20,
                       "events_us": statistics.median(ev)}
                dt = row["events_us"] * 1e-6
                r = int(min(r_max, max(1, math.ceil(0.02 / dt))))
                row["R"] = r
                for kind in ("none", "mm6", "30ms"):
                    per = []
                    for _ in range(5):
                        time.sleep(0.5)
                        warm(kind)
                        torch.cuda.synchronize()
                        t0 = time.perf_counter()
                        for i in range(r):
                            fn(*pool[i % len(pool)])
                        torch.cuda.synchronize()
                        per.append((time.perf_counter() - t0) / r * 1e6)
                    row[f"round_{kind}_us"] = statistics.median(per)
                t0 = time.perf_counter()
                for i in range(100):
                    fn(*pool[i % len(pool)])
                row["host_us"] = (time.perf_counter() - t0) / 100 * 1e6
                torch.cuda.synchronize()
                rows.append(row)
                print(json.dumps(row), flush=True)
        del pool, compiled
        torch.cuda.empty_cache()
    (out / "part_a.json").write_text(json.dumps(rows, indent=1))
    return rows


VARIANTS = {"default": {}, "warm30": {"WB_WARM_MS": "30"}, "guards_off": {"WB_GUARDS": "off"},
            "sandbox_off": {"WB_SANDBOX": "off"}}


def part_b(out: Path, variants: list[str], budget_s: float, device: str = "cuda") -> list[dict]:
    from workbench.harness import Harness

    rows = []
    deadline = time.monotonic() + budget_s
    for var in variants:
        saved = {k: os.environ.get(k) for k in VARIANTS[var]}
        os.environ.update(VARIANTS[var])
        try:
            with Harness(device=device) as h:
                h.start()
                for ex in EXAMPLES:
                    if time.monotonic() > deadline:
                        rows.append({"variant": var, "example": ex, "status": "not_run (budget)"})
                        continue
                    if var != "default" and ex == "matmul":
                        continue  # long kernels showed no bias; the budget goes to the short ones
                    d = ROOT / "examples" / ex
                    res = h.evaluate(d / "spec.py", d / "candidate.py", trials=1)
                    t = res.timings_s
                    row = {"variant": var, "example": ex, "status": res.status.value, "speedup": res.fitness,
                           "cand_us": res.runtime_us, "ref_us": res.baseline_runtime_us,
                           "details": res.details,
                           "client_wall_s": t.get("client_wall"), "timings_s": t, "violations": res.violations[:4],
                           "error": res.error[:200]}
                    rows.append(row)
                    print(json.dumps({k: row[k] for k in ("variant", "example", "status", "speedup", "cand_us",
                                                          "ref_us", "client_wall_s")}), flush=True)
        finally:
            for k, v in saved.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v
    (out / "part_b.json").write_text(json.dumps(rows, indent=1, default=str))
    return rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--variants", default="default,warm30,guards_off,sandbox_off")
    ap.add_argument("--budget-s", type=float, default=200.0, help="part B stops starting evaluations after this")
    ap.add_argument("--skip-a", action="store_true")
    ap.add_argument("--device", default="cuda", help="cpu: a dry run of part B (with --skip-a)")
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    smi = subprocess.Popen(["nvidia-smi" if args.device == "cuda" else "true",
                            "--query-gpu=timestamp,clocks.sm,clocks.mem,power.draw,utilization.gpu",
                            "--format=csv", "-lms", "50"], stdout=(out / "clocks.csv").open("w"),
                           stderr=subprocess.DEVNULL)
    try:
        from workbench.provenance import collect

        (out / "provenance.json").write_text(json.dumps(collect(), indent=1, default=str))
        t0 = time.time()
        if not args.skip_a:
            part_a(out)
        (out / "marks.txt").write_text(f"part_a {t0:.3f} {time.time():.3f}\n")
        t1 = time.time()
        part_b(out, args.variants.split(","), args.budget_s, args.device)
        with (out / "marks.txt").open("a") as f:
            f.write(f"part_b {t1:.3f} {time.time():.3f}\n")
    finally:
        smi.terminate()
    return 0


if __name__ == "__main__":
    sys.exit(main())
