"""Running a suite: every problem prepared in its own process, evaluated through the evaluators, stored.

One thread per worker takes the next unfinished problem: prepare it (`prepare.py`: load, size, lower),
evaluate its seed (`--budget 0`) or search from it (`workbench.search.optimize`), time torch.compile
when asked (GPU), and commit its row. Whatever goes wrong with one problem becomes that problem's
reason; the run goes on. A SIGKILL loses only the problems in flight, which `--resume` runs again.
"""
from __future__ import annotations

import logging
import os
import queue
import re
import sys
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor, wait
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from workbench.suites.config import RESUMABLE, SuiteConfig
from workbench.suites.problems import Problem, SuiteError
from workbench.suites.store import ProblemRow, SuiteStore

log = logging.getLogger(__name__)

STORE_NAME = "suite.sqlite"


class EvaluatorUnavailable(SuiteError):
    """The evaluator backend cannot start: the run stops, every unfinished problem stays to resume."""


def safe_name(problem_id: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", problem_id).strip("_")


def new_run_id(suite: str) -> str:
    return f"{suite}-{time.strftime('%Y%m%d-%H%M%S')}-{uuid.uuid4().hex[:4]}"


def resolve_run(run_dir: str | Path, run: str) -> Path:
    """A run by id under `run_dir`, or a path to a run directory."""
    for cand in (Path(run), Path(run_dir) / run):
        if (cand / STORE_NAME).is_file():
            return cand
    raise SuiteError(f"no suite run {run!r} (looked for {STORE_NAME} in {run} and {Path(run_dir) / run})")


@dataclass
class SuiteRun:
    """A finished (or stopped) suite run: its directory, its report, its store's rows."""

    run_id: str
    path: Path
    report: dict[str, Any]
    files: dict[str, Path]

    @property
    def problems(self) -> list[dict[str, Any]]:
        return self.report["problems"]

    def table(self) -> str:
        from workbench.suites.report import summary_table

        return summary_table(self.report)


class SuiteRunner:
    def __init__(self, cfg: SuiteConfig, path: Path, store: SuiteStore, *, progress: bool = True) -> None:
        self.cfg = cfg
        self.path = path
        self.store = store
        self.progress = progress
        self._evaluator: Any = None
        self._evaluator_error: EvaluatorUnavailable | None = None
        self._stopping = threading.Event()  # the run is ending: a problem still in flight is not at fault
        self._lock = threading.Lock()
        self._servers: "queue.Queue[Any]" = queue.Queue()
        self._all_servers: list[Any] = []
        self.fork_modes: list[str] = []  # each fork server's mode (fork, or spawn when CUDA forbade it)
        (path / "kernels").mkdir(parents=True, exist_ok=True)

    # -- the evaluator, shared by every problem --------------------------------------------------
    @property
    def evaluator(self) -> Any:
        with self._lock:
            if self._evaluator_error is not None:
                raise self._evaluator_error
            if self._evaluator is None:
                from workbench.evaluator import make_evaluator

                try:
                    self._evaluator = make_evaluator(self.cfg.search.evaluator, workers=self.cfg.search.workers,
                                                     device=self.cfg.search.device)
                except Exception as exc:  # e.g. Ray's node timing out at start: no problem can run, stop the run
                    self._evaluator_error = EvaluatorUnavailable(
                        f"the {self.cfg.search.evaluator} evaluator failed to start: {type(exc).__name__}: "
                        f"{str(exc).splitlines()[0] if str(exc) else ''} (resume the run once it works)")
                    raise self._evaluator_error from None
            return self._evaluator

    def call_isolated(self, job: str, kwargs: dict[str, Any], timeout_s: float) -> dict[str, Any]:
        """A job of `forkserver.JOBS` in a forked child of one of the runner's fork servers."""
        from workbench.env import stripped_environ
        from workbench.suites.forkserver import ForkServer

        try:
            server = self._servers.get_nowait()
        except queue.Empty:
            env = stripped_environ()
            env["WB_FORKSERVER_DEVICE"] = self.cfg.search.device
            if self.cfg.search.device == "cpu":
                env["TRITON_INTERPRET"] = "1"  # before the lowering (in the child) imports triton
            else:
                env.pop("TRITON_INTERPRET", None)
            server = ForkServer(env=env)
            info = server.start()
            log.info("suite's fork server %s: %s%s", info.get("pid"), info.get("mode", "fork"),
                     f" ({info['why']})" if info.get("why") else "")
            with self._lock:
                self._all_servers.append(server)
                self.fork_modes.append(str(info.get("mode", "fork")))
        try:
            return server.call(job, kwargs, timeout_s)
        finally:
            self._servers.put(server)

    def close(self) -> None:
        if self._evaluator is not None:
            self._evaluator.close()
        for server in self._all_servers:
            server.close()

    # -- the run ---------------------------------------------------------------------------------
    def run(self) -> None:
        rows = self.store.problems()
        todo = [r for r in rows if not r.finished]
        log.info("suite %s: %d problems, %d finished already, %d to run", self.path.name, len(rows),
                 len(rows) - len(todo), len(todo))
        bar = None
        # a terminal gets a bar; a log (a pipe, a file, CI) one readable line per problem instead of redraws
        if self.progress and _is_tty(sys.stderr):
            from tqdm.auto import tqdm

            bar = tqdm(total=len(rows), initial=len(rows) - len(todo), unit="problem", file=sys.stderr,
                       desc=f"suite {self.cfg.suite}", dynamic_ncols=True, mininterval=0.5)
        tally = {"passed": 0, "other": 0, "done": len(rows) - len(todo)}

        stop_at = time.monotonic() + self.cfg.stop_after_s if self.cfg.stop_after_s else None

        def one(row: ProblemRow) -> None:
            if stop_at is not None and time.monotonic() > stop_at:
                return  # past --stop-after: stays pending for --resume
            record = self._run_problem(row)
            with self._lock:
                tally["passed" if record.get("correct") else "other"] += 1
                tally["done"] += 1
                if bar is not None:
                    bar.update(1)
                    bar.set_postfix_str(f"correct={tally['passed']} not={tally['other']} last={row.name[:24]}")
                elif self.progress:
                    log.info("[%d/%d] %s", tally["done"], len(rows), problem_line(record))

        pool = ThreadPoolExecutor(max_workers=self.cfg.problems_in_flight(), thread_name_prefix="suite")
        futs = [pool.submit(one, r) for r in todo]
        try:
            for fut in futs:
                fut.result()
        except BaseException as exc:  # Ctrl-C: problems not started stay pending, in flight stay running
            self._stopping.set()
            for fut in futs:
                fut.cancel()
            if isinstance(exc, EvaluatorUnavailable):
                # no problem can run: the ones in flight reach the evaluator soon and reset themselves to
                # pending; wait for them, so the store says so once the run has stopped
                wait(futs, timeout=120)
            raise
        finally:
            pool.shutdown(wait=False, cancel_futures=True)
            if bar is not None:
                bar.close()
        left = sum(1 for r in self.store.problems() if not r.finished)
        if stop_at is not None and left:
            log.warning("--stop-after %g s reached: %d problems left pending (continue with --resume %s)",
                        self.cfg.stop_after_s, left, self.path.name)

    def _run_problem(self, row: ProblemRow) -> dict[str, Any]:
        self.store.mark_running(row.problem_id)
        t0 = time.time()
        record: dict[str, Any] = {"problem_id": row.problem_id, "level": row.level, "name": row.name,
                                  "spec_path": row.spec_path, "verdict": "not_run", "correct": False,
                                  "fitness": 0.0, "speedup": 0.0, "runtime_us": None, "baseline_us": None,
                                  "compile_baseline_us": None, "speedup_vs_compile": None, "best_kernel": None,
                                  "diagnosis": "", "sizes": None, "seed": {"mode": self.cfg.draft},
                                  "started_at": round(t0, 3)}
        try:
            status = self._evaluate_problem(row, record)
        except EvaluatorUnavailable:
            self.store.reset([row.problem_id])  # not the problem's fault: it stays to run on resume
            raise
        except Exception as exc:  # the suite's own fault on this problem: reported, the run goes on
            if self._stopping.is_set() or self._evaluator_error is not None:
                # the run is being torn down under this problem (its fork server closed): not its fault
                log.info("problem %s left pending: the run stopped while it was in flight", row.problem_id)
                self.store.reset([row.problem_id])
                return record
            log.exception("problem %s failed inside the suite runner", row.problem_id)
            status, record["diagnosis"] = "failed", f"suite error: {type(exc).__name__}: {exc}".splitlines()[0]
        record["wall_s"] = round(time.time() - t0, 3)
        self.store.finish(row.problem_id, status, record)
        return record

    def _evaluate_problem(self, row: ProblemRow, record: dict[str, Any]) -> str:
        cfg = self.cfg
        # where a problem's wall time goes (prepare, the evaluations or search, the compile baseline): the
        # report adds them up, so a slow run says which phase to look at
        phases = record["phases_s"] = {}
        t = time.time()
        prep = self.call_isolated("prepare", {"spec_path": row.spec_path, "max_elems": cfg.max_elems,
                                              "draft": cfg.draft, "name": row.problem_id}, cfg.prepare_timeout_s)
        phases["prepare"] = round(time.time() - t, 3)
        if not prep.get("ok"):
            record["diagnosis"] = f"prepare: {prep.get('diagnosis', 'unknown failure')}"
            return "failed"
        overrides = dict(prep.get("overrides") or {})
        record["sizes"] = prep.get("sizing")
        record["work"] = prep.get("work")
        source = prep.get("seed_source")
        record["seed"].update(ops=prep.get("seed_ops", []), diagnosis=prep.get("seed_diagnosis", ""))
        if source is None and cfg.seed_dir:
            found = _seed_file(Path(cfg.seed_dir), row)
            if found is not None:
                source = found.read_text(encoding="utf-8")
                record["seed"].update(mode="file", path=str(found))
        if source is None and (cfg.budget == 0 or cfg.search.llm == "none"):
            why = prep.get("seed_diagnosis") or (f"no seed file for {row.name} in {cfg.seed_dir}" if cfg.seed_dir
                                                 else "no seed (--draft none without --seed-dir)")
            record["diagnosis"] = f"no seed: {why}"
            return "failed"
        stem = safe_name(row.problem_id)
        seed_path = None
        if source is not None:
            seed_path = self.path / "kernels" / f"{stem}.seed.py"
            seed_path.write_text(source, encoding="utf-8")
        t = time.time()
        if cfg.budget == 0:
            status = self._evaluate_seed(row, record, source or "", overrides)
            if record["correct"]:
                record["best_kernel"] = str(seed_path.relative_to(self.path)) if seed_path else None
        else:
            status = self._search(row, record, seed_path, overrides)
        phases["evaluate"] = round(time.time() - t, 3)
        if record["correct"] and cfg.compile_baseline:
            t = time.time()
            self._compile_baseline(row, record, overrides)
            phases["compile_baseline"] = round(time.time() - t, 3)
        return status

    def _evaluate_seed(self, row: ProblemRow, record: dict[str, Any], source: str, overrides: dict[str, Any]) -> str:
        from workbench.evaluator import EvalJob

        job = EvalJob(spec_path=row.spec_path, candidate_source=source, device=self.cfg.search.device,
                      trials=self.cfg.search.trials, timeout_s=self.cfg.search.timeout_s, overrides=overrides,
                      order=record["started_at"])
        res = self.evaluator.submit(job).result()
        _fill_from_result(record, res)
        record["evaluations"] = 1
        return "failed" if res.status.value in ("infra_error", "bad_spec") else "done"

    def _search(self, row: ProblemRow, record: dict[str, Any], seed_path: Path | None,
                overrides: dict[str, Any]) -> str:
        from workbench.evaluator import InOrder
        from workbench.search import SearchError, optimize

        try:
            search = self.cfg.for_problem(row.spec_path, [str(seed_path)] if seed_path else [], overrides,
                                          str(self.path / "search"))
            # the problem's jobs wait behind older problems' jobs: problems finish one after another
            run = optimize(config=search, evaluator=InOrder(self.evaluator, record["started_at"]), progress=False)
        except SearchError as exc:
            record["diagnosis"] = f"search: {exc}"
            return "failed"
        # candidates the harness evaluated (an LLM reply with no usable code never reached it)
        nodes = [n for n in run.tree if n.evaluated and n.status != "generation_failed"]
        record["evaluations"] = len(nodes)
        by_op: dict[str, dict[str, int]] = {}
        for n in run.tree:
            by_op.setdefault(n.operator, {}).setdefault(n.status, 0)
            by_op[n.operator][n.status] += 1
        record["search"] = {"run_id": run.run_id, "stop": run.stop.rule, "nodes": len(nodes),
                            "seed_fitness": run.seed_fitness, "by_operator": by_op,
                            "tokens": sum(n.prompt_tokens + n.completion_tokens for n in run.tree),
                            # the harness's own wall over the search's evaluations: the rest of the search's
                            # time went to waiting for a harness server (other problems' jobs) and generation
                            "harness_s": round(sum(float((n.result.timings_s or {}).get("client_wall") or 0.0)
                                                   for n in nodes if n.result is not None), 3)}
        best = run.best
        pick = best if best is not None and best.passed else (run.seeds[0] if run.seeds else None)
        if pick is None or pick.result is None:
            record["diagnosis"] = f"search: no candidate evaluated ({run.stop.rule}: {run.stop.message})"
            return "failed"
        _fill_from_result(record, pick.result)
        record["schedule"] = _schedule(pick.source)
        if record["correct"] and pick.source:
            path = self.path / "kernels" / f"{safe_name(row.problem_id)}.py"
            path.write_text(pick.source, encoding="utf-8")
            record["best_kernel"] = str(path.relative_to(self.path))
        return "done"

    def _compile_baseline(self, row: ProblemRow, record: dict[str, Any], overrides: dict[str, Any]) -> None:
        from workbench.suites.baselines import compile_baseline

        got = compile_baseline(self, row.spec_path, overrides, self.cfg.search.device, self.cfg.prepare_timeout_s * 5)
        record["compile"] = got
        ratio = got.get("compile_over_eager")
        if ratio and record.get("baseline_us") and record.get("speedup"):
            # the harness's eager-based speedup, rescaled by compile/eager measured side by side in one
            # trusted process: both contenders of that ratio saw the same inputs, clock and GPU state
            record["compile_baseline_us"] = record["baseline_us"] * ratio
            record["speedup_vs_compile"] = record["speedup"] * ratio


def _is_tty(stream: Any) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False


def problem_line(record: dict[str, Any]) -> str:
    """One line for a finished problem: its verdict, speedups and evaluations, or its reason."""
    name = f"level{record.get('level')}/{record.get('name')}" if record.get("level") else str(record.get("name"))
    took = f"{record['wall_s']:.1f} s" if isinstance(record.get("wall_s"), (int, float)) else ""
    if record.get("correct"):
        vs_compile = record.get("speedup_vs_compile")
        compile_part = f", {vs_compile:.2f}x compile" if vs_compile else ""
        return (f"{name}: correct, {record.get('speedup', 0.0):.2f}x eager{compile_part}, "
                f"{record.get('evaluations', 0)} evaluations, {took}")
    why = str(record.get("diagnosis") or record.get("verdict") or "").splitlines()
    return f"{name}: {record.get('verdict', 'failed')}: {why[0][:160] if why else ''} ({took})"


def _fill_from_result(record: dict[str, Any], res: Any) -> None:
    record["verdict"] = res.status.value
    record["correct"] = bool(res.passed)
    record["fitness"] = float(res.fitness or 0.0)
    record["speedup"] = float(res.speedup or 0.0) if res.passed else 0.0
    record["runtime_us"] = res.runtime_us
    record["baseline_us"] = res.baseline_runtime_us
    record["diagnosis"] = "" if res.passed else res.summary()
    record["violations"] = list(res.violations)
    record["max_abs_err"] = res.max_abs_err
    # on a mismatch, eager's and the candidate's errors against the model in fp64 (harness/referee.py)
    record["referee"] = (res.details or {}).get("referee")
    # kernels one forward launches, from the GPU's captured graph (None on the CPU)
    record["kernels"] = ((res.details or {}).get("device") or {}).get("kernels_per_call")
    record["timings_s"] = {k: round(float(v), 4) for k, v in (res.timings_s or {}).items()
                           if isinstance(v, (int, float))}


def _schedule(source: str | None) -> dict[str, Any] | None:
    """The kernel's TUNABLES as chosen (block sizes, warps, stages, precision, schedule switches), or None."""
    from workbench.tunables import TunablesError, parse_tunables

    try:
        return dict(parse_tunables(source).current) if source else None
    except TunablesError:
        return None


def _seed_file(seed_dir: Path, row: ProblemRow) -> Path | None:
    for cand in (seed_dir / f"{row.name}.py", seed_dir / f"level{row.level}" / f"{row.name}.py",
                 seed_dir / f"{safe_name(row.problem_id)}.py"):
        if cand.is_file():
            return cand
    return None


def run_suite(cfg: SuiteConfig | None, problems: list[Problem] | None = None, *, run_dir: str | Path = "runs/suites",
              resume: str | None = None, progress: bool = True, retry_failed: bool = False,
              changes: dict[str, Any] | None = None, run_id: str | None = None) -> SuiteRun:
    """Run (or resume) a suite; writes `<run>/report.json`, `report.md`, `problems.csv` and the plots.

    A resumed run takes its stored config (`cfg` unused) with `changes`, flat field names of the suite or of
    its search settings, applied by `SuiteConfig.replace`: only `RESUMABLE` ones may differ from the stored.
    """
    from platforms.provenance import collect
    from workbench.suites.report import write_report

    if resume is not None:
        path = resolve_run(run_dir, resume)
        store = SuiteStore(path / STORE_NAME)
        stored = SuiteConfig.from_dict(store.meta("config") or {})
        changes = dict(changes or {})
        # the suite's own fields win: its `budget` is per problem, the search's stored one is unused
        current = {**stored.search.to_dict(), **stored.to_dict()}
        fixed = sorted(k for k, v in changes.items() if k not in RESUMABLE and current.get(k) != v)
        if fixed:
            raise SuiteError(f"{', '.join(fixed)} cannot change on resume (only {', '.join(RESUMABLE)})")
        cfg = stored.replace(**changes)  # exactly the fields the caller gave, on the stored config
        if retry_failed:
            store.reset([r.problem_id for r in store.problems() if r.status == "failed"])
    else:
        if cfg is None:
            raise SuiteError("a new suite run needs its SuiteConfig")
        cfg.validate()
        if not problems:
            raise SuiteError("the suite has no problems to run")
        path = Path(run_dir) / (run_id or new_run_id(cfg.suite))
        path.mkdir(parents=True, exist_ok=True)
        store = SuiteStore(path / STORE_NAME)
        store.set_meta("config", cfg.to_dict())
        store.set_meta("created_at", time.time())
        store.add_problems([ProblemRow(problem_id=p.problem_id, seq=i, level=p.level, name=p.name,
                                       spec_path=p.spec_path) for i, p in enumerate(problems)])
    cfg.validate()
    if cfg.search.device == "cuda":  # one lock folder for every process that times on this GPU (Ray's too)
        from platforms.clock import lock_path

        os.environ.setdefault("WB_CLOCK_DIR", str(lock_path("cuda").parent))
    store.set_meta("provenance", collect())  # again at the end; a killed run keeps this one
    runner = SuiteRunner(cfg, path, store, progress=progress)
    t0 = time.time()
    try:
        runner.run()
    finally:
        runner.close()
        # wall time of every session of this run, added up: the denominator of candidates per hour
        store.set_meta("wall_s", float(store.meta("wall_s", 0.0)) + time.time() - t0)
    store.set_meta("provenance", collect())
    report, files = write_report(path, store)
    store.close()
    return SuiteRun(run_id=path.name, path=path, report=report, files=files)
