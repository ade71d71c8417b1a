"""SQLite (WAL) context memory: every node of every run, reused across sessions.

Crash safety: each node is committed in its own transaction the moment it is created and again
when it is evaluated. With WAL and `synchronous=NORMAL` a committed transaction survives the death
of the process (SIGKILL) at any moment; only a power cut can lose the last commits
(`durable=True` selects `synchronous=FULL` for that case, at a cost per commit).

Texts (sources, prompts, responses, result records) are stored once each, by content hash, in
`blobs`; the `nodes` table holds metadata only, so the metadata queries (best node for a spec, top-k,
failures by class) touch small rows through covering indexes. Failure counts per
(spec, platform, class) are kept by triggers, so that query is one index range whatever the size.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import sqlite3
import threading
import zlib
from pathlib import Path
from typing import Any, Iterable

from workbench.memory.records import Node, RunInfo, content_hash
from workbench.result import EvalResult
from workbench.sqlite_shared import connect_shared, retry_busy

log = logging.getLogger(__name__)

SCHEMA_VERSION = 1

_SCHEMA = """
CREATE TABLE IF NOT EXISTS runs (
    run_id TEXT PRIMARY KEY,
    spec_key TEXT NOT NULL,
    spec_path TEXT NOT NULL,
    platform TEXT NOT NULL,
    policy TEXT NOT NULL,
    config_json TEXT NOT NULL,
    created_at REAL NOT NULL,
    status TEXT NOT NULL,
    stop_rule TEXT,
    stop_message TEXT
);
CREATE INDEX IF NOT EXISTS runs_spec ON runs(spec_key, created_at);

CREATE TABLE IF NOT EXISTS blobs (
    hash TEXT PRIMARY KEY,
    data BLOB NOT NULL           -- zlib-compressed UTF-8
) WITHOUT ROWID;

CREATE TABLE IF NOT EXISTS nodes (
    id TEXT PRIMARY KEY,
    run_id TEXT NOT NULL,
    seq INTEGER NOT NULL,
    spec_key TEXT NOT NULL,
    platform TEXT NOT NULL,
    operator TEXT NOT NULL,
    parents_json TEXT NOT NULL,
    status TEXT NOT NULL,
    error_class TEXT,
    fitness REAL NOT NULL,
    speedup REAL NOT NULL,
    runtime_us REAL,
    source_hash TEXT,
    prompt_hash TEXT,
    response_hash TEXT,
    result_hash TEXT,
    diagnosis TEXT NOT NULL,
    prompt_tokens INTEGER NOT NULL,
    completion_tokens INTEGER NOT NULL,
    island INTEGER,
    created_at REAL NOT NULL,
    evaluated_at REAL,
    meta_json TEXT NOT NULL
);
CREATE UNIQUE INDEX IF NOT EXISTS nodes_run_seq ON nodes(run_id, seq);
CREATE INDEX IF NOT EXISTS nodes_best ON nodes(spec_key, platform, fitness DESC);
CREATE INDEX IF NOT EXISTS nodes_best_any ON nodes(spec_key, fitness DESC);
CREATE INDEX IF NOT EXISTS nodes_fitness ON nodes(fitness DESC);
CREATE INDEX IF NOT EXISTS nodes_failures ON nodes(spec_key, error_class, created_at)
    WHERE error_class IS NOT NULL;
CREATE INDEX IF NOT EXISTS nodes_failures_recent ON nodes(spec_key, created_at)
    WHERE error_class IS NOT NULL;

CREATE TABLE IF NOT EXISTS failure_counts (
    spec_key TEXT NOT NULL,
    platform TEXT NOT NULL,
    error_class TEXT NOT NULL,
    n INTEGER NOT NULL,
    PRIMARY KEY (spec_key, platform, error_class)
) WITHOUT ROWID;

CREATE TRIGGER IF NOT EXISTS nodes_fail_ins AFTER INSERT ON nodes WHEN NEW.error_class IS NOT NULL
BEGIN
    INSERT INTO failure_counts VALUES (NEW.spec_key, NEW.platform, NEW.error_class, 1)
    ON CONFLICT(spec_key, platform, error_class) DO UPDATE SET n = n + 1;
END;
CREATE TRIGGER IF NOT EXISTS nodes_fail_upd AFTER UPDATE OF error_class ON nodes
    WHEN NEW.error_class IS NOT OLD.error_class
BEGIN
    UPDATE failure_counts SET n = n - 1 WHERE OLD.error_class IS NOT NULL
        AND spec_key = OLD.spec_key AND platform = OLD.platform AND error_class = OLD.error_class;
    INSERT INTO failure_counts SELECT NEW.spec_key, NEW.platform, NEW.error_class, 1
        WHERE NEW.error_class IS NOT NULL
    ON CONFLICT(spec_key, platform, error_class) DO UPDATE SET n = n + 1;
END;
"""

_NODE_COLS = (
    "id, run_id, seq, spec_key, platform, operator, parents_json, status, error_class, fitness, "
    "speedup, runtime_us, source_hash, prompt_hash, response_hash, result_hash, diagnosis, "
    "prompt_tokens, completion_tokens, island, created_at, evaluated_at, meta_json"
)


class Memory:
    """The context memory. Thread-safe (one connection behind a lock); one file, many processes."""

    def __init__(self, path: str | Path, *, durable: bool = False) -> None:
        self.path = Path(path)
        if str(path) != ":memory:":
            self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.RLock()
        self._known: set[str] = set()  # blob hashes this process wrote (texts repeat across nodes)
        self._conn = connect_shared(path, synchronous="FULL" if durable else "NORMAL")
        self._conn.execute("PRAGMA foreign_keys=OFF")
        retry_busy(self._create_schema, what=str(path))

    # -- plumbing -----------------------------------------------------------------------------
    def _create_schema(self) -> None:
        with self._lock:
            version = self._conn.execute("PRAGMA user_version").fetchone()[0]
            if version > SCHEMA_VERSION:
                raise RuntimeError(
                    f"{self.path}: memory schema {version} is newer than this workbench "
                    f"({SCHEMA_VERSION}); upgrade the workbench"
                )
            self._conn.executescript(_SCHEMA)
            self._conn.execute(f"PRAGMA user_version={SCHEMA_VERSION}")

    class _Tx:
        def __init__(self, mem: "Memory") -> None:
            self.mem = mem

        def __enter__(self) -> sqlite3.Connection:
            self.mem._lock.acquire()
            self.mem._conn.execute("BEGIN IMMEDIATE")
            return self.mem._conn

        def __exit__(self, exc_type: Any, *rest: Any) -> None:
            try:
                self.mem._conn.execute("COMMIT" if exc_type is None else "ROLLBACK")
            finally:
                self.mem._lock.release()

    def _tx(self) -> "Memory._Tx":
        return Memory._Tx(self)

    def close(self) -> None:
        with self._lock:
            self._conn.close()

    def __enter__(self) -> "Memory":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _put_text(self, conn: sqlite3.Connection, text: str | None) -> str | None:
        if text is None:
            return None
        h = content_hash(text)
        if h in self._known:  # stored by this process already: skip the compression and the write
            return h
        conn.execute(
            "INSERT OR IGNORE INTO blobs(hash, data) VALUES (?, ?)",
            (h, zlib.compress(text.encode("utf-8"), 1)),
        )
        if len(self._known) > 200_000:
            self._known.clear()
        self._known.add(h)
        return h

    def text(self, h: str | None) -> str | None:
        """The text stored under a content hash (None for None)."""
        if h is None:
            return None
        with self._lock:
            row = self._conn.execute("SELECT data FROM blobs WHERE hash = ?", (h,)).fetchone()
        return zlib.decompress(row[0]).decode("utf-8") if row else None

    # -- runs ---------------------------------------------------------------------------------
    def start_run(self, run: RunInfo) -> None:
        with self._tx() as c:
            c.execute(
                "INSERT INTO runs VALUES (?,?,?,?,?,?,?,?,?,?)",
                (
                    run.run_id,
                    run.spec_key,
                    run.spec_path,
                    run.platform,
                    run.policy,
                    json.dumps(run.config, sort_keys=True, default=str),
                    run.created_at,
                    run.status,
                    run.stop_rule,
                    run.stop_message,
                ),
            )

    def finish_run(
        self, run_id: str, *, status: str, stop_rule: str | None, stop_message: str | None
    ) -> None:
        with self._tx() as c:
            c.execute(
                "UPDATE runs SET status = ?, stop_rule = ?, stop_message = ? WHERE run_id = ?",
                (status, stop_rule, stop_message, run_id),
            )

    def mark_running(self, run_id: str) -> None:
        with self._tx() as c:
            c.execute("UPDATE runs SET status = 'running' WHERE run_id = ?", (run_id,))

    def get_run(self, run_id: str) -> RunInfo | None:
        with self._lock:
            row = self._conn.execute("SELECT * FROM runs WHERE run_id = ?", (run_id,)).fetchone()
        return _run_from_row(row) if row else None

    def runs(self, spec_key: str | None = None) -> list[RunInfo]:
        sql, args = "SELECT * FROM runs", ()
        if spec_key is not None:
            sql, args = sql + " WHERE spec_key = ?", (spec_key,)
        with self._lock:
            rows = self._conn.execute(sql + " ORDER BY created_at", args).fetchall()
        return [_run_from_row(r) for r in rows]

    # -- nodes --------------------------------------------------------------------------------
    def _node_values(self, c: sqlite3.Connection, n: Node) -> tuple[Any, ...]:
        result_text = _result_json(n.result) if n.result is not None else None
        return (
            n.id,
            n.run_id,
            n.seq,
            n.spec_key,
            n.platform,
            n.operator,
            json.dumps(n.parents),
            n.status,
            n.error_class,
            float(n.fitness),
            float(n.speedup),
            n.runtime_us,
            self._put_text(c, n.source),
            self._put_text(c, n.prompt),
            self._put_text(c, n.response),
            self._put_text(c, result_text),
            n.diagnosis,
            int(n.prompt_tokens),
            int(n.completion_tokens),
            n.island,
            n.created_at,
            n.evaluated_at,
            json.dumps(n.meta, sort_keys=True, default=str),
        )

    def save_node(self, node: Node) -> None:
        """Insert or update one node, committed before returning (the crash-safety unit)."""
        with self._tx() as c:
            self._upsert(c, node)

    def save_nodes(self, nodes: Iterable[Node]) -> int:
        """Many nodes in one transaction (imports, benchmarks). Returns how many."""
        k = 0
        with self._tx() as c:
            for n in nodes:
                self._upsert(c, n)
                k += 1
        return k

    def _upsert(self, c: sqlite3.Connection, n: Node) -> None:
        vals = self._node_values(c, n)
        cols = [s.strip() for s in _NODE_COLS.split(",")]
        updates = ", ".join(f"{k} = excluded.{k}" for k in cols if k != "id")
        c.execute(
            f"INSERT INTO nodes ({_NODE_COLS}) VALUES ({','.join('?' * len(vals))}) "
            f"ON CONFLICT(id) DO UPDATE SET {updates}",
            vals,
        )

    def get_node(self, node_id: str, *, with_text: bool = True) -> Node | None:
        with self._lock:
            row = self._conn.execute(f"SELECT {_NODE_COLS} FROM nodes WHERE id = ?", (node_id,)).fetchone()
        return self._node_from_row(row, with_text) if row else None

    def run_history(self, run_id: str, *, with_text: bool = True) -> list[Node]:
        """Every node of a run, in creation order."""
        with self._lock:
            rows = self._conn.execute(
                f"SELECT {_NODE_COLS} FROM nodes WHERE run_id = ? ORDER BY seq", (run_id,)
            ).fetchall()
        return [self._node_from_row(r, with_text) for r in rows]

    def best_node(self, spec_key: str, platform: str | None = None, *, with_text: bool = True) -> Node | None:
        """The fittest passing node ever recorded for a spec (on one platform, or any)."""
        nodes = self.top_k(spec_key, platform, k=1, with_text=with_text)
        return nodes[0] if nodes else None

    def top_k(
        self,
        spec_key: str | None = None,
        platform: str | None = None,
        k: int = 10,
        *,
        with_text: bool | str = False,
        exclude_run: str | None = None,
    ) -> list[Node]:
        """The k fittest passing nodes, optionally for one spec and platform (fitness descending)."""
        where, args = ["fitness > 0"], []
        if spec_key is not None:
            where.append("spec_key = ?")
            args.append(spec_key)
        if platform is not None:
            where.append("platform = ?")
            args.append(platform)
        if exclude_run is not None:
            where.append("run_id != ?")
            args.append(exclude_run)
        sql = (
            f"SELECT {_NODE_COLS} FROM nodes WHERE {' AND '.join(where)} "
            f"ORDER BY fitness DESC, created_at LIMIT ?"
        )
        with self._lock:
            rows = self._conn.execute(sql, (*args, int(k))).fetchall()
        return [self._node_from_row(r, with_text) for r in rows]

    def failures_by_class(self, spec_key: str, platform: str | None = None) -> dict[str, int]:
        """How many nodes failed, by failure class (harness status or generation failure kind)."""
        sql = "SELECT error_class, SUM(n) FROM failure_counts WHERE spec_key = ?"
        args: list[Any] = [spec_key]
        if platform is not None:
            sql += " AND platform = ?"
            args.append(platform)
        with self._lock:
            rows = self._conn.execute(sql + " GROUP BY error_class", args).fetchall()
        return {r[0]: int(r[1]) for r in rows if r[1]}

    def failures(
        self, spec_key: str, error_class: str | None = None, *, limit: int = 10, with_text: bool = False
    ) -> list[Node]:
        """The most recent failed nodes of a spec (of one class, or any)."""
        sql = f"SELECT {_NODE_COLS} FROM nodes WHERE spec_key = ? AND error_class IS NOT NULL"
        args: list[Any] = [spec_key]
        if error_class is not None:
            sql += " AND error_class = ?"
            args.append(error_class)
        with self._lock:
            rows = self._conn.execute(
                sql + " ORDER BY created_at DESC LIMIT ?", (*args, int(limit))
            ).fetchall()
        return [self._node_from_row(r, with_text) for r in rows]

    def past_attempts(
        self,
        spec_key: str,
        platform: str | None = None,
        *,
        k: int = 3,
        n_failures: int = 3,
        exclude_ids: Iterable[str] = (),
    ) -> tuple[list[Node], list[Node]]:
        """What the operator shows the model: the best passing attempts and recent distinct failures.

        Failures are deduplicated by diagnosis so the prompt shows different mistakes, not one ten times.
        """
        skip = set(exclude_ids)
        best = [
            n for n in self.top_k(spec_key, platform, k=k + len(skip), with_text="source") if n.id not in skip
        ][:k]
        seen: set[str] = set()
        fails: list[Node] = []
        for n in self.failures(spec_key, limit=8 * n_failures, with_text=False):
            key = (n.diagnosis or n.error_class or "")[:200]
            if n.id in skip or key in seen:
                continue
            seen.add(key)
            fails.append(n)
            if len(fails) >= n_failures:
                break
        return best, fails

    def count_nodes(self, run_id: str | None = None) -> int:
        with self._lock:
            if run_id is None:
                return int(self._conn.execute("SELECT COUNT(*) FROM nodes").fetchone()[0])
            return int(
                self._conn.execute("SELECT COUNT(*) FROM nodes WHERE run_id = ?", (run_id,)).fetchone()[0]
            )

    def _node_from_row(self, row: sqlite3.Row, with_text: bool | str) -> Node:
        """`with_text`: True (every text), False (metadata only) or "source" (the code alone)."""
        src_only = with_text == "source"
        result = None
        if with_text and not src_only and row["result_hash"]:
            result = EvalResult.from_dict(json.loads(self.text(row["result_hash"]) or "{}"))
        node = Node(
            run_id=row["run_id"],
            spec_key=row["spec_key"],
            operator=row["operator"],
            parents=json.loads(row["parents_json"]),
            source=self.text(row["source_hash"]) if with_text else None,
            prompt=self.text(row["prompt_hash"]) if with_text and not src_only else None,
            response=self.text(row["response_hash"]) if with_text and not src_only else None,
            status=row["status"],
            error_class=row["error_class"],
            fitness=row["fitness"],
            speedup=row["speedup"],
            runtime_us=row["runtime_us"],
            result=result,
            diagnosis=row["diagnosis"],
            platform=row["platform"],
            prompt_tokens=row["prompt_tokens"],
            completion_tokens=row["completion_tokens"],
            island=row["island"],
            seq=row["seq"],
            created_at=row["created_at"],
            evaluated_at=row["evaluated_at"],
            meta=json.loads(row["meta_json"]),
            id=row["id"],
        )
        return node


_RESULT_FIELDS = tuple(f.name for f in dataclasses.fields(EvalResult))


def _result_json(r: EvalResult) -> str:
    # EvalResult holds only JSON types; dataclasses.asdict's deep copy was half the insert time
    d = {k: getattr(r, k) for k in _RESULT_FIELDS}
    d["status"] = r.status.value
    return json.dumps(d, default=str)


def _run_from_row(row: sqlite3.Row) -> RunInfo:
    return RunInfo(
        run_id=row["run_id"],
        spec_key=row["spec_key"],
        spec_path=row["spec_path"],
        platform=row["platform"],
        policy=row["policy"],
        config=json.loads(row["config_json"]),
        created_at=row["created_at"],
        status=row["status"],
        stop_rule=row["stop_rule"],
        stop_message=row["stop_message"],
    )


def default_memory_path(run_dir: str | Path = "runs") -> Path:
    """Where `workbench optimize` keeps its memory: one file per run directory, shared by runs."""
    return Path(run_dir) / "memory.sqlite"
