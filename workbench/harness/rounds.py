"""Timing by the trusted server's clock: rounds of back-to-back repetitions, each on fresh inputs.

One round, for the candidate and the reference alike:

1. the server has fresh input sets staged for the round (a different seed per repetition, never shown
   to the child before this round), and sends `stage`; the child loads them (on the GPU: copies them to
   the device) and answers `staged`, then blocks reading its command pipe;
2. the server reads its clock and sends `go`; the child runs the R repetitions back to back (one set
   each), synchronizes the device and answers `done`; the server reads its clock again. For the
   candidate, the server then checks from /proc that the child is already blocked reading its next
   command: a `done` sent before the work ended is a forgery (`reported_done_early`);
3. the server picks, after `done`, which repetitions' outputs are judged, and the child saves those.

Two sizing rounds (the first with one repetition, the second with the R it suggests) size R so that a
round lasts `target_s`, within the memory bound of the staged sets (the second is skipped when the first
already asks for the bound: a warm estimate can only ask for more); then the timed rounds, as many as fit
in the evaluation's total staging budget (`RoundPlan.timed_rounds`, never fewer than 3); the runtime is
the median over the timed rounds of (round time - null round) / R. The null round is the protocol's own cost (two pipe
wake-ups and a device synchronize with zero repetitions), measured in the trusted reference process
and subtracted for both contenders, so a candidate cannot inflate it. The op recorder (a dispatch
mode, whose per-op cost would bias the time) runs in the first sizing round and in one timed round
drawn at random, whose time is left out of the median; the candidate is not told which.
There is no L2 flush inside a round (under a trusted clock it would dominate small kernels): each
repetition reads its own staged buffers, so inputs larger than L2 run cold and small ones warm, for
both contenders alike.
"""
from __future__ import annotations

import math
import random
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from workbench.harness import bound
from workbench.harness.channel import Channel, ChildGone, Link, ProtocolError, channel_recv, channel_send
from workbench.harness.graph_audit import kernel_names as _kernel_names
from workbench.harness.timing import quantile

JUDGED_PER_ROUND = 2


class JudgeBudget:
    """How many timed outputs the judge may read in all (each is a file the size of an output): rounds are
    judged at random, with the chance that spends the budget evenly, so no round is known unjudged."""

    def __init__(self, total: int | None, rounds: int) -> None:
        self.left = total
        self.rounds_left = max(1, rounds)
        self.first = True

    def take(self, n: int, rng: random.Random) -> int:
        if self.left is None:
            return n
        # the first round always gives one (the judge needs at least one timed output), the rest by chance
        p = 1.0 if self.first else min(1.0, self.left / self.rounds_left)
        self.first = False
        self.rounds_left = max(1, self.rounds_left - 1)
        k = min(n, self.left) if rng.random() < p else 0
        self.left -= k
        return k


MIN_TIMED_ROUNDS = 3  # the floor a total staging budget may lower the timed rounds to


@dataclass
class RoundPlan:
    rounds: int          # timed rounds after the sizing round (at most: see `timed_rounds`)
    target_s: float      # wall time one round should last
    r_max: int           # repetitions one round may stage (memory bound)
    set_bytes: int = 0   # bytes of one input set
    total_bytes: int | None = None  # all the sets one evaluation may stage (None: no bound)

    @classmethod
    def for_device(cls, device: str, set_bytes: int, stage_budget_bytes: int,
                   total_budget_bytes: int | None = None) -> RoundPlan:
        """`stage_budget_bytes` bounds one round (R sets), `total_budget_bytes` all the rounds' sets."""
        r_max = max(1, min(1000, stage_budget_bytes // max(1, set_bytes)))
        if device == "cuda":
            return cls(rounds=6, target_s=0.02, r_max=r_max, set_bytes=set_bytes, total_bytes=total_budget_bytes)
        return cls(rounds=3, target_s=0.05, r_max=min(r_max, 20), set_bytes=set_bytes,
                   total_bytes=total_budget_bytes)

    def timed_rounds(self, r: int, staged_bytes: int) -> int:
        """Timed rounds once sizing chose R and staged `staged_bytes`: as many as fit in the total budget
        with the recorded round, between `MIN_TIMED_ROUNDS` and `rounds`. Same rule for both contenders."""
        if not self.total_bytes or self.set_bytes <= 0:
            return self.rounds
        fit = (self.total_bytes - staged_bytes) // (r * self.set_bytes) - 1
        return int(max(MIN_TIMED_ROUNDS, min(self.rounds, fit)))


def summarize(per_rep_s: list[float], reps: int) -> dict[str, float]:
    us = [t * 1e6 for t in per_rep_s]
    return {"median_us": statistics.median(us), "p20_us": quantile(us, 0.2), "p80_us": quantile(us, 0.8),
            "reps": reps, "rounds": len(us)}


SIZING_ROUNDS = 2


def _recv(link: Link, deadline: float, expect: str) -> dict[str, Any]:
    """The child's next round message; its `failure` (the reference) or `finished` report (a candidate
    that failed mid-round and says why) ends the rounds."""
    msg = link.recv(deadline, expect=expect)
    if "failure" in msg or msg.get("kind") == "finished":
        raise _Failure(msg)
    return msg


def null_round(link: Link, deadline: float, n: int = 5) -> float:
    """The protocol's own cost, in seconds: the fastest of `n` rounds of zero repetitions."""
    best = float("inf")
    for _ in range(n):
        link.send({"stage": -1, "file": None, "seeds": []})
        _recv(link, deadline, "staged")
        t0 = time.perf_counter()
        link.send({"go": -1, "record": False})
        _recv(link, deadline, "done")
        best = min(best, time.perf_counter() - t0)
        link.send({"save": -1, "which": []})
        _recv(link, deadline, "saved")
    return best


def drive(link: Link, plan: RoundPlan, deadline: float, stage: Callable[[int, int], dict[str, Any]],
          null_s: float = 0.0, idle_check: Callable[[], bool | None] | None = None, judge: bool = True,
          record: bool = True, rng: random.Random | None = None,
          ahead: Callable[[int, int], Callable[[], None]] | None = None,
          device_stage: Callable[[int, int], dict[str, Any]] | None = None, device_slots_n: int = 0,
          judge_total: int | None = None, samples: Callable[[int, list[int]], list[int]] | None = None,
          audit: Callable[[list[str] | None], list[str] | None] | None = None,
          ) -> tuple[dict[str, Any], list[tuple[int, int]], list[str]]:
    """Run the sizing rounds and `plan.rounds` timed rounds against `link`.

    `stage(k, R)` returns the `stage` message for round k (it stages R fresh sets first); `null_s` is
    subtracted from every round. `ahead(k, R)`, when given, starts staging round k while the child loads
    round k-1 and returns a wait: it is waited for before `go`, so the staging never overlaps a timed
    window. Returns the timing summary (with the wall time of each phase), the (round, repetition) pairs
    whose outputs the child saved, and protocol violations seen (`reported_done_early`).
    With `device_stage` (inputs made on the device from seeds), `drive_device` follows the wall-clock
    rounds: the summary's `device` holds the device time per call (None: the forward could not be
    captured). `samples(k, which)`, when given, are the seeds of the positions a sampled output is judged
    at (`outbox`), sent with the `save` order: after `done`.
    """
    rng = rng or random.SystemRandom()
    budget = JudgeBudget(judge_total, SIZING_ROUNDS + plan.rounds + 1 + (DEVICE_ROUNDS if device_stage else 0))
    recorded = {0} if record else set()
    per_rep: list[float] = []
    saved: list[tuple[int, int]] = []
    violations: list[str] = []
    phases = {"stage_s": 0.0, "load_s": 0.0, "timed_window_s": 0.0, "save_s": 0.0}
    reps_total = 0
    r = 1
    skip_second_sizing = False
    staged = 0
    timed_rounds = plan.rounds
    n_rounds = SIZING_ROUNDS + timed_rounds + (1 if record else 0)
    k = -1
    while k + 1 < n_rounds:
        k += 1
        if k == 1 and skip_second_sizing:
            continue
        if k == SIZING_ROUNDS:  # R is known: fit the timed rounds in the total staging budget
            timed_rounds = plan.timed_rounds(r, staged)
            n_rounds = SIZING_ROUNDS + timed_rounds + (1 if record else 0)
            if record:  # drawn now, among the rounds that will run; the child learns it only at `go`
                recorded.add(SIZING_ROUNDS + rng.randrange(timed_rounds + 1))
        staged += r * plan.set_bytes
        ts = time.perf_counter()
        link.send(stage(k, r))
        tl = time.perf_counter()
        pending = ahead(k + 1, r) if ahead is not None and k >= SIZING_ROUNDS and k + 1 < n_rounds else None
        _recv(link, deadline, "staged")
        if pending is not None:
            pending()  # the next round is staged before the clock starts
        t0 = time.perf_counter()
        link.send({"go": k, "record": k in recorded})
        msg = _recv(link, deadline, "done")
        t1 = time.perf_counter()
        if msg["done"] != k:
            raise ProtocolError(f"done for round {msg['done']} during round {k}")
        if idle_check is not None and idle_check() is False and "reported_done_early" not in violations:
            violations.append("reported_done_early")
        dt = max(t1 - t0 - null_s, 1e-9) / r
        if k < SIZING_ROUNDS:
            want = math.ceil(plan.target_s / dt)
            r = int(min(plan.r_max, max(1, want)))
            # Round 0 already fills the memory bound: a second estimate (faster, warm) cannot lower R.
            skip_second_sizing = k == 0 and want >= plan.r_max
        elif k not in recorded:
            per_rep.append(dt)
            reps_total += r
        n = r if k >= SIZING_ROUNDS else 1
        which = sorted(rng.sample(range(n), budget.take(min(JUDGED_PER_ROUND, n), rng))) if judge else []
        tv = time.perf_counter()
        link.send(_save_order(k, which, samples))
        done = _recv(link, deadline, "saved")
        if done["saved"] != k:
            raise ProtocolError(f"saved for round {done['saved']} during round {k}")
        saved.extend((k, i) for i in which)
        t_end = time.perf_counter()
        phases["stage_s"] += tl - ts
        phases["load_s"] += t0 - tl
        phases["timed_window_s"] += t1 - t0
        phases["save_s"] += t_end - tv
    summary_extra: dict[str, Any] = {}
    if device_stage is not None and device_slots_n > 0 and per_rep:
        dev, dev_saved, dev_viol = drive_device(
            link, deadline, device_stage, device_slots_n, statistics.median(per_rep), null_s, plan.target_s,
            judge=judge, rng=rng, budget=budget, samples=samples, set_bytes=plan.set_bytes,
            idle_check=idle_check, audit=audit)
        if dev is not None and dev.get("unaudited"):
            summary_extra["device"] = None
            summary_extra["device_unavailable"] = "the captured graph could not be audited"
        else:
            summary_extra["device"] = dev
        saved.extend(dev_saved)
        violations.extend(v for v in dev_viol if v not in violations)
    if idle_check is not None:  # information only: the child's own protocol cost (never used in a time)
        summary_extra["own_null_round_us"] = null_round(link, deadline, n=3) * 1e6
    link.send({"end": True})
    summary_extra["staged_mb"] = staged / 2**20
    if timed_rounds < plan.rounds:  # lowered by the total staging budget: the reader sees it
        summary_extra["rounds_planned"] = plan.rounds
        summary_extra["stage_total_mb"] = (plan.total_bytes or 0) / 2**20
    return ({**summarize(per_rep, reps_total), **summary_extra, "reps_per_round": r, "phases_s": phases},
            saved, violations)


DEVICE_ROUND_BASE = 1000  # device rounds are numbered from here: their seeds and files never meet the others'
DEVICE_ROUNDS = 5
L2_BYTES = 50 * 2**20     # the H200's L2: enough slots that a round's inputs do not stay in it


MAX_DEVICE_SLOTS = 1024
# The most slots the L2 rule alone may ask for. Sets under 2 * L2 / 64 (1.6 MB) would otherwise ask for
# thousands (an ATen spec's 20 KB of samples: 5,000, capped at 1,024), and a round's host work grows with
# them: fresh sets staged and copied, a captured graph of slots x launches nodes to instantiate and audit.
# On the H100 that was ~30 s per contender for a 30-launch forward (2026-12-06). 64 slots still stage
# more than L2 for every set over 1.6 MB; smaller ones run partly warm, for both contenders alike (as the
# wall-clock rounds' do).
MAX_L2_SLOTS = 64


def device_slots(set_bytes: int, budget_bytes: int) -> int:
    """The most slots (input sets) a device round may cycle through: the memory budget's, at most
    `MAX_DEVICE_SLOTS`; `drive_device` uses as many as a round's target length asks for."""
    return int(max(1, min(MAX_DEVICE_SLOTS, budget_bytes // max(1, set_bytes))))


def slots_for(set_bytes: int, max_slots: int, per_call_s: float, target_s: float) -> int:
    """Slots one device round replays once each: enough to last `target_s` and to exceed L2 twice (at
    least 4; the L2 rule at most `MAX_L2_SLOTS`), within `max_slots`. One replay per round, every slot
    refilled with a fresh set before it: no timed call sees inputs it saw before (a replay of unchanged
    inputs could skip its work)."""
    cold = min(MAX_L2_SLOTS, math.ceil(2 * L2_BYTES / max(1, set_bytes)))
    want = max(4, cold, math.ceil(target_s / max(per_call_s, 1e-9)))
    return int(max(1, min(max_slots, want)))


def drive_device(link: Link, deadline: float, stage: Callable[[int, int], dict[str, Any]], max_slots: int,
                 per_call_s: float, null_s: float, target_s: float, judge: bool = True,
                 rng: random.Random | None = None, budget: JudgeBudget | None = None,
                 samples: Callable[[int, list[int]], list[int]] | None = None, set_bytes: int = 0,
                 idle_check: Callable[[], bool | None] | None = None,
                 audit: Callable[[list[str] | None], list[str] | None] | None = None,
                 ) -> tuple[dict[str, Any] | None, list[tuple[int, int]], list[str]]:
    """Device time by CUDA-graph replay (`_Graph`): capture `slots` calls on inputs made from their own
    seeds, then `DEVICE_ROUNDS` rounds of fresh sets copied into the slots (outside the clock) and the graph
    replayed once between `go` and `done`. `audit(kernel names)` (the server's) returns the violations of
    the captured graph, or None when it cannot be audited: then, as when the forward cannot be captured,
    no device time (None, no saves) and the fitness uses the wall time per call. Returns the stats, the
    saves and the violations (the graph's, `reported_done_early`)."""
    rng = rng or random.SystemRandom()
    budget = budget or JudgeBudget(None, DEVICE_ROUNDS)
    slots = slots_for(set_bytes, max_slots, per_call_s, target_s)
    cap = stage(DEVICE_ROUND_BASE - 1, slots)
    link.send({"capture": slots, **{k: v for k, v in cap.items() if k != "stage"}})
    got = _recv(link, deadline, "captured")
    if got["captured"] != slots:
        return None, [], []
    violations = audit(got.get("kernels")) if audit is not None else []
    if violations is None:
        return {"unaudited": True}, [], []
    per_call: list[float] = []
    saved: list[tuple[int, int]] = []
    for j in range(DEVICE_ROUNDS):
        k = DEVICE_ROUND_BASE + j
        link.send({**stage(k, slots), "device": True})
        _recv(link, deadline, "staged")
        t0 = time.perf_counter()
        link.send({"go": k, "record": False, "passes": 1})
        msg = _recv(link, deadline, "done")
        t1 = time.perf_counter()
        if msg["done"] != k:
            raise ProtocolError(f"done for round {msg['done']} during device round {k}")
        if idle_check is not None and idle_check() is False and "reported_done_early" not in violations:
            violations.append("reported_done_early")
        per_call.append(max(t1 - t0 - null_s, 1e-9) / slots)
        which = sorted(rng.sample(range(slots), budget.take(min(JUDGED_PER_ROUND, slots), rng))) if judge else []
        link.send(_save_order(k, which, samples))
        done = _recv(link, deadline, "saved")
        if done["saved"] != k:
            raise ProtocolError(f"saved for round {done['saved']} during device round {k}")
        saved.extend((k, i) for i in which)
    stats = summarize(per_call, DEVICE_ROUNDS * slots)
    stats.update({"slots": slots, "passes": 1})
    if got.get("kernels"):  # the audited graph's kernel nodes per forward (a report's "kernels launched")
        stats["kernels_per_call"] = round(len(got["kernels"]) / slots, 2)
    return stats, saved, violations


def _save_order(k: int, which: list[int], samples: Callable[[int, list[int]], list[int]] | None) -> dict[str, Any]:
    order: dict[str, Any] = {"save": k, "which": which}
    if samples is not None and which:
        order["samples"] = samples(k, which)
    return order


class _Failure(Exception):
    """The child reported a failure (its `failure` message) in the middle of the rounds."""

    def __init__(self, msg: dict[str, Any]) -> None:
        super().__init__(msg.get("error", ""))
        self.msg = msg


RoundFailure = _Failure


def _instantiate(graph: Any) -> None:
    graph.instantiate()


class _Graph:
    """Device-time rounds: G forward calls on G input slots captured into one CUDA graph. Capture runs the
    forward's host code once, on inputs no timed round uses; each device round then copies its fresh sets
    into the slots (outside the clock) and replays the graph: no host code of the forward runs in the
    window, so the round's time is the device's, as `do_bench` measures it, without the launch cost."""

    def __init__(self, call: Callable[[list[Any]], Any], sets: list[list[Any]], sync: Callable[[], None]) -> None:
        import torch

        self.slots = sets
        with torch.no_grad():
            side = torch.cuda.Stream()
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):  # warm-up off the capture (PyTorch's recipe for graphs)
                for st in sets:
                    call(st)
            torch.cuda.current_stream().wait_stream(side)
            sync()
            try:  # kept, so the driver can list its nodes for the audit before it is instantiated
                self.graph = torch.cuda.CUDAGraph(keep_graph=True)
                kept = True
            except TypeError:  # an older torch: no audit, hence no device clock (`kernels` None)
                self.graph = torch.cuda.CUDAGraph()
                kept = False
            backup = _generator_backup()
            try:
                with torch.cuda.graph(self.graph):
                    self.outs = [call(st) for st in sets]
            except BaseException:
                # A capture that fails midway leaves the default CUDA generator marked as capturing: every
                # later random input of the process (a next shape's, the judge's) would raise "Offset
                # increment outside graph capture". Its state before the capture is put back.
                _generator_restore(backup)
                raise
        sync()
        # The nodes the replays will run, read from the driver before instantiation (`graph_audit`): the
        # server refuses any kernel that is not the candidate's Triton or an allowed copy or fill.
        self.kernels = _kernel_names(self.graph) if kept else None
        if kept:
            _instantiate(self.graph)

    def fill(self, sets: list[list[Any]]) -> None:
        """The round's fresh sets into the captured slots; sets made by the reference into its shelf
        (`inbox`) already lie there (the same memory: nothing to copy)."""
        for slot, new in zip(self.slots, sets):
            for a, b in zip(slot, new):
                if isinstance(a, bound.Tensor) and not (bound.data_ptr(a) == bound.data_ptr(b)
                                                         and bound.shape(a) == bound.shape(b)):
                    bound.copy_(a, b)


def _generator_backup() -> Any:
    import torch

    try:
        return torch.cuda.default_generators[torch.cuda.current_device()].clone_state()
    except (AttributeError, RuntimeError, IndexError):  # an older torch: nothing to put back
        return None


def _generator_restore(backup: Any) -> None:
    import torch

    if backup is None:
        return
    try:
        torch.cuda.default_generators[torch.cuda.current_device()].graphsafe_set_state(backup)
    except (AttributeError, RuntimeError, IndexError):
        pass


def serve(chan: Channel, call: Callable[[list[Any]], Any], load: Callable[[dict[str, Any]], list[list[Any]]],
          save: Callable[[int, list[int], list[Any], list[int] | None], None], sync: Callable[[], None],
          recorder_factory: Callable[[], Any], warm: Callable[[], None] = lambda: None) -> Any:
    """The child's side of the rounds, until the server sends `end`. Returns the recorders of recorded rounds."""
    import contextlib


    recs: list[Any] = []
    graph: _Graph | None = None
    # Everything below that runs outside `go`..`done` (loading before it, saving after it) calls functions
    # bound before any candidate code existed (`bound`, `channel_recv`): nothing a candidate put on a class
    # or a module runs there. Only the forward (`call`), between `go` and `done`, is the candidate's.
    recv, send, replay, no_grad = channel_recv, channel_send, bound.replay, bound.no_grad
    gc_off, gc_on = bound.gc_disable, bound.gc_enable
    while True:
        msg = recv(chan)
        if "end" in msg:
            return recs
        if "capture" in msg:
            try:
                graph = _Graph(call, load(msg), sync)
                send(chan, {"captured": len(graph.slots), "kernels": graph.kernels})
            except Exception:  # noqa: BLE001 - a forward that cannot be captured is timed by wall clock
                graph = None
                try:
                    bound.synchronize("cuda")
                except Exception:  # noqa: BLE001 - what the failed capture left is not the verdict's concern
                    pass
                send(chan, {"captured": 0, "kernels": []})
            continue
        k = msg["stage"]
        device_round = bool(msg.get("device")) and graph is not None
        sets = load(msg) if k >= 0 else []
        if device_round:
            graph.fill(sets)
            del sets
        warm()  # staging left the device idle: bring its clocks up before the clock starts
        sync()
        send(chan, {"staged": k})
        go = recv(chan)
        if go.get("go") != k:
            raise ProtocolError(f"expected go {k}")
        # No cyclic collection from `go` until the next command is read: a full one (tens of ms in a
        # process with CUDA torch and Triton loaded, more often where a round stages many small tensors)
        # landing after `done` is CPU time the server counts as work after `done` (`reported_done_early`
        # of honest ATen kernels on the H100). It runs after the read instead, outside the clock and the check.
        gc_off()
        if device_round:
            # one replay on the fresh sets `fill` just copied in: every timed call sees new inputs
            replay(graph.graph)
            sync()
            outs: list[Any] = list(graph.outs)
        else:
            outs = [None] * len(sets)
            rec = recorder_factory() if go.get("record") else contextlib.nullcontext()
            with no_grad(), rec:
                for i, inputs in enumerate(sets):
                    outs[i] = call(inputs)
                sync()
            if go.get("record"):
                recs.append(rec)
        send(chan, {"done": k})
        order = recv(chan)
        gc_on()
        save(k, list(order.get("which", [])), outs, order.get("samples"))
        del outs
        if not device_round:
            del sets
        send(chan, {"saved": k})


__all__ = ["ChildGone", "RoundFailure", "RoundPlan", "drive", "serve", "summarize"]
