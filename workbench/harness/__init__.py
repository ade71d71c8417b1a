"""The evaluation harness: the fitness function every other part of the workbench optimizes.

`Harness` keeps one pre-warmed server process (torch and triton imported) and evaluates each
candidate in a fresh forked child (see `server.py`, `job_pipeline.py`, `candidate_proc.py`, `reference_proc.py`,
`guards.py`). `evaluate()` is the one-shot convenience. This module runs in the client's process (the caller's).
"""
from __future__ import annotations

import logging
import threading
import time
from pathlib import Path
from typing import Any

from platforms.clock import lock_path
from workbench.env import cuda_visible
from workbench.harness import policy
from workbench.harness.environ import server_environ
from workbench.harness.trusted_messages import EvalRequest, JobResult
from workbench.jobs import EvalJob
from workbench.result import EvalResult, Status
from workbench.worker import WarmWorker, WorkerLost

log = logging.getLogger(__name__)

__all__ = ["Harness", "evaluate", "resolve_device"]


def resolve_device(device: str) -> str:
    if device not in ("auto", "cpu", "cuda"):
        raise ValueError(f"unknown device {device!r}: expected auto, cpu or cuda")
    if device == "auto":
        return "cuda" if cuda_visible() else "cpu"
    if device == "cuda" and not cuda_visible():
        raise ValueError("device 'cuda' asked for, but no NVIDIA GPU is visible on this machine")
    return device


class Harness:
    """A pre-warmed evaluation server; one evaluation at a time (use several for a pool)."""

    def __init__(self, device: str = "auto", startup_timeout_s: float = 180.0, one_shot: bool = False) -> None:
        """`one_shot`: one evaluation, then the server exits (`workbench eval`): one warm spare of each role,
        none made again after the job."""
        self.device = resolve_device(device)
        self.one_shot = one_shot
        env = server_environ()  # an allow-list: nothing else reaches the server, hence never a candidate
        if self.device == "cpu":
            env["TRITON_INTERPRET"] = "1"
            env["CUDA_VISIBLE_DEVICES"] = ""
        else:
            env.pop("TRITON_INTERPRET", None)
        if one_shot:
            env["WB_SPARES"] = "1"
        # the one clock per GPU that every timed window holds (platforms/clock.py), wherever TMPDIR points
        env.setdefault("WB_CLOCK_DIR", str(lock_path("cuda").parent))
        args = (self.device, "--one-shot") if one_shot else (self.device,)
        self._worker = WarmWorker("workbench.harness.server", args, env=env,
                                  startup_timeout_s=startup_timeout_s, name=f"harness server ({self.device})")
        self._platform: dict[str, Any] | None = None
        # On a GPU the platform's description imports torch and makes a CUDA context in this process
        # (seconds): described in a thread while the server starts and the job runs, not after it. On the
        # CPU it stays lazy (a caller that forks must not fork in the middle of a thread's import).
        self._platform_thread: threading.Thread | None = None
        if self.device == "cuda":
            self._platform_thread = threading.Thread(target=self._describe, name="harness-platform", daemon=True)
            self._platform_thread.start()

    # -- server lifecycle -------------------------------------------------------------------
    @property
    def started(self) -> bool:
        """Whether its server process is running (a rejection by the static policy starts none)."""
        return self._worker.running

    @property
    def startup_s(self) -> float | None:
        return self._worker.startup_s

    def start(self) -> None:
        """Start the server now (otherwise the first evaluation does), e.g. to pre-warm a worker."""
        self._worker.start()

    def close(self) -> None:
        self._worker.close()

    def __enter__(self) -> "Harness":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _describe(self) -> None:
        from platforms import describe_device

        try:
            self._platform = describe_device(self.device).to_dict() if self.device == "cuda" else \
                describe_device("cpu").to_dict()
        except Exception as exc:  # noqa: BLE001 - said in the result, never a crash of the caller
            self._platform = {"kind": self.device, "error": f"{type(exc).__name__}: {exc}"[:300]}

    def platform(self) -> dict[str, Any]:
        if self._platform_thread is not None:
            self._platform_thread.join()
        if self._platform is None and isinstance(self._worker.ready_info.get("platform"), dict):
            # on the CPU the server says it (torch is imported there): no torch in this process (1.4 s)
            self._platform = self._worker.ready_info["platform"]
        if self._platform is None:  # the thread could not run, or no server started
            self._describe()
        return self._platform or {}

    # -- evaluation ---------------------------------------------------------------------------
    def precheck(self, job: EvalJob) -> EvalResult | None:
        """The static policy, here in the caller's process before any server, process or GPU context
        starts: a rejection costs milliseconds. None when the candidate may run (the server checks again,
        with the spec loaded)."""
        t0 = time.perf_counter()
        problem = policy.source_problem(job.candidate_source)  # with the policy off too: the bytes Python runs
        if problem is not None:
            found = [f"malformed_source:{problem}"]
        elif not job.policy:
            return None
        else:
            allowed = policy.allowed_imports_of(str(job.spec_path))
            if allowed is None:  # ALLOWED_IMPORTS is not a literal: only the server, which loads the spec, knows
                return None
            found = policy.check_source(job.candidate_source, allowed)
            if not found:
                return None
        wall = time.perf_counter() - t0
        return EvalResult(status=Status.REJECTED, device=self.device, violations=found,
                          error="static policy: " + "; ".join(found[:6]),
                          timings_s={"policy": wall, "client_wall": wall, "harness_overhead": wall})

    def evaluate_job(self, job: EvalJob) -> EvalResult:
        """The candidate's result; never an exception for anything the candidate's text holds."""
        try:
            early = self.precheck(job)
        except Exception as exc:  # noqa: BLE001 - a text the checks cannot take is the candidate's failure
            log.exception("precheck failed")
            return EvalResult(status=Status.REJECTED, device=self.device, violations=["malformed_source"],
                              error=f"static policy: malformed_source: {type(exc).__name__}: {str(exc)[:200]}")
        if early is not None:
            return early
        payload = EvalRequest(spec_path=str(Path(job.spec_path).resolve()), candidate_source=job.candidate_source,
                              trials=job.trials, timeout_s=job.timeout_s, overrides=job.overrides, shapes=job.shapes,
                              policy=job.policy, timing=job.timing, last=self.one_shot).to_wire()
        t0 = time.perf_counter()
        try:
            line, startup = self._worker.request(payload, job.timeout_s * 2 + 900)
        except (WorkerLost, OSError, ValueError):
            return EvalResult(status=Status.INFRA_ERROR, error="the harness server died twice on this job",
                              device=self.device)
        wall = time.perf_counter() - t0 - startup
        try:
            res = self._to_result(JobResult.from_wire(line), wall)
            if startup > 0:  # the server's one-time start (imports, CUDA, spares): a one-shot eval's big part
                res.timings_s["server_startup"] = round(startup, 3)
                phases = self._worker.ready_info.get("phases_s")
                for k, v in (phases.items() if isinstance(phases, dict) else ()):
                    if isinstance(v, (int, float)):
                        res.timings_s[f"server_{k}"] = float(v)
            return res
        except (KeyError, TypeError, ValueError) as exc:  # never an exception in the caller
            log.error("harness result unreadable: %s: %s", type(exc).__name__, exc)
            return EvalResult(status=Status.INFRA_ERROR, device=self.device,
                              error=f"the harness server's result could not be read ({type(exc).__name__}: {exc})")

    def evaluate(self, spec: str | Path, candidate: str | Path, *, trials: int = 3, timeout_s: float = 300.0,
                 overrides: dict[str, Any] | None = None, shapes: list[str] | None = None,
                 policy: bool = True, timing: str | None = None) -> EvalResult:
        if timing not in (None, "device", "wall"):
            raise ValueError(f"timing {timing!r}: expected device or wall")
        return self.evaluate_job(EvalJob(spec_path=str(spec), candidate_source=_source_of(candidate),
                                         trials=trials, timeout_s=timeout_s, overrides=overrides or {},
                                         shapes=shapes, device=self.device, policy=policy, timing=timing))

    def _to_result(self, raw: JobResult, wall: float) -> EvalResult:
        status = Status(raw.status)
        t = dict(raw.timings_s)
        t["client_wall"] = wall  # excludes the server's one-time start-up
        own = sum(t.get(k, 0.0) for k in ("compile_and_first_call", "correctness", "timing", "baseline_timing"))
        t["harness_overhead"] = max(0.0, wall - own)
        res = EvalResult(status=status, device=self.device, platform=self.platform(),
                         error=raw.error, violations=list(raw.violations),
                         triton_launches=int(raw.launches or 0), aten_ops=list(raw.aten_ops or []),
                         stdout_tail=raw.stdout_tail[-2000:], timings_s=t,
                         max_abs_err=raw.max_abs_err, max_rel_err=raw.max_rel_err)
        res.isolation = raw.isolation or {}
        plan = raw.plan or {}
        res.shapes = list(plan.get("shapes", []))
        res.details["timed_shape"] = plan.get("timed")
        if raw.judged:  # where the judge read the outputs: outbox slots or files
            res.details["judged"] = raw.judged
        if raw.referee is not None:  # a mismatch: eager's and its errors against fp64
            res.details["referee"] = raw.referee
        if raw.outbox_device_error:  # why the GPU's outbox was the file
            res.details["outbox_device_error"] = raw.outbox_device_error
        if raw.inputs_staged:  # why the host made the inputs, not the GPU
            res.details["inputs_staged"] = raw.inputs_staged
        if raw.reran_alone:  # the first run's error: out of GPU memory beside other jobs
            res.details["reran_alone"] = raw.reran_alone
        res.trials = raw.trials or len(res.shapes)
        cand, base, basis = _basis(raw.timing, raw.baseline, raw.timing_basis, self.device == "cuda")
        res.timing_basis = basis
        if cand:
            res.wall_time_us = cand["wall"]["median_us"]
            res.device_time_us = (cand.get("device") or {}).get("median_us")
        if base:
            res.baseline_wall_time_us = base["wall"]["median_us"]
            res.baseline_device_time_us = (base.get("device") or {}).get("median_us")
        if cand:
            res.runtime_us, res.runtime_p20_us, res.runtime_p80_us = cand["median_us"], cand["p20_us"], cand["p80_us"]
            res.details["reps"] = cand.get("reps")
            res.details["rounds"] = cand.get("rounds")
            res.details["reps_per_round"] = cand.get("reps_per_round")
            res.details["own_null_round_us"] = cand.get("own_null_round_us")  # information, never in a time
            res.details["inputs"] = cand.get("inputs")
            res.details["device"] = (cand.get("device") or {}) and {
                k: cand["device"][k] for k in ("slots", "passes", "reps", "rounds", "kernels_per_call")
                if k in cand["device"]}
            for k in ("rounds_planned", "stage_total_mb", "staged_mb"):  # a staging budget that cut rounds shows
                if k in cand:
                    res.details[k] = cand[k]
        if base:
            res.baseline_runtime_us, res.baseline_p20_us, res.baseline_p80_us = (
                base["median_us"], base["p20_us"], base["p80_us"])
            # the baseline's round sizes beside the candidate's: each contender's rounds are sized by its own
            # wall time per call, and every repetition and slot is an input set the reference makes
            res.details["baseline_reps_per_round"] = base.get("reps_per_round")
            res.details["baseline_device_slots"] = (base.get("device") or {}).get("slots")
        if status == Status.PASSED:
            res.correct = True
            if cand and base and cand["median_us"] > 0:
                res.speedup = base["median_us"] / cand["median_us"]
                res.fitness = res.speedup
        elif status == Status.REJECTED and not res.error:
            res.error = "rule broken: " + ", ".join(res.violations)
        return res


def _basis(cand: dict[str, Any] | None, base: dict[str, Any] | None, want: str,
           device_platform: bool = False) -> tuple[dict[str, Any] | None, dict[str, Any] | None, str]:
    """The clock both contenders are compared on: device time when asked for (the default) and both have
    it, else wall time per call. Each returned summary keeps the other clock under `wall` / `device`."""
    def pick(stats: dict[str, Any] | None, device: bool) -> dict[str, Any] | None:
        if not stats:
            return stats
        chosen = stats["device"] if device else stats
        return {**stats, **{k: chosen[k] for k in ("median_us", "p20_us", "p80_us")}, "wall": stats}

    use_device = want == "device" and bool(cand and cand.get("device")) and bool(base and base.get("device"))
    if want == "device" and not use_device:
        if (cand or {}).get("device_unavailable"):
            why = str(cand["device_unavailable"])
        elif base and base.get("device"):
            why = "the candidate's forward could not be captured"
        elif (cand or {}).get("inputs") == "staged" and device_platform:
            # graph replay needs the inputs made on the device from seeds
            # (`reference_proc._Reference._device_generation`)
            why = "the spec's inputs are staged from the host"
        else:
            why = "no device time on this platform"
        basis = f"wall (device time unavailable: {why})"
    else:
        basis = "device" if use_device else "wall"
    return pick(cand, use_device), pick(base, use_device), basis


def _source_of(candidate: str | Path) -> str:
    """A path to a candidate file, or the candidate's source text itself."""
    if isinstance(candidate, Path) or ("\n" not in str(candidate) and str(candidate).endswith(".py")):
        p = Path(candidate)
        if not p.is_file():
            raise FileNotFoundError(f"candidate file not found: {p}")
        # bytes as the importer will see them: a latin-1 file never raises here, `policy.source_problem`
        # refuses it with one line
        return policy.decode_source(p.read_bytes())
    return str(candidate)


def evaluate(spec: str | Path, candidate: str | Path, *, device: str = "auto", trials: int = 3,
             timeout_s: float = 300.0, overrides: dict[str, Any] | None = None,
             shapes: list[str] | None = None) -> EvalResult:
    """Evaluate one candidate (a path or source text) against a spec in an isolated process."""
    with Harness(device=device) as h:
        return h.evaluate(spec, candidate, trials=trials, timeout_s=timeout_s, overrides=overrides, shapes=shapes)
