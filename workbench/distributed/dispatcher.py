"""Scheduling core of the distributed evaluator, independent of Ray.

One thread owns all scheduling state and reacts to events (a job submitted, a worker ready, a
result back, a worker lost) and to a periodic tick (watchdogs). A `WorkerBackend` starts workers
and runs jobs on them asynchronously and reports back through `post`; `workbench.distributed.ray_backend`
is the Ray implementation, the unit tests use an in-process fake.

Guarantees, whatever the workers do:
- every submitted job's Future receives exactly one `EvalResult` (a lost worker's job is re-queued
  up to `max_retries` times, then ends as `Status.INFRA_ERROR`, never as a kernel failure);
- a stale report (from a worker already declared lost) is ignored, so nothing is counted twice;
- nothing waits forever: a worker that does not start within `start_timeout_s`, or an evaluation
  running `hang_grace_s` past its own timeout, is killed and treated as lost; a job whose platform has
  no live worker left ends as `INFRA_ERROR` at once.
"""

from __future__ import annotations

import collections
import logging
import queue
import threading
import time
from concurrent.futures import Future, InvalidStateError
from dataclasses import dataclass, field
from typing import Any, Callable, Protocol

from workbench.jobs import EvalJob
from workbench.result import EvalResult, Status

log = logging.getLogger(__name__)

STARTING, IDLE, BUSY, DEAD = "starting", "idle", "busy", "dead"


@dataclass
class Ticket:
    """A submitted job and its bookkeeping across attempts."""

    job: EvalJob
    future: "Future[EvalResult]"
    submitted_at: float
    seq: int = 0  # arrival order: FIFO across the per-platform queues
    attempts: int = 0  # dispatches so far
    dispatched_at: float | None = None  # of the current attempt
    first_dispatched_at: float | None = None
    losses: list[str] = field(default_factory=list)


@dataclass
class Slot:
    """One worker slot: one evaluation at a time on one worker (a GPU, or a CPU slot)."""

    name: str
    platform: str
    state: str = STARTING
    generation: int = 0  # bumped on every (re)spawn; reports carry it
    ticket: Ticket | None = None
    since: float = field(default_factory=time.monotonic)
    restarts: int = 0
    info: dict[str, Any] = field(default_factory=dict)
    handle: Any = None  # backend-owned (a Ray actor handle)
    evaluations: int = 0


# Events posted to the dispatcher thread: (kind, slot name, generation, payload).
Event = tuple[str, str, int, Any]
Post = Callable[[Event], None]


class WorkerBackend(Protocol):
    def spawn(self, slot: Slot, post: Post) -> None:
        """Start (or restart) the slot's worker; post ("ready", name, gen, info) or ("spawn_failed", ...)."""

    def launch(self, slot: Slot, job: EvalJob, post: Post) -> None:
        """Run `job` on the slot's worker; post ("done", name, gen, (EvalResult, eval_s)) or ("lost", ...)."""

    def kill(self, slot: Slot) -> None:
        """Stop the slot's worker now (best effort, must not block long)."""


class Dispatcher:
    """Queues jobs, places them on idle slots of the right platform, re-queues on worker loss."""

    def __init__(
        self,
        backend: WorkerBackend,
        slots: list[Slot],
        *,
        max_retries: int = 2,
        max_worker_restarts: int = 3,
        start_timeout_s: float = 300.0,
        hang_grace_s: float = 120.0,
        tick_s: float = 0.5,
    ) -> None:
        if not slots:
            raise ValueError("a dispatcher needs at least one worker slot")
        self._backend = backend
        self._slots = {s.name: s for s in slots}
        # Per-event work is O(1): pending jobs and idle slots are kept per platform label (None: any),
        # and the watchdogs scan the slots once per tick, not per event (measured: scanning every
        # slot and every pending job per event capped the driver at ~20 jobs/s with 512 slots).
        self._pending: dict[str | None, collections.deque[Ticket]] = collections.defaultdict(
            collections.deque
        )
        self._idle: dict[str, collections.deque[Slot]] = collections.defaultdict(collections.deque)
        self._live: collections.Counter[str] = collections.Counter(
            s.platform for s in slots if s.state != DEAD
        )
        self._seq = 0
        self._next_watch = 0.0
        self._events: "queue.Queue[Event | None]" = queue.Queue()
        self._lock = threading.Lock()  # guards what other threads read: slot states, counters
        self.max_retries = max_retries
        self.max_worker_restarts = max_worker_restarts
        self.start_timeout_s = start_timeout_s
        self.hang_grace_s = hang_grace_s
        self._tick_s = tick_s
        self._closed = False
        self.stats: collections.Counter[str] = collections.Counter()
        for s in slots:
            if s.state == STARTING:
                s.since = time.monotonic()
                self._backend.spawn(s, self._post)
            elif s.state == IDLE:
                self._idle[s.platform].append(s)
        self._thread = threading.Thread(target=self._run, daemon=True, name="ray-dispatch")
        self._thread.start()

    # -- API used by the evaluator (any thread) ---------------------------------------------------
    def submit(self, job: EvalJob) -> "Future[EvalResult]":
        fut: Future[EvalResult] = Future()
        with self._lock:
            if self._closed:
                raise RuntimeError("the evaluator is closed")
            self.stats["submitted"] += 1
        self._events.put(("submit", "", 0, Ticket(job=job, future=fut, submitted_at=time.monotonic())))
        return fut

    def platforms(self) -> dict[str, int]:
        """Live (starting, idle or busy) slots per platform label."""
        with self._lock:
            out: dict[str, int] = {}
            for s in self._slots.values():
                if s.state != DEAD:
                    out[s.platform] = out.get(s.platform, 0) + 1
            return out

    def in_flight(self) -> dict[str, int]:
        with self._lock:
            return {s.name: 1 for s in self._slots.values() if s.state == BUSY}

    def in_flight_by_platform(self) -> dict[str, int]:
        with self._lock:
            out: dict[str, int] = {}
            for s in self._slots.values():
                if s.state == BUSY:
                    out[s.platform] = out.get(s.platform, 0) + 1
            return out

    def queued(self) -> int:
        """Jobs submitted and not yet running or finished."""
        with self._lock:
            busy = sum(1 for s in self._slots.values() if s.state == BUSY)
            return self.stats["submitted"] - self.stats["finished"] - busy

    def slots(self) -> list[dict[str, Any]]:
        with self._lock:
            return [
                {
                    "name": s.name,
                    "platform": s.platform,
                    "state": s.state,
                    "restarts": s.restarts,
                    "evaluations": s.evaluations,
                    "info": dict(s.info),
                }
                for s in self._slots.values()
            ]

    def close(self, timeout_s: float = 10.0) -> None:
        """Stop: unfinished jobs end as INFRA_ERROR ("evaluator closed"), workers are killed."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
        self._events.put(None)
        self._thread.join(timeout_s)

    # -- the dispatcher thread ------------------------------------------------------------------
    def _post(self, event: Event) -> None:
        self._events.put(event)

    def _run(self) -> None:
        while True:
            try:
                ev = self._events.get(timeout=self._tick_s)
            except queue.Empty:
                ev = ("tick", "", 0, None)
            if ev is None:
                break
            try:
                self._handle(ev)
                now = time.monotonic()
                if now >= self._next_watch:
                    self._next_watch = now + self._tick_s
                    self._watchdogs()
                self._schedule()
            except Exception:  # a bug here must not silently stop every future from resolving
                log.exception("dispatcher failed on event %s", ev[0])
        self._shutdown()

    def _handle(self, ev: Event) -> None:
        kind, name, gen, payload = ev
        if kind == "submit":
            self._seq += 1
            payload.seq = self._seq
            want = payload.job.platform
            if (want is None and not self._live) or (want is not None and self._live[want] <= 0):
                self._finish(payload, _infra(self._no_worker(want), payload), None, None)
            else:
                self._pending[want].append(payload)
            return
        if kind == "tick":
            return
        slot = self._slots.get(name)
        if slot is None or gen != slot.generation:
            self.stats["stale_reports"] += 1  # from a worker already replaced: ignore, never count twice
            log.debug(
                "stale %s report from %s (generation %d, now %d)",
                kind,
                name,
                gen,
                slot.generation if slot else -1,
            )
            return
        if kind == "ready" and slot.state == STARTING:
            with self._lock:
                slot.state, slot.since = IDLE, time.monotonic()
                slot.info = dict(payload or {})
            self._idle[slot.platform].append(slot)
            log.info("worker %s ready on %s (pid %s)", name, slot.info.get("host"), slot.info.get("pid"))
        elif kind == "spawn_failed" and slot.state == STARTING:
            self._worker_lost(slot, f"worker failed to start: {payload}")
        elif kind == "done" and slot.state == BUSY:
            result, eval_s = payload
            ticket = slot.ticket
            with self._lock:
                slot.state, slot.ticket, slot.since = IDLE, None, time.monotonic()
                slot.evaluations += 1
            self._idle[slot.platform].append(slot)
            assert ticket is not None
            self._finish(ticket, result, slot, eval_s)
        elif kind == "lost":
            self._worker_lost(slot, str(payload))

    def _schedule(self) -> None:
        for platform, idle in self._idle.items():
            mine, anyq = self._pending.get(platform), self._pending.get(None)
            while idle and (mine or anyq):
                slot = idle.popleft()
                if slot.state != IDLE:  # lost meanwhile: its entry here is stale
                    continue
                # the older of "wants this platform" and "wants any platform" goes first
                q = mine if mine and (not anyq or mine[0].seq < anyq[0].seq) else anyq
                assert q is not None
                t = q.popleft()
                if t.future.cancelled():
                    with self._lock:
                        self.stats["cancelled"] += 1
                        self.stats["finished"] += 1
                    idle.appendleft(slot)
                    continue
                self._launch(slot, t)

    def _launch(self, slot: Slot, t: Ticket) -> None:
        now = time.monotonic()
        t.attempts += 1
        t.dispatched_at = now
        t.first_dispatched_at = t.first_dispatched_at or now
        with self._lock:
            slot.state, slot.ticket, slot.since = BUSY, t, now
        self._backend.launch(slot, t.job, self._post)

    def _no_worker(self, want: str | None) -> str:
        what = f"platform {want!r}" if want else "any platform"
        live = sorted(p for p, n in self._live.items() if n > 0)
        return f"no live worker for {what} (workers lost; live platforms: {live or 'none'})"

    def _fail_unservable(self) -> None:
        """Jobs whose platform has no live worker left end now, as INFRA_ERROR: nothing waits forever."""
        for want in list(self._pending):
            if (want is None and self._live) or (want is not None and self._live[want] > 0):
                continue
            q = self._pending.pop(want)
            while q:
                t = q.popleft()
                self._finish(t, _infra(self._no_worker(want), t), None, None)

    def _watchdogs(self) -> None:
        now = time.monotonic()
        for s in list(self._slots.values()):
            if s.state == STARTING and now - s.since > self.start_timeout_s:
                self._worker_lost(s, f"worker did not start within {self.start_timeout_s:g} s")
            elif (
                s.state == BUSY
                and s.ticket is not None
                and now - s.since > s.ticket.job.timeout_s + self.hang_grace_s
            ):
                self._worker_lost(
                    s,
                    f"no answer {s.ticket.job.timeout_s + self.hang_grace_s:g} s after dispatch "
                    "(the evaluation's own timeout plus grace): worker presumed hung",
                )

    def _worker_lost(self, slot: Slot, reason: str) -> None:
        log.warning("worker %s lost: %s", slot.name, reason)
        self.stats["worker_losses"] += 1
        try:
            self._backend.kill(slot)
        except Exception:  # already gone: nothing to stop
            log.debug("kill of %s failed", slot.name, exc_info=True)
        ticket = slot.ticket
        with self._lock:
            slot.ticket = None
            slot.generation += 1  # any late report from the old worker is now stale
            if slot.restarts < self.max_worker_restarts and not self._closed:
                slot.restarts += 1
                slot.state, slot.since = STARTING, time.monotonic()
            else:
                slot.state = DEAD
                self._live[slot.platform] -= 1
                if self._live[slot.platform] <= 0:
                    del self._live[slot.platform]
        if slot.state == STARTING:
            self._backend.spawn(slot, self._post)
        else:
            log.error("worker slot %s is out of restarts (%d): retired", slot.name, slot.restarts)
        if ticket is not None:
            ticket.losses.append(f"{slot.name}: {reason}")
            if ticket.attempts > self.max_retries:
                self._finish(
                    ticket, _infra(f"worker lost {ticket.attempts} times; giving up", ticket), None, None
                )
            else:
                self.stats["requeued"] += 1
                self._pending[ticket.job.platform].appendleft(ticket)  # older than anything queued: first
        if slot.state == DEAD:
            self._fail_unservable()

    def _finish(self, t: Ticket, result: EvalResult, slot: Slot | None, eval_s: float | None) -> None:
        now = time.monotonic()
        dispatch: dict[str, Any] = {
            "attempts": t.attempts,
            "queue_s": (t.first_dispatched_at or now) - t.submitted_at,
            "total_s": now - t.submitted_at,
        }
        if t.losses:
            dispatch["losses"] = list(t.losses)
        if slot is not None:
            dispatch.update(
                worker=slot.name,
                platform=slot.platform,
                host=slot.info.get("host"),
                node_id=slot.info.get("node_id"),
                pid=slot.info.get("pid"),
            )
        if eval_s is not None and t.dispatched_at is not None:
            dispatch["eval_s"] = eval_s
            dispatch["roundtrip_s"] = now - t.dispatched_at
            dispatch["overhead_s"] = max(0.0, dispatch["roundtrip_s"] - eval_s)
        result.details["dispatch"] = dispatch
        with self._lock:
            self.stats["finished"] += 1
            if result.status == Status.INFRA_ERROR and slot is None:
                self.stats["infra_errors"] += 1
        try:
            t.future.set_result(result)
        except InvalidStateError:  # the caller cancelled it meanwhile: nobody waits for this result
            self.stats["cancelled"] += 1

    def _shutdown(self) -> None:
        for q in self._pending.values():
            for t in q:
                self._finish(t, _infra("the evaluator was closed before this job ran", t), None, None)
        self._pending.clear()
        for s in self._slots.values():
            if s.ticket is not None:
                self._finish(
                    s.ticket, _infra("the evaluator was closed during this evaluation", s.ticket), None, None
                )
                s.ticket = None
            if s.state != DEAD:
                try:
                    self._backend.kill(s)
                except Exception:
                    log.debug("kill of %s at close failed", s.name, exc_info=True)
                s.state = DEAD
        # Reports still in the queue are stale now; drop them.
        while True:
            try:
                self._events.get_nowait()
            except queue.Empty:
                break


def _infra(reason: str, t: Ticket) -> EvalResult:
    why = reason if not t.losses else reason + "\n" + "\n".join(t.losses[-5:])
    return EvalResult(status=Status.INFRA_ERROR, error=why, device=t.job.device)
