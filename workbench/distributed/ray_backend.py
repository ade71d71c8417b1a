"""`RayEvaluator`: the `Evaluator` interface over a Ray cluster (the `distributed` extra).

One actor per worker slot, each holding a pre-warmed `Harness`; one GPU per actor on GPU clusters,
one CPU otherwise. Nodes advertise their platform as a custom resource `platform:<label>` (e.g.
`ray start --resources='{"platform:cuda:sm_90": 8}'`; a local cluster started here advertises its
own device), a job with `EvalJob.platform` set runs on a worker of that platform. Scheduling,
re-queueing and watchdogs live in `dispatcher.py`; this module only talks to Ray.
"""

from __future__ import annotations

import logging
import os
import time
from concurrent.futures import Future
from typing import Any

import ray
from ray import exceptions as rex

from workbench.distributed.dispatcher import IDLE, Dispatcher, Post, Slot
from workbench.distributed.errors import (
    ClusterUnreachable,
    PlatformUnavailable,
    WorkersUnplaceable,
)
from workbench.distributed.preflight import (
    PLATFORM_PREFIX,
    SlotPlan,
    check_worker_platforms,
    check_worker_versions,
    is_standard_label,
    plan_slots,
    probe_address,
    resolve_address,
)
from workbench.distributed.worker import HarnessWorker
from workbench.jobs import EvalJob, Evaluator
from workbench.result import EvalResult

log = logging.getLogger(__name__)


def _driver_versions() -> dict[str, str]:
    import torch
    import triton

    return {"triton": triton.__version__, "torch": torch.__version__}


def start_local_cluster(attempts: int = 3, **init_kwargs: Any) -> None:
    """`ray.init` a local cluster, retrying its start-up race.

    The raylet waits ~15 s for its metrics agent and the driver 30 s for the raylet, neither
    configurable; on a loaded 2-core machine (measured here at load 9-11) the agent's imports miss that
    window and `ray.init` raises "The current node timed out during startup". A retry usually lands.
    """
    for i in range(1, attempts + 1):
        try:
            ray.init(**init_kwargs)
            return
        except Exception as exc:
            if "timed out during startup" not in str(exc) or i == attempts:
                raise
            log.warning("local Ray cluster start timed out (attempt %d/%d); retrying", i, attempts)
            ray.shutdown()


class _RayBackend:
    """Starts, runs and kills worker actors for the dispatcher; reports come back as events."""

    def __init__(self, device: str, driver: dict[str, str]) -> None:
        self._device = device
        self._driver = driver
        self._options: dict[str, dict[str, Any]] = {}
        self._pinned: dict[str, str | None] = {}
        self._cls = ray.remote(HarnessWorker)

    def create(self, plan: SlotPlan) -> Any:
        return self._cls.options(**self._opts(plan)).remote(self._device, plan.platform)

    def register(self, name: str, plan: SlotPlan) -> None:
        """Remember how slot `name` was placed, to place its replacements the same way."""
        self._options[name] = self._opts(plan)
        self._pinned[name] = plan.platform

    @staticmethod
    def _opts(plan: SlotPlan) -> dict[str, Any]:
        opts: dict[str, Any] = {"max_restarts": 0, "max_task_retries": 0}  # the dispatcher re-queues, not Ray
        if plan.gpu:
            # a GPU worker is bound by its GPU; asking a CPU too could strand GPUs on few-core nodes
            opts.update(num_gpus=1, num_cpus=0)
        else:
            opts.update(num_cpus=1)
        if plan.platform:
            opts["resources"] = {PLATFORM_PREFIX + plan.platform: 1}
        return opts

    def spawn(self, slot: Slot, post: Post) -> None:
        slot.handle = self._cls.options(**self._options[slot.name]).remote(
            self._device, self._pinned[slot.name]
        )
        gen, name, pinned = slot.generation, slot.name, self._pinned[slot.name]

        def on_started(f: "Future[Any]") -> None:
            try:
                info = f.result()
                check_worker_versions(self._driver, [info])
                _check_label(pinned, info)
            except Exception as exc:
                post(("spawn_failed", name, gen, f"{type(exc).__name__}: {exc}"))
                return
            post(("ready", name, gen, info))

        slot.handle.start.remote().future().add_done_callback(on_started)

    def launch(self, slot: Slot, job: EvalJob, post: Post) -> None:
        gen, name = slot.generation, slot.name

        def on_done(f: "Future[Any]") -> None:
            try:
                result, eval_s = f.result()
            except (
                rex.RayActorError,
                rex.WorkerCrashedError,
                rex.NodeDiedError,
                rex.ObjectLostError,
                rex.OwnerDiedError,
                rex.LocalRayletDiedError,
                rex.ActorUnavailableError,
            ) as exc:
                post(("lost", name, gen, f"{type(exc).__name__}: {_first_line(exc)}"))
                return
            except (
                Exception
            ) as exc:  # the actor method raised outside the harness: treat the worker as broken
                post(("lost", name, gen, f"worker raised {type(exc).__name__}: {_first_line(exc)}"))
                return
            post(("done", name, gen, (result, eval_s)))

        slot.handle.evaluate.remote(job).future().add_done_callback(on_done)

    def kill(self, slot: Slot) -> None:
        if slot.handle is not None:
            ray.kill(slot.handle, no_restart=True)


def _first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [""])[0][:300]


def _check_label(pinned: str | None, info: dict[str, Any]) -> None:
    """A node advertising a standard label (cuda:sm_90) must have that device; custom names are trusted."""
    if pinned and is_standard_label(pinned) and info["detected_label"] != pinned:
        raise PlatformUnavailable(
            f"node {info.get('host')} advertises platform {pinned!r} but its worker detected "
            f"{info['detected_label']!r}: fix the node's `platform:` resource"
        )


class RayEvaluator(Evaluator):
    """Evaluate candidates on a Ray cluster; same `EvalResult` records as the local pool.

    Args:
        workers: worker slots in total (one evaluation each); capped by the cluster's GPUs/CPUs/platforms.
        device: auto | cpu | cuda, as for the harness.
        address: Ray address (`host:port`, `ray://host:port`, `auto`); default RAY_ADDRESS; none starts a
            local cluster (or reuses the one this process already initialized).
        platforms: platform labels the search targets; each must have a worker (checked here, before any
            search starts). None: whatever the cluster has.
        max_retries: re-dispatches of a job whose worker died, before it ends as INFRA_ERROR.
        max_worker_restarts: replacements per worker slot before the slot is retired.
    """

    def __init__(
        self,
        workers: int = 1,
        device: str = "auto",
        *,
        address: str | None = None,
        platforms: list[str] | None = None,
        max_retries: int = 2,
        max_worker_restarts: int = 3,
        start_timeout_s: float = 300.0,
        hang_grace_s: float = 120.0,
        probe_timeout_s: float = 3.0,
        ray_init_kwargs: dict[str, Any] | None = None,
    ) -> None:
        t0 = time.perf_counter()
        self._device = device
        self._owns_ray = False
        self._driver = _driver_versions()
        self._connect(address, workers, device, probe_timeout_s, ray_init_kwargs or {})
        self.connect_s = time.perf_counter() - t0
        backend = _RayBackend(device, self._driver)
        plans = plan_slots(workers, device, ray.cluster_resources(), platforms)
        if len(plans) < workers:
            log.warning("the cluster fits %d of the %d workers asked for", len(plans), workers)
        slots = self._start_workers(backend, plans, platforms, start_timeout_s)
        self.start_s = time.perf_counter() - t0 - self.connect_s
        self._dispatcher = Dispatcher(
            backend,
            slots,
            max_retries=max_retries,
            max_worker_restarts=max_worker_restarts,
            start_timeout_s=start_timeout_s,
            hang_grace_s=hang_grace_s,
        )
        log.info(
            "ray evaluator: %d workers %s (connect %.1f s, workers %.1f s)",
            len(slots),
            self._dispatcher.platforms(),
            self.connect_s,
            self.start_s,
        )

    # -- setup --------------------------------------------------------------------------------
    def _connect(
        self,
        address: str | None,
        workers: int,
        device: str,
        probe_timeout_s: float,
        init_kwargs: dict[str, Any],
    ) -> None:
        addr = resolve_address(address)
        if addr:
            probe_address(addr, probe_timeout_s)  # even when connected: a wrong address is a user error
        if ray.is_initialized():
            log.info("reusing this process's Ray connection")
            return
        if addr:
            try:
                ray.init(address=addr, log_to_driver=False, **init_kwargs)
            except (ConnectionError, RuntimeError) as exc:
                raise ClusterUnreachable(f"could not join the Ray cluster at {addr!r}: {exc}") from exc
            return
        from platforms import describe_device

        plat = describe_device(device)
        n = 1
        if plat.kind != "cpu":
            import torch

            n = torch.cuda.device_count()
        else:
            n = max(workers, os.cpu_count() or 1)
        kw: dict[str, Any] = {
            "include_dashboard": False,
            "log_to_driver": False,
            "resources": {PLATFORM_PREFIX + plat.label: n},
        }
        if plat.kind == "cpu":
            kw["num_cpus"] = n  # one CPU slot per worker even on a 2-core machine: the harness paces itself
        kw.update(init_kwargs)
        start_local_cluster(**kw)
        self._owns_ray = True
        log.info("started a local Ray cluster: %s", ray.cluster_resources())

    def _start_workers(
        self, backend: _RayBackend, plans: list[SlotPlan], platforms: list[str] | None, timeout_s: float
    ) -> list[Slot]:
        actors = [backend.create(p) for p in plans]
        try:
            try:
                infos = ray.get([a.info.remote() for a in actors], timeout=timeout_s)
            except rex.GetTimeoutError as exc:
                raise WorkersUnplaceable(
                    f"{len(actors)} workers did not start within {timeout_s:g} s: the cluster lacks the "
                    f"resources they ask for (cluster: {ray.cluster_resources()}, "
                    f"free: {ray.available_resources()})"
                ) from exc
            check_worker_versions(self._driver, infos)
            for p, info in zip(plans, infos, strict=True):
                _check_label(p.platform, info)
                if info["torch"] != self._driver["torch"]:
                    log.warning(
                        "worker on %s runs torch %s, driver torch %s",
                        info["host"],
                        info["torch"],
                        self._driver["torch"],
                    )
            found: dict[str, int] = {}
            for info in infos:
                found[info["label"]] = found.get(info["label"], 0) + 1
            check_worker_platforms(platforms, found)
            warm = ray.get([a.warm.remote() for a in actors], timeout=timeout_s)
            for info, w in zip(infos, warm, strict=True):
                info["warm_s"] = w
        except BaseException:
            for a in actors:
                ray.kill(a, no_restart=True)
            if self._owns_ray:
                ray.shutdown()
            raise
        slots = []
        per: dict[str, int] = {}
        for p, a, info in zip(plans, actors, infos, strict=True):
            label = info["label"]
            name = f"{label}#{per.get(label, 0)}"
            per[label] = per.get(label, 0) + 1
            backend.register(name, p)
            slots.append(Slot(name=name, platform=label, state=IDLE, info=info, handle=a))
        return slots

    # -- Evaluator API -----------------------------------------------------------------------
    def submit(self, job: EvalJob) -> "Future[EvalResult]":
        if job.platform is not None and job.platform not in self._dispatcher.platforms():
            raise PlatformUnavailable(
                f"no live worker of platform {job.platform!r}; workers: {self._dispatcher.platforms()}"
            )
        return self._dispatcher.submit(job)

    @property
    def capacity(self) -> int:
        return sum(self._dispatcher.platforms().values())

    def in_flight(self) -> dict[str, int]:
        """Busy workers, keyed `<platform>#<i>` (the prefix is the platform label)."""
        return self._dispatcher.in_flight()

    def in_flight_by_platform(self) -> dict[str, int]:
        return self._dispatcher.in_flight_by_platform()

    def platforms(self) -> dict[str, int]:
        """Live workers per platform label: what a multi-platform search can target."""
        return self._dispatcher.platforms()

    def workers(self) -> list[dict[str, Any]]:
        """Per-worker state, host, pid, platform, restarts, evaluations (for progress displays and tests)."""
        return self._dispatcher.slots()

    @property
    def stats(self) -> dict[str, int]:
        return dict(self._dispatcher.stats)

    def close(self) -> None:
        d = getattr(self, "_dispatcher", None)
        if d is not None:
            d.close()
        if self._owns_ray and ray.is_initialized():
            ray.shutdown()
            self._owns_ray = False
