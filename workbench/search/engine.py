"""The search loop: select -> operator -> evaluator -> memory -> termination, with work in flight.

Up to `capacity` evaluations run at once in the evaluator while the operator prepares the next
candidate (LLM calls go to a thread pool; the offline tuner runs inline, it takes milliseconds), so
generation and evaluation overlap. All graph, policy and memory updates happen in this thread.
Every node is committed to the memory when created (pending) and again when finished, so a SIGKILL
loses no evaluated node and `resume` re-submits the pending ones.
"""

from __future__ import annotations

import dataclasses
import logging
import random
import time
import uuid
from collections import Counter
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from pathlib import Path
from typing import Any

from workbench.evaluator import EvalJob, Evaluator
from workbench.llm.transcript import CALLS_DIR
from workbench.memory import Memory, Node, RunInfo, default_memory_path
from workbench.result import EvalResult, Status
from workbench.search import termination as T
from workbench.search.config import SearchConfig, SearchError, check_spec, spec_key, spec_name
from workbench.search.diagnosis import diagnose
from workbench.search.node import Tree
from workbench.search.operators import OfflineTuningOperator, Operator, OperatorContext, Proposal, Signal
from workbench.search.policies import Policy, Selection, make_policy
from workbench.search.progress import Progress
from workbench.search.run import Run

log = logging.getLogger(__name__)

RESUMABLE = (
    "budget",
    "max_wall_s",
    "max_tokens",
    "stall",
    "max_rejected",
    "fitness_target",
    "workers",
    "evaluator",
    "ray_address",
    "timeout_s",
)
_MAX_DISCARDS = 25  # consecutive proposals that bring nothing new before the space counts as exhausted
_MAX_INFRA_STREAK = 3  # consecutive infra_error results: the evaluator is broken, not the candidates


def new_run_id(spec_path: str) -> str:
    return f"{spec_name(spec_path)}-{time.strftime('%Y%m%d-%H%M%S')}-{uuid.uuid4().hex[:4]}"


class SearchEngine:
    """One search run (new or resumed). Inject `evaluator`, `operator` or `memory` to reuse them."""

    def __init__(
        self,
        config: SearchConfig,
        *,
        evaluator: Evaluator | None = None,
        operator: Operator | None = None,
        memory: Memory | None = None,
        resume: str | None = None,
        progress: bool = True,
        platform: tuple[str, str] | None = None,
        resume_changes: dict[str, Any] | None = None,
    ) -> None:
        self.memory = memory or Memory(default_memory_path(config.run_dir))
        self._own_memory = memory is None
        self.resume_id = resume
        if resume is not None:
            info = self.memory.get_run(resume)
            if info is None:
                raise SearchError(f"no run {resume!r} in {self.memory.path}")
            stored = SearchConfig.from_dict(info.config)
            # what a resumption may change: budgets, parallelism, the backend; never the problem itself
            changes = dict(resume_changes or {})
            fixed = sorted(k for k, v in changes.items() if k not in RESUMABLE and getattr(stored, k) != v)
            if fixed:
                raise SearchError(f"{', '.join(fixed)} cannot change on resume (only {', '.join(RESUMABLE)})")
            # exactly the fields the caller gave, on the stored config; run_dir is where it was found
            changes["run_dir"] = config.run_dir
            config = dataclasses.replace(stored, **changes)
        config.validate()
        self.cfg = config
        self.spec_source = check_spec(config.spec_path)
        self.spec_path = str(Path(config.spec_path).resolve())
        # a subset of shapes is a different problem for the memory: its fitness is not comparable
        key_extra = {"__shapes__": sorted(config.shapes)} if config.shapes else {}
        self.spec_key = spec_key(config.spec_path, self.spec_source, {**config.overrides, **key_extra})
        self.rng = random.Random(config.rng_seed)
        self.operator = operator or self._make_operator()
        self._own_operator = operator is None
        # bad seeds fail here, before torch is imported for the platform: one quick, clear message
        self._seed_sources = self._read_seeds() if resume is None else []
        self.platform, self.arch = platform or _describe(config.device)
        self.policy: Policy = make_policy(
            config.policy,
            rng=random.Random(config.rng_seed + 1),
            can_draft=self.operator.can_draft,
            crossover=self.operator.supports_crossover,
            **config.policy_options,
        )
        self.tree = Tree()
        self.term = T.Termination(config.limits())
        self.progress_enabled = progress
        self._evaluator = evaluator
        self._own_evaluator = evaluator is None
        self.run_id = resume or new_run_id(config.spec_path)
        self.run_folder = Path(config.run_dir) / self.run_id  # the run's artifacts and its saved LLM calls
        self.stop: T.Stop | None = None
        self._seq = 0
        self._seed_ids: list[str] = []
        self._discards = 0
        self._infra_streak = 0
        self.failures: Counter[str] = Counter()

    # -- set-up ----------------------------------------------------------------------------------
    def _make_operator(self) -> Operator:
        from workbench.search.operators import make_operator

        retriever: Any = "auto" if self.cfg.retrieval else None
        try:
            return make_operator(
                self.cfg.llm,
                self.cfg.llm_step,
                retriever=retriever,
                offline_share=self.cfg.offline_share,
                **self.cfg.llm_options,
            )
        except ImportError as exc:
            raise SearchError(f"LLM provider {self.cfg.llm!r} is not available: {exc}") from None
        except Exception as exc:
            from workbench.llm import LLMError

            if isinstance(exc, (LLMError, ValueError)):
                raise SearchError(f"LLM provider {self.cfg.llm!r}: {exc}") from None
            raise

    def _read_seeds(self) -> list[tuple[str, str]]:
        seeds = []
        for path in self.cfg.seeds:
            p = Path(path)
            if not p.is_file():
                raise SearchError(f"seed candidate {path!r} not found")
            src = p.read_text(encoding="utf-8")
            if not self.operator.can_repair:
                from workbench.tunables import TunablesError, parse_tunables

                try:
                    parse_tunables(src)
                except TunablesError as exc:
                    raise SearchError(
                        f"seed {path}: {exc} (the offline tuning operator only changes declared "
                        f"tunables; declare TUNABLES or use --llm)"
                    ) from None
            seeds.append((str(p), src))
        if not seeds and not self.operator.can_draft:
            raise SearchError(
                "the offline tuning operator (--llm none) needs at least one --seed candidate "
                "that declares TUNABLES; or choose an LLM provider to draft from the spec"
            )
        return seeds

    def _seed_nodes(self) -> list[Node]:
        return [self._node("seed", [], source=src, meta={"path": path}) for path, src in self._seed_sources]

    def _node(self, operator: str, parents: list[str], **kw: Any) -> Node:
        n = Node(
            run_id=self.run_id,
            spec_key=self.spec_key,
            operator=operator,
            parents=parents,
            platform=self.platform,
            seq=self._seq,
            **kw,
        )
        self._seq += 1
        return n

    @property
    def evaluator(self) -> Evaluator:
        if self._evaluator is None:
            from workbench.evaluator import make_evaluator

            kw: dict[str, Any] = {}
            if self.cfg.evaluator == "ray" and self.cfg.ray_address:
                kw["address"] = self.cfg.ray_address
            try:
                self._evaluator = make_evaluator(
                    self.cfg.evaluator, workers=self.cfg.workers, device=self.cfg.device, **kw
                )
            except ValueError as exc:
                raise SearchError(str(exc)) from None
        return self._evaluator

    # -- the loop ------------------------------------------------------------------------------------
    def run(self) -> Run:
        evaluator = self.evaluator  # first: a backend that cannot start must not leave a "running" run behind
        to_submit = self._start()
        pool = ThreadPoolExecutor(max_workers=max(1, evaluator.capacity), thread_name_prefix="operator")
        gens: dict[Future[Proposal], Selection] = {}
        evals: dict[Future[EvalResult], Node] = {}
        progress = Progress(self, enabled=self.progress_enabled)
        try:
            for node in to_submit:
                evals[evaluator.submit(self._job(node))] = node
            while True:
                if self.stop is None:
                    self._fill(pool, gens, evals)
                if not gens and not evals:
                    if self.stop is None:
                        self.stop = T.Stop(T.SPACE_EXHAUSTED, "the policy has nothing left to expand")
                    break
                done, _ = wait([*gens, *evals], timeout=0.5, return_when=FIRST_COMPLETED)
                for fut in done:
                    if fut in gens:
                        sel = gens.pop(fut)  # type: ignore[arg-type]
                        node = self._take(fut.result(), sel)  # type: ignore[arg-type]
                        if node is not None:
                            evals[evaluator.submit(self._job(node))] = node
                    else:
                        self._finish(evals.pop(fut), fut.result())  # type: ignore[arg-type]
                    progress.update()
                if self.stop is None:
                    self.stop = self.term.check()
                if self.stop is not None:
                    for f in gens:  # proposals not yet back are dropped: no node was recorded for them
                        f.cancel()
                    gens.clear()
                    for f in list(evals):
                        if f.cancel():  # queued, not started: stays pending in memory, resume runs it
                            evals.pop(f)
                progress.update()
        except KeyboardInterrupt:
            self.stop = T.Stop(
                T.INTERRUPTED, "interrupted; pending nodes resume with --resume " + self.run_id
            )
            for f in [*gens, *evals]:
                f.cancel()
        finally:
            pool.shutdown(wait=False, cancel_futures=True)
            progress.close()
            self._close()
        return self._conclude()

    def _start(self) -> list[Node]:
        """Create or reload the run; return the nodes to evaluate first."""
        if self.resume_id is None:
            seeds = self._seed_nodes()
            self.memory.start_run(
                RunInfo(
                    run_id=self.run_id,
                    spec_key=self.spec_key,
                    spec_path=self.spec_path,
                    platform=self.platform,
                    policy=self.cfg.policy,
                    config=self.cfg.to_dict(),
                )
            )
            for n in seeds:
                self.tree.add(n)
                self.memory.save_node(n)
                self._seed_ids.append(n.id)
            log.info(
                "run %s: %d seed(s), policy %s, operator %s",
                self.run_id,
                len(seeds),
                self.cfg.policy,
                self.operator.name,
            )
            return seeds
        nodes = self.memory.run_history(self.run_id)
        self.memory.mark_running(self.run_id)
        for n in nodes:
            self.tree.add(n)
            if n.operator == "seed":
                self._seed_ids.append(n.id)
        self._seq = max((n.seq for n in nodes), default=-1) + 1
        finished = sorted((n for n in nodes if n.evaluated), key=lambda n: (n.evaluated_at or 0.0, n.seq))
        for n in finished:  # replay: the policy and the counters see the run as it happened
            self.term.add_tokens(n.prompt_tokens + n.completion_tokens)
            if n.meta.get("rejected"):
                self.term.record_rejected()
            else:
                self.term.record(n.fitness, counts=n.operator != "seed")
            self.policy.observe(n, self.tree)
            if n.error_class:
                self.failures[n.error_class] += 1
        pending = [n for n in nodes if not n.evaluated and n.source is not None]
        log.info(
            "resuming run %s: %d finished node(s), %d pending re-submitted",
            self.run_id,
            len(finished),
            len(pending),
        )
        return pending

    def _job(self, node: Node) -> EvalJob:
        return EvalJob(
            spec_path=self.spec_path,
            candidate_source=node.source or "",
            device=self.cfg.device,
            trials=self.cfg.trials,
            timeout_s=self.cfg.timeout_s,
            overrides=dict(self.cfg.overrides),
            shapes=list(self.cfg.shapes) if self.cfg.shapes else None,
            platform=self.platform,
            job_id=node.id,
        )

    def _context(self, sel: Selection) -> OperatorContext:
        best, fails = self.memory.past_attempts(
            self.spec_key, self.platform, k=2, n_failures=3, exclude_ids=[p.id for p in sel.parents]
        )
        return OperatorContext(
            spec_path=self.spec_path,
            spec_source=self.spec_source,
            spec_key=self.spec_key,
            platform=self.platform,
            arch=self.arch,
            parents=list(sel.parents),
            seen_hashes=frozenset(self.tree.source_hashes()),
            past_best=best,
            past_failures=fails,
            overrides=dict(self.cfg.overrides),
            seed=self.rng.getrandbits(32),
            related=self._related() if getattr(self.operator, "uses_related", False) else [],
            calls_dir=str(self.run_folder / CALLS_DIR),
        )

    def _related(self, k: int = 12) -> list[tuple[str, Node]]:
        """Passing kernels of other specs from the memory, each with its spec's path (the operator keys
        them by the spec's aten ops); the best per spec, at most `k` specs."""
        out: list[tuple[str, Node]] = []
        seen: set[str] = {self.spec_key}
        paths: dict[str, str | None] = {}
        for n in self.memory.top_k(None, self.platform, k=8 * k, with_text="source"):
            if n.spec_key in seen or not n.source:
                continue
            if n.run_id not in paths:
                info = self.memory.get_run(n.run_id)
                paths[n.run_id] = info.spec_path if info is not None else None
            path = paths[n.run_id]
            if path and Path(path).is_file():
                seen.add(n.spec_key)
                out.append((path, n))
                if len(out) >= k:
                    break
        return out

    def _fill(self, pool: ThreadPoolExecutor, gens: dict, evals: dict) -> None:
        cap = self.evaluator.capacity
        while self.stop is None and len(gens) + len(evals) < cap + 1:
            in_flight = len(gens) + sum(1 for n in evals.values() if n.operator != "seed")
            if not self.term.may_submit(in_flight):
                return
            sel = self.policy.select(self.tree)
            if sel is None:
                return
            ctx = self._context(sel)
            if isinstance(self.operator, OfflineTuningOperator):
                # milliseconds of work: inline, so the next proposal already sees this one's source
                node = self._take(self._safe_propose(ctx), sel)
                if node is not None:
                    evals[self.evaluator.submit(self._job(node))] = node
            else:
                gens[pool.submit(self._safe_propose, ctx)] = sel

    def _safe_propose(self, ctx: OperatorContext) -> Proposal:
        try:
            return self.operator.propose(ctx)
        except Exception as exc:  # an operator bug becomes a recorded node, not a dead search
            log.exception("operator %s raised", self.operator.name)
            return Proposal(
                self.operator.name, error_class="operator_error", diagnosis=f"{type(exc).__name__}: {exc}"
            )

    def _take(self, prop: Proposal, sel: Selection) -> Node | None:
        """Turn a proposal into a node: pending (to evaluate), a recorded failure or rejection, or nothing
        (a free duplicate, or an exhausted operator). The turned-away replies of a best-of-n
        (`prop.extra`) are recorded first."""
        for other in prop.extra:
            self._take(other, sel)
        parents = [p.id for p in sel.parents]
        if prop.signal is Signal.EXHAUSTED:
            self.policy.release(sel, self.tree)
            return self._discard(prop.diagnosis, exhausted=True)
        if prop.signal is Signal.CANDIDATE:
            dup = next((n for n in self.tree if n.source == prop.source), None)
            if dup is not None:
                if not prop.costly:  # free to make again (the offline tuner): dropped, not recorded
                    self.policy.release(sel, self.tree)
                    return self._discard(f"proposal identical to node {dup.id}")
                prop = dataclasses.replace(
                    prop,
                    signal=Signal.REJECTED,
                    error_class="duplicate",
                    diagnosis=f"rejected before evaluation: the candidate is identical to node {dup.id}",
                    extra=[],
                )
        self._discards = 0
        rejected = prop.signal is Signal.REJECTED
        meta = dict(prop.meta)
        if prop.signal is Signal.CANDIDATE and prop.diagnosis:
            meta["note"] = prop.diagnosis
        if rejected:
            meta["rejected"] = True  # spent no evaluation: the resume replay counts it the same way
        if prop.provenance is not None:
            meta["provenance"] = prop.provenance.to_meta(self.run_folder)
        node = self._node(
            prop.operator,
            parents,
            source=prop.source,
            prompt=prop.prompt,
            response=prop.response,
            prompt_tokens=prop.prompt_tokens,
            completion_tokens=prop.completion_tokens,
            island=sel.island if sel.island is not None else _island_of(sel),
            meta=meta,
        )
        self.term.add_tokens(prop.prompt_tokens + prop.completion_tokens)
        self.tree.add(node)
        if prop.signal is not Signal.CANDIDATE:
            node.fail_generation(prop.error_class or "generation_failed", prop.diagnosis)
            self._record(node)
            if prop.fatal:
                self.stop = T.Stop(T.LLM_FATAL, prop.diagnosis)
            return None
        self.memory.save_node(node)
        return node

    def _discard(self, why: str, *, exhausted: bool = False) -> None:
        """Nothing recorded for this proposal. `exhausted`: the operator said it has nothing new left;
        else many discards in a row mean the same."""
        self._discards += 1
        log.debug("proposal discarded (%d in a row): %s", self._discards, why)
        if exhausted or self._discards >= _MAX_DISCARDS:
            self.stop = T.Stop(T.SPACE_EXHAUSTED, why)
        return None

    def _finish(self, node: Node, result: EvalResult) -> None:
        node.apply_result(result, diagnose(result))
        label = (result.platform or {}).get("label")
        if label:
            node.platform = label
        self._record(node)
        self._infra_streak = self._infra_streak + 1 if result.status == Status.INFRA_ERROR else 0
        if self._infra_streak >= _MAX_INFRA_STREAK and self.stop is None:
            self.stop = T.Stop(
                T.EVALUATOR_FAILED,
                f"{self._infra_streak} evaluations in a row failed in the "
                f"evaluation infrastructure: {result.summary()}",
            )
        if result.status == Status.BAD_SPEC and self.stop is None:
            self.stop = T.Stop(T.BAD_SPEC, f"the spec could not be used: {result.summary()}")
        if node.id in self._seed_ids:
            if not node.passed:
                log.warning("seed %s failed: %s", node.meta.get("path", node.id), result.summary())
            seeds = [self.tree[i] for i in self._seed_ids]
            if (
                self.stop is None
                and all(s.evaluated for s in seeds)
                and not any(s.passed for s in seeds)
                and not self.operator.can_repair
            ):
                why = "; ".join(
                    f"{s.meta.get('path', s.id)}: {s.result.summary() if s.result else s.status}"
                    for s in seeds
                )
                self.stop = T.Stop(
                    T.SEEDS_FAILED, f"every seed failed and the offline tuner cannot repair code: {why}"
                )

    def _record(self, node: Node) -> None:
        self.memory.save_node(node)  # committed: from here a SIGKILL cannot lose this node
        try:
            self.operator.record_verdict(node, self.run_folder)
        except Exception:  # the node is saved; a transcript that cannot be linked must not stop the search
            log.exception("operator %s: recording the verdict of node %s failed", self.operator.name, node.id)
        if node.error_class:
            self.failures[node.error_class] += 1
        self.policy.observe(node, self.tree)
        if node.meta.get("rejected"):
            self.term.record_rejected()
        else:
            self.term.record(node.fitness, counts=node.operator != "seed")

    # -- wrap-up ---------------------------------------------------------------------------------
    def _close(self) -> None:
        if self._own_evaluator and self._evaluator is not None:
            self._evaluator.close()
        if self._own_operator:
            self.operator.close()

    def _conclude(self) -> Run:
        stop = self.stop or T.Stop("unknown", "the loop ended without a rule")
        failed_rules = {T.BAD_SPEC, T.LLM_FATAL, T.SEEDS_FAILED, T.EVALUATOR_FAILED}
        status = (
            "failed"
            if stop.rule in failed_rules
            else ("interrupted" if stop.rule == T.INTERRUPTED else "finished")
        )
        self.memory.finish_run(self.run_id, status=status, stop_rule=stop.rule, stop_message=stop.message)
        log.info("run %s stopped: %s (%s)", self.run_id, stop.rule, stop.message)
        run = Run(
            run_id=self.run_id,
            run_dir=Path(self.cfg.run_dir) / self.run_id,
            config=self.cfg,
            spec_key=self.spec_key,
            platform=self.platform,
            tree=self.tree,
            stop=stop,
            memory_path=self.memory.path,
            operator=self.operator.name,
            failures_by_class=self.memory.failures_by_class(self.spec_key, self.platform),
        )
        try:
            run.write_artifacts()
        except Exception:  # the memory already holds everything; a plotting failure must not hide the result
            log.exception("writing the run's artifacts failed")
        if self._own_memory:
            self.memory.close()
        return run


def _island_of(sel: Selection) -> int | None:
    return sel.parents[0].island if sel.parents else None


def _describe(device: str) -> tuple[str, str]:
    from platforms import describe_device

    try:
        p = describe_device(device)
    except ValueError as exc:
        raise SearchError(str(exc)) from None
    return p.label, p.arch
