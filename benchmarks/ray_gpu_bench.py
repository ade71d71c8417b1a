"""Ray evaluator on a multi-GPU host: throughput with 1 and 2 GPU workers against the local pool, Ray's
overhead per evaluation, the per-candidate cost split on a real GPU, and a worker killed mid-batch.

    PYTHONPATH=. python benchmarks/ray_gpu_bench.py [--n 16] [--spec examples/row_softmax/spec.py] \
        [--out results/distributed/ray_bench_h200x2.json]

Candidates are the offline tuning operator's rewrites of the spec's bundled candidate (distinct configs of
its TUNABLES), evaluated by the real harness on the GPU (compile, correctness on every shape, timing with
L2 flush). Phases, in one process and one local Ray cluster (started with every visible GPU):

1. local pool, 1 worker (the default backend: one isolated evaluation per GPU, on GPU 0);
2. Ray with 1 GPU worker; 3. Ray with `torch.cuda.device_count()` GPU workers (scaling);
4. the fault run: SIGKILL a busy worker mid-batch; every job must end with exactly one result.

Each phase gets a warm-up batch (one job per worker: harness servers started, baseline cached) first.
Writes one JSON with provenance; prints a one-line summary per phase.
"""

from __future__ import annotations

import logging
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks import common  # noqa: E402
from benchmarks.ray_bench import cost_split, fault_run, load, ray_call_floor, run_batch, stats, summarize  # noqa: E402
from workbench.evaluator import EvalJob, LocalPoolEvaluator  # noqa: E402

log = logging.getLogger("ray_gpu_bench")


def generate(seed_path: Path, n: int) -> tuple[list[str], list[float]]:
    """n distinct candidates by the offline operator's rewrite of the seed's tunables."""
    import itertools

    from workbench.tunables import apply_config, parse_tunables

    seed = seed_path.read_text()
    space = parse_tunables(seed)
    configs = [dict(zip(space.choices, v, strict=True)) for v in itertools.product(*space.choices.values())]
    if len(configs) < n:
        raise SystemExit(f"{seed_path} declares only {len(configs)} configs, {n} asked for")
    step = max(1, len(configs) // n)  # spread over the space, not the first corner of it
    out, secs = [], []
    for cfg in configs[::step][:n]:
        t = time.perf_counter()
        out.append(apply_config(seed, parse_tunables(seed), cfg))
        secs.append(time.perf_counter() - t)
    return out, secs


def phase(ev: Any, spec: str, warm: list[str], batch: list[str], trials: int) -> tuple[dict[str, Any], list]:
    mk = lambda srcs: [EvalJob(spec_path=spec, candidate_source=s, device="cuda", trials=trials) for s in srcs]
    t = time.perf_counter()
    run_batch(ev, mk(warm))
    out: dict[str, Any] = {"warmup_s": time.perf_counter() - t, "load_before": load()}
    res, wall, done = run_batch(ev, mk(batch))
    out.update(summarize(res, wall), load_after=load())
    out["fitness"] = stats([r.fitness for r in res])
    if res and "dispatch" in res[0].details:
        over = [r.details["dispatch"]["overhead_s"] for r in res if "overhead_s" in r.details["dispatch"]]
        out["ray_overhead_per_eval_ms"] = stats(over, 1e3)
        by_worker: dict[str, int] = {}
        for r in res:
            w = str(r.details["dispatch"].get("worker"))
            by_worker[w] = by_worker.get(w, 0) + 1
        out["evaluations_per_worker"] = by_worker
    return out, res


def main(argv: list[str] | None = None) -> int:
    ap = common.parser(__doc__, out_default="results/distributed/ray_bench_gpu.json", out_file=True)
    ap.add_argument("--n", type=int, default=16, help="candidates per measured batch")
    ap.add_argument("--spec", default="examples/row_softmax/spec.py")
    ap.add_argument("--trials", type=int, default=5)
    ap.add_argument("--no-fault", action="store_true")
    args = ap.parse_args(argv)
    common.setup_logging(logging.WARNING)
    import ray
    import torch

    from workbench.distributed.ray_backend import RayEvaluator
    n_gpu = torch.cuda.device_count()
    if n_gpu < 1:
        raise SystemExit("no GPU visible: this benchmark is for a GPU host (ray_bench.py covers the CPU)")
    spec = str((ROOT / args.spec).resolve())
    sources, gen_s = generate(Path(spec).parent / "candidate.py", args.n + 2 * n_gpu)
    warm, batch = sources[: n_gpu], sources[n_gpu : n_gpu + args.n]
    out: dict[str, Any] = {
        "benchmark": "ray_gpu_bench",
        "provenance": common.provenance(args.commit),
        "gpus": [torch.cuda.get_device_name(i) for i in range(n_gpu)],
        "ray_version": ray.__version__,
        "spec": args.spec,
        "batch": args.n,
        "trials": args.trials,
        "load_avg": {"start": load()},
    }
    path = args.out

    def save() -> None:  # after every phase: a phase that dies later loses nothing measured before it
        common.write_json(path, out, indent=2)

    t = time.perf_counter()
    pool = LocalPoolEvaluator(workers=1, device="cuda")
    out["local_pool_1gpu"], res_local = phase(pool, spec, warm[:1], batch, args.trials)
    out["local_pool_1gpu"]["startup_and_warmup_s"] = time.perf_counter() - t
    pool.close()
    print(f"local pool 1 GPU: {out['local_pool_1gpu']['throughput_per_s']:.3f} cand/s", flush=True)
    save()

    try:
        for workers in sorted({1, n_gpu}):
            key = f"ray_{workers}gpu"
            t = time.perf_counter()
            ev = RayEvaluator(workers=workers, device="cuda")
            out[key], res = phase(ev, spec, warm[:workers], batch, args.trials)
            out[key].update(evaluator_start_s=ev.start_s, connect_s=ev.connect_s,
                            startup_and_warmup_s=time.perf_counter() - t, workers=ev.workers())
            out[key]["same_statuses_as_local"] = [r.status.value for r in res] == [
                r.status.value for r in res_local]
            if workers == 1:
                out["cost_split_per_candidate"] = cost_split(res, gen_s)
                out["ray_1gpu"]["noop_actor_call"] = ray_call_floor(ev)
                out["cluster_resources"] = ray.cluster_resources()
            print(f"ray {workers} GPU: {out[key]['throughput_per_s']:.3f} cand/s, overhead median "
                  f"{out[key].get('ray_overhead_per_eval_ms', {}).get('median', float('nan')):.1f} ms", flush=True)
            if workers == n_gpu and not args.no_fault:
                fb = [EvalJob(spec_path=spec, candidate_source=s, device="cuda", trials=args.trials)
                      for s in batch[: max(4, 2 * n_gpu)]]
                out["fault"] = fault_run(ev, fb)
                f = out["fault"]
                print(f"fault: {f['results']}/{f['n']} results, one each: {f['all_one_result_none_lost']}, "
                      f"attempts {f['attempts_histogram']}, worker back after {f['worker_back_after_s']}", flush=True)
            ev.close()
            save()
    finally:
        ray.shutdown()
    one = out.get("ray_1gpu", {}).get("throughput_per_s")
    many = out.get(f"ray_{n_gpu}gpu", {}).get("throughput_per_s")
    if one and many and n_gpu > 1:
        out["scaling"] = {"gpus": n_gpu, "throughput_ratio": many / one, "efficiency": many / one / n_gpu}
    if one:
        out["ray_vs_local_throughput_1gpu"] = one / out["local_pool_1gpu"]["throughput_per_s"]
    out["load_avg"]["end"] = load()
    out["medians_note"] = "throughput = batch / wall; overhead = driver round trip minus time inside the harness"
    save()
    if "scaling" in out:
        s = out["scaling"]
        print(f"scaling {n_gpu} GPUs: x{s['throughput_ratio']:.2f} ({100 * s['efficiency']:.0f}% efficiency)")
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
