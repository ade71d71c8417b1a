"""GPU self-check of the profiling package: `python -m profiling.selfcheck --out results/profiling/h200`.

For each instrumented kernel (the demos in profiling/kernels.py, plus any kernels a caller passes in with
`--cases-from module:function`, e.g. `case_studies.mbdt.profile:selfcheck_case`), on a GPU:
1. correctness of PROBES=False and PROBES=True (outside a session the probes compile away);
2. CUDA-event timing, back-to-back launches, median of trials: never inside a profiling session;
3. a kernel-level (CUPTI) session, tree and chrome trace: its per-launch time must agree with (2)
   within 10%;
4. a probe session (tree) with a CUPTI session beside it: every declared region must show non-zero
   cycles; the instrumentation overhead is the CUPTI device time of the instrumented launches over
   that of the plain ones (both measured on the device, neither by a host timer under instrumentation);
5. a probe session (chrome trace) on a smaller launch, sub-sampled to a few CTAs (files < 1 MB).
Writes the traces, their sidecars and `selfcheck.json` (provenance, numbers, every check and its
verdict). Exit status 0 when every check passed, 1 otherwise, 2 when no GPU is visible.
"""

from __future__ import annotations

import argparse
import importlib
import json
import logging
import math
import re
import shutil
import statistics
import sys
import tempfile
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

log = logging.getLogger("profiling.selfcheck")

AGREEMENT_TOL = 0.10  # kernel-level (CUPTI) vs CUDA-event time per launch
MAX_FILE_BYTES = 1_000_000  # committed traces stay below this


@dataclass
class Case:
    """One instrumented kernel and how to drive it."""

    name: str
    kernel: Any  # the @triton.jit function (for its declared regions)
    run: Callable[[bool], Any]  # run(probes) -> output, full size
    reference: Callable[[], Any]
    run_small: Callable[[bool], Any]  # a smaller launch for the chrome trace
    bytes: float = math.nan  # bytes moved per launch (read + write)
    flops: float = math.nan
    flops_dtype: str = "fp16"
    atol: float = 1e-5
    rtol: float = 1e-5
    probe_options: dict[str, Any] = field(default_factory=dict)
    trace_warps: tuple[int, ...] = (0, 1)


def demo_cases(device: str = "cuda") -> list[Case]:
    import torch

    from . import kernels as K

    g = torch.Generator(device=device).manual_seed(0)
    n = (1 << 25) + 3  # odd tail: the mask matters
    x = torch.randn(n, device=device, generator=g)
    y = torch.randn(n, device=device, generator=g)
    xs, ys = x[: (1 << 20) + 3], y[: (1 << 20) + 3]
    rows, cols = 16384, 4093
    s = torch.randn(rows, cols, device=device, generator=g)
    m = 4096
    a = torch.randn(m, m, device=device, dtype=torch.float16, generator=g)
    b = torch.randn(m, m, device=device, dtype=torch.float16, generator=g)
    a_s, b_s = a[:1024, :1024].contiguous(), b[:1024, :1024].contiguous()
    return [
        Case(
            "scale_add",
            K.scale_add_kernel,
            lambda p: K.scale_add(x, y, 0.5, probes=p),
            lambda: K.scale_add_reference(x, y, 0.5),
            lambda p: K.scale_add(xs, ys, 0.5, probes=p),
            bytes=3 * 4 * n,
            flops=5 * n,
            flops_dtype="fp32",
        ),
        Case(
            "softmax",
            K.softmax_kernel,
            lambda p: K.softmax(s, probes=p),
            lambda: K.softmax_reference(s),
            lambda p: K.softmax(s[:1024], probes=p),
            bytes=2 * 4 * rows * cols,
            atol=1e-6,
            rtol=1e-4,
        ),
        # in-loop probes: 64 K-steps x 2 regions per warp do not fit the default shared buffer
        Case(
            "matmul",
            K.matmul_kernel,
            lambda p: K.matmul(a, b, probes=p),
            lambda: K.matmul_reference(a, b),
            lambda p: K.matmul(a_s, b_s, probes=p),
            bytes=3 * 2 * m * m,
            flops=2 * m**3,
            flops_dtype="fp16",
            atol=0.5,
            rtol=2e-2,
            probe_options={"buffer_type": "global", "buffer_size": 65536},
            trace_warps=(0, 4),
        ),
    ]


def cases_from(spec: str, device: str = "cuda") -> list[Case]:
    """Cases offered by another package, named on the command line as `module:function`: the function
    takes the device and returns one dict of `Case` fields or a list of them. The self-check knows no
    caller's kernels: whoever wants theirs profiled passes them in (`--cases-from`)."""
    mod_name, _, fn_name = spec.partition(":")
    if not mod_name or not fn_name:
        raise ValueError(f"--cases-from {spec!r}: expected module:function")
    got = getattr(importlib.import_module(mod_name), fn_name)(device)
    return [Case(**d) for d in (got if isinstance(got, list) else [got])]


def time_cuda_events(fn: Callable[[], Any], reps: int = 20, trials: int = 7) -> dict[str, float]:
    """Per-launch ms of back-to-back launches, median/p20/p80 over trials. Refuses under a probe session."""
    import torch

    from .sessions import assert_not_instrumenting

    assert_not_instrumenting("CUDA-event timing")
    fn()
    torch.cuda.synchronize()
    per: list[float] = []
    for _ in range(trials):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(reps):
            fn()
        end.record()
        torch.cuda.synchronize()
        per.append(start.elapsed_time(end) / reps)
    q = statistics.quantiles(per, n=5) if len(per) >= 5 else [min(per)] * 4
    return {
        "median_us": 1e3 * statistics.median(per),
        "p20_us": 1e3 * q[0],
        "p80_us": 1e3 * q[3],
        "reps": reps,
        "trials": trials,
    }


def _kernel_row(prof: Any, kernel: str, scope: str | None = None) -> dict[str, Any]:
    k = prof.kernels[prof.kernels["kernel"] == kernel]
    if scope is not None:
        k = k[k["scope"].str.startswith(scope)]
    if not len(k):
        raise AssertionError(
            f"kernel {kernel!r} (scope {scope!r}) absent from the kernel-level profile; "
            f"found {sorted(set(prof.kernels['kernel']))}"
        )
    t, n = float(k["time_ns"].sum()), int(k["launches"].sum())
    return {
        "launches": n,
        "time_per_launch_us": t / n / 1e3,
        "gbps": float(k["gbps"].iloc[0]) if "gbps" in k else math.nan,
        "tflops": float(k["tflops"].iloc[0]) if "tflops" in k else math.nan,
    }


def check_case(
    case: Case, out: Path, scratch: Path, reps: int, probe_reps: int, max_ctas: int, clock_variant: bool
) -> dict[str, Any]:
    import torch

    import profiling
    from profiling.probes import declared_regions, python_function

    kname = python_function(case.kernel).__name__
    regions = declared_regions(case.kernel)
    res: dict[str, Any] = {"kernel": kname, "declared_regions": regions, "checks": {}}
    checks = res["checks"]

    ref = case.reference()
    for probes in (False, True):
        got = case.run(probes)
        torch.cuda.synchronize()
        err = (got.float() - ref.float()).abs().max().item()
        ok = torch.allclose(got.float(), ref.float(), atol=case.atol, rtol=case.rtol)
        checks[f"correct_probes_{probes}"] = {"passed": bool(ok), "max_abs_err": err}

    # 2. CUDA events, outside every session; PROBES=True outside a session compiles the probes away.
    plain = time_cuda_events(lambda: case.run(False), reps=reps)
    probes_off = time_cuda_events(lambda: case.run(True), reps=reps)
    res["cuda_events"] = {"plain": plain, "probes_flag_without_session": probes_off}

    # 3. kernel level: tree with bytes/flops scopes, then a short chrome trace
    with profiling.kernel_session(out / f"{case.name}_kernels", data="tree") as s:
        with s.scope(
            case.name,
            bytes=case.bytes * reps if not math.isnan(case.bytes) else None,
            flops=case.flops * reps if not math.isnan(case.flops) else None,
            flops_dtype=case.flops_dtype,
        ):
            for _ in range(reps):
                case.run(False)
        torch.cuda.synchronize()
    kprof = profiling.load(s.path)
    krow = _kernel_row(kprof, kname)
    res["kernel_level"] = krow
    dev = abs(krow["time_per_launch_us"] - plain["median_us"]) / plain["median_us"]
    checks["cupti_vs_cuda_events"] = {
        "passed": dev <= AGREEMENT_TOL,
        "relative_difference": dev,
        "cupti_us": krow["time_per_launch_us"],
        "events_us": plain["median_us"],
        "tolerance": AGREEMENT_TOL,
    }
    with profiling.kernel_session(out / f"{case.name}_kernels", data="trace"):
        for _ in range(2):
            case.run(False)
        torch.cuda.synchronize()

    # 4. probes, tree, with CUPTI device times of the instrumented launches beside
    opts = profiling.ProbeOptions(**case.probe_options)
    with profiling.probe_session(
        out / f"{case.name}_probes", data="tree", options=opts, kernel_times=True
    ) as ps:
        with ps.scope("probes"):
            for _ in range(probe_reps):
                case.run(True)
            torch.cuda.synchronize()
    pprof = profiling.load(ps.path, ps.kernels_path)
    irow = _kernel_row(pprof, kname, scope="probes")
    overhead = irow["time_per_launch_us"] / krow["time_per_launch_us"] - 1.0
    res["instrumented"] = {
        **irow,
        "overhead": overhead,
        "dropped_event_lines": ps.dropped_lines,
        "options": case.probe_options,
    }
    reg = pprof.regions[pprof.regions["kernel"] == kname]
    res["regions"] = reg[
        ["region", "depth", "cycles", "cycles_per_launch", "share", "ns_per_launch", "launches"]
    ].to_dict(orient="records")
    try:
        pprof.check_regions(regions, kernel=kname)
        checks["regions_nonzero"] = {"passed": bool(regions), "expected": regions}
    except profiling.MissingRegionsError as exc:
        checks["regions_nonzero"] = {"passed": False, "expected": regions, "error": str(exc)}
    _add_overhead(out / f"{case.name}_probes.hatchet", kname, overhead)

    # 5. probes, chrome trace, smaller launch, sampled warps, then sub-sampled CTAs
    topts = profiling.ProbeOptions(**dict(case.probe_options, warps=case.trace_warps))
    raw = scratch / f"{case.name}_probes_full"
    with profiling.probe_session(raw, data="trace", options=topts) as ts:
        case.run_small(True)
        torch.cuda.synchronize()
    dst = out / f"{case.name}_probes.chrome_trace"
    n_ctas = max_ctas
    while True:
        res["trace_sampling"] = profiling.subsample_probe_trace(ts.path, dst, max_ctas=n_ctas)
        if dst.stat().st_size < MAX_FILE_BYTES or n_ctas <= 4:
            break
        n_ctas //= 2
    shutil.copy(str(ts.path) + ".meta.json", str(dst) + ".meta.json")
    tprof = profiling.load(dst, clock_mhz=pprof.clock_mhz)
    res["trace_regions"] = sorted(set(tprof.events["region"]))
    checks["trace_regions"] = {
        "passed": set(regions) <= set(res["trace_regions"]),
        "found": res["trace_regions"],
    }
    ov = tprof.overlap(kernel=kname)
    res["overlap_top"] = ov.sort_values("concurrent_share", ascending=False).head(6).to_dict(orient="records")

    if clock_variant:
        vopts = profiling.ProbeOptions(
            **dict(
                case.probe_options,
                warps=case.trace_warps,
                buffer_type="global",
                optimizations=("clock32", "time_shift"),
            )
        )
        with profiling.probe_session(scratch / f"{case.name}_clock32", data="trace", options=vopts) as vs:
            case.run_small(True)
            torch.cuda.synchronize()
        vprof = profiling.load(vs.path, clock_mhz=pprof.clock_mhz)
        base = tprof.events.groupby("region")["dur_cycles"].median()
        var = vprof.events.groupby("region")["dur_cycles"].median()
        res["clock32_time_shift"] = {
            "median_cycles_default": base.to_dict(),
            "median_cycles_clock32_time_shift": var.to_dict(),
            "events": len(vprof.events),
        }
    sizes = {p.name: p.stat().st_size for p in out.glob(f"{case.name}_*") if p.is_file()}
    checks["files_small"] = {"passed": all(v < MAX_FILE_BYTES for v in sizes.values()), "bytes": sizes}
    res["summary_text"] = profiling.summarize(
        profiling.load(out / f"{case.name}_kernels.hatchet", ps.path, dst, clock_mhz=pprof.clock_mhz)
    )
    res["passed"] = all(c["passed"] for c in checks.values())
    return res


def _add_overhead(path: Path, kernel: str, overhead: float) -> None:
    sc = Path(str(path) + ".meta.json")
    meta = json.loads(sc.read_text()) if sc.exists() else {}
    meta.setdefault("overhead", {})[kernel] = overhead
    meta["overhead_method"] = (
        "CUPTI device time per launch, instrumented (probe session) over plain "
        "(kernel-level session), same shapes"
    )
    sc.write_text(json.dumps(meta, indent=1, default=str))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m profiling.selfcheck", description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="results/profiling/h200", help="folder for traces and selfcheck.json")
    ap.add_argument("--reps", type=int, default=20, help="back-to-back launches per timing trial")
    ap.add_argument("--probe-reps", type=int, default=3, help="instrumented launches in the probe tree")
    ap.add_argument("--max-ctas", type=int, default=48, help="CTAs kept in committed probe traces")
    ap.add_argument("--only", nargs="*", help="case names to run (default: all)")
    ap.add_argument("--commit", default=None, help="git commit to record when the tree has no .git")
    ap.add_argument("--cases-from", action="append", default=[], metavar="MODULE:FUNCTION",
                    help="more cases: FUNCTION(device) returns a dict of Case fields or a list of them "
                         "(the recorded run: case_studies.mbdt.profile:selfcheck_case)")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")

    import torch

    if not torch.cuda.is_available():
        log.error("no CUDA device: the self-check profiles on a GPU (CPU tests cover the parsers)")
        return 2
    from platforms import collect, describe_device

    prov = collect()
    # the device's copy of the tree has no .git: git then answers "unknown" or the literal "HEAD"
    if args.commit and not re.fullmatch(r"[0-9a-f]{40}(-dirty)?", str(prov.get("commit", ""))):
        prov["commit"] = args.commit
        prov["commit_note"] = "passed with --commit: no git repository on the measuring machine"
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    summary: dict[str, Any] = {
        "provenance": prov,
        "platform": describe_device("cuda").to_dict(),
        "agreement_tolerance": AGREEMENT_TOL,
        "cases": {},
    }
    cases = demo_cases()
    for spec in args.cases_from:
        try:
            cases += cases_from(spec)
        except Exception as exc:  # a caller's case that cannot be built must not stop the self-check
            log.warning("--cases-from %s skipped: %s", spec, exc)
            summary["cases"][spec] = {"passed": False, "error": f"{type(exc).__name__}: {exc}"}
    if args.only:
        cases = [c for c in cases if c.name in args.only]
    with tempfile.TemporaryDirectory() as tmp:
        for i, case in enumerate(cases):
            log.info("== %s", case.name)
            try:
                summary["cases"][case.name] = check_case(
                    case, out, Path(tmp), args.reps, args.probe_reps, args.max_ctas, clock_variant=(i == 0)
                )
            except Exception as exc:  # one kernel's failure must not hide the others' evidence
                summary["cases"][case.name] = {
                    "passed": False,
                    "error": f"{type(exc).__name__}: {exc}",
                    "traceback": traceback.format_exc()[-3000:],
                }
                log.error("%s failed: %s", case.name, exc)
            log.info(
                "%s: %s", case.name, json.dumps(summary["cases"][case.name].get("checks", {}), default=str)
            )
    summary["passed"] = bool(cases) and all(c.get("passed") for c in summary["cases"].values())
    (out / "selfcheck.json").write_text(json.dumps(_clean(summary), indent=1, default=_json_default))
    print(
        json.dumps(
            {k: {"passed": v.get("passed"), "error": v.get("error")} for k, v in summary["cases"].items()}
        )
    )
    return 0 if summary["passed"] else 1


def _clean(o: Any) -> Any:
    """NaN -> None so the JSON is standard (pandas rows carry NaN for absent numbers)."""
    if isinstance(o, dict):
        return {str(k): _clean(v) for k, v in o.items()}
    if isinstance(o, (list, tuple)):
        return [_clean(v) for v in o]
    if isinstance(o, float) and math.isnan(o):
        return None
    return o


def _json_default(o: Any) -> Any:
    if isinstance(o, float) and math.isnan(o):
        return None
    try:
        return float(o)
    except (TypeError, ValueError):
        return str(o)


if __name__ == "__main__":
    sys.exit(main())
