"""Harness overhead per candidate: wall time beyond the candidate's own compile and timed runs.

Usage: python benchmarks/harness_overhead.py [--device auto] [--modes staging,vector_add,examples]
       [--repeat 2] [--label NAME] [--out results/harness/overhead] [--commit SHA]

Modes (each a section of the JSON it writes, with provenance):
- `staging`: the path one timed round's inputs take, alone, in this process: R = 4 sets of vector_add at
  N = 16M (2 float32 inputs, 128 MB a set), generated, written, read back and moved to the device, by the
  harness's old path (host RNG, input-cache write, torch.save, torch.load(mmap) + .to) and by its current
  one (`child._Reference.make_round`'s: device RNG on the GPU, flat file; `plan.RawReader`: pinned
  buffers, one synchronize);
- `vector_add`: full evaluations of examples/vector_add (`--n`, default 4M on the CPU, 16M on the GPU)
  through `Harness`, client wall time and its phases (on the CPU its candidate is the example with
  BLOCK_SIZE 65536: the interpreter runs a program per block);
- `examples`: every bundled example at its default plan (on the GPU: its production shape), `--repeat` times.
Overhead = client wall minus compile + first call, correctness calls, the timing phase and the baseline
timing (benchmarks/gpu_hostile_harness.py's `_row`); `rounds_*` phases split the timing phase.
"""
from __future__ import annotations

import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks import common  # noqa: E402
from workbench.env import ensure_interpreter_if_no_gpu  # noqa: E402

ensure_interpreter_if_no_gpu()

OWN = ("compile_and_first_call", "correctness", "timing", "baseline_timing")
SPEC = ROOT / "examples" / "vector_add" / "spec.py"


def _sync(device: str) -> None:
    import torch

    if device == "cuda":
        torch.cuda.synchronize()


def staging(device: str, n: int, sets: int, rounds: int) -> dict[str, Any]:
    """Median seconds per round of each phase, old path against current path."""
    import torch

    from workbench.harness import plan as _plan
    from workbench.harness.input_cache import InputCache
    from workbench.spec import load_spec

    spec = load_spec(SPEC, {"N": n})
    work = Path(tempfile.mkdtemp(prefix="wb-stagebench-", dir="/dev/shm" if os.access("/dev/shm", os.W_OK) else None))
    cache = InputCache(True, work / "cache", max_mb=2048)
    out: dict[str, Any] = {"n": n, "sets_per_round": sets, "rounds": rounds, "dir": str(work.parent),
                           "set_mb": 2 * n * 4 / 2**20}
    seed = 10_000

    def gen_host(s: int, use_cache: bool) -> list[Any]:
        return _plan.build_inputs(spec, s, "cpu", cache if use_cache else None)

    def gen_device(s: int) -> list[Any]:
        torch.manual_seed(s)
        with torch.device(device):
            return list(spec.module.get_inputs())

    paths: dict[str, list[dict[str, float]]] = {"old": [], "current": []}
    for _ in range(rounds):
        # old: what server.py/child.py did before (host RNG + cache put, torch.save, mmap load + .to)
        ph: dict[str, float] = {}
        t = time.perf_counter()
        st = [gen_host(seed + i, True) for i in range(sets)]
        ph["generate"] = time.perf_counter() - t
        t = time.perf_counter()
        torch.save(st, work / "round.pt")
        ph["write"] = time.perf_counter() - t
        del st
        t = time.perf_counter()
        got = torch.load(work / "round.pt", weights_only=True, mmap=True)
        dev = [list(_plan.to_device(s, device)) for s in got]
        if device == "cpu":  # to('cpu') is a no-op: touch the pages the candidate would read
            for s in dev:
                for x in s:
                    x.sum()
        _sync(device)
        ph["read_to_device"] = time.perf_counter() - t
        del got, dev
        (work / "round.pt").unlink()
        paths["old"].append(ph)
        seed += sets
    for f in (work / "cache").glob("*"):
        f.unlink()
    reader = _plan.RawReader(device)
    for _ in range(rounds):
        ph = {}
        t = time.perf_counter()
        st = [gen_device(seed + i) if device == "cuda" else gen_host(seed + i, False) for i in range(sets)]
        host = [[x.to("cpu", non_blocking=True) for x in s] for s in st]
        _sync(device)
        ph["generate"] = time.perf_counter() - t
        t = time.perf_counter()
        _plan.write_raw(work / "round.raw", host)
        ph["write"] = time.perf_counter() - t
        del st, host
        t = time.perf_counter()
        dev = reader.read(work / "round.raw")
        if device == "cpu":
            for s in dev:
                for x in s:
                    x.sum()
        _sync(device)
        ph["read_to_device"] = time.perf_counter() - t
        del dev
        (work / "round.raw").unlink()
        paths["current"].append(ph)
        seed += sets
    for name, rows in paths.items():
        med = {k: statistics.median(r[k] for r in rows) for k in rows[0]}
        med["total"] = sum(med.values())
        out[name] = {"median_s": med, "rounds_s": rows}
    out["speedup_total"] = out["old"]["median_s"]["total"] / out["current"]["median_s"]["total"]
    try:
        (work / "cache").rmdir()
        work.rmdir()
    except OSError:
        pass
    return out


def _row(name: str, rep: int, res: Any) -> dict[str, Any]:
    t = res.timings_s
    return {"example": name, "rep": rep, "status": res.status.value, "fitness": res.fitness,
            "runtime_us": res.runtime_us, "baseline_us": res.baseline_runtime_us,
            "reps": res.details.get("reps"), "rounds": res.details.get("rounds"),
            "reps_per_round": res.details.get("reps_per_round"), "client_wall_s": t.get("client_wall"),
            "overhead_s": t.get("client_wall", 0.0) - sum(t.get(k, 0.0) for k in OWN),
            "phases_s": dict(t)}


def evaluations(h: Any, device: str, modes: list[str], n: int | None, repeat: int) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if "vector_add" in modes:
        src = (SPEC.parent / "candidate.py").read_text()
        if device == "cpu":
            src = src.replace("BLOCK_SIZE = 64\n", "BLOCK_SIZE = 65536\n")
        n = n or (1 << 24 if device == "cuda" else 1 << 22)
        rows = []
        for rep in range(repeat):
            # the default shape with N overridden: on the GPU too, so the timed shape is this one
            res = h.evaluate(SPEC, src, overrides={"N": n}, shapes=["default"])
            rows.append(_row("vector_add", rep, res))
            print(f"vector_add N={n} rep {rep}: {res.summary()} client wall {res.timings_s['client_wall']:.2f} s",
                  flush=True)
        out["vector_add"] = {"n": n, "rows": rows}
    if "examples" in modes:
        rows = []
        for rep in range(repeat):
            for spec in sorted((ROOT / "examples").glob("*/spec.py")):
                res = h.evaluate(spec, spec.parent / "candidate.py")
                rows.append(_row(spec.parent.name, rep, res))
                print(f"{spec.parent.name:12s} rep {rep}: {res.summary()} client wall "
                      f"{res.timings_s['client_wall']:.2f} s", flush=True)
        out["examples"] = {"rows": rows}
    for sec in out.values():
        warm = [r for r in sec["rows"] if r["rep"] > 0] or sec["rows"]
        sec["median_client_wall_after_first_s"] = statistics.median(r["client_wall_s"] for r in warm)
        sec["median_overhead_after_first_s"] = statistics.median(r["overhead_s"] for r in warm)
    return out


def main() -> int:
    ap = common.parser(__doc__, out_default="results/harness/overhead")
    ap.add_argument("--device", default="auto")
    ap.add_argument("--modes", default="staging,vector_add,examples")
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--n", type=int, default=None, help="vector_add's N in the vector_add mode")
    ap.add_argument("--stage-n", type=int, default=1 << 24, help="vector_add's N in the staging mode")
    ap.add_argument("--stage-rounds", type=int, default=3)
    ap.add_argument("--label", default="", help="a name for this run (e.g. before/after), in the file name")
    args = ap.parse_args()
    from workbench.harness import Harness, resolve_device

    device = resolve_device(args.device)
    modes = [m for m in args.modes.split(",") if m]
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    doc: dict[str, Any] = {"provenance": common.provenance(args.commit), "device": device, "label": args.label,
                           "load_avg": os.getloadavg(), "cpus": os.cpu_count(),
                           "env": {k: os.environ.get(k) for k in ("WB_STAGE_MB", "WB_STAGE_TOTAL_MB",
                                                                  "WB_DEVICE_INPUTS", "WB_INPUT_CACHE")}}
    t0 = time.perf_counter()
    if "staging" in modes:
        doc["staging"] = staging(device, args.stage_n, 4, args.stage_rounds)
        for p in ("old", "current"):
            m = doc["staging"][p]["median_s"]
            print(f"staging {p:7s}: " + ", ".join(f"{k} {v:.3f} s" for k, v in m.items()), flush=True)
    if {"vector_add", "examples"} & set(modes):
        with Harness(device=device) as h:
            h.start()
            doc["server_startup_s"] = h.startup_s
            doc.update(evaluations(h, device, modes, args.n, args.repeat))
    doc["load_avg_end"] = os.getloadavg()
    doc["total_s"] = time.perf_counter() - t0
    name = f"overhead_{device}{'_' + args.label if args.label else ''}.json"
    common.write_json(out / name, doc)
    for key in ("vector_add", "examples"):
        if key in doc:
            print(f"{key}: median client wall {doc[key]['median_client_wall_after_first_s']:.2f} s, overhead "
                  f"{doc[key]['median_overhead_after_first_s']:.2f} s (after the first evaluation)")
    print(f"wrote {out / name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
