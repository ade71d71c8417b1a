"""The SQLite store of one suite run: `<run>/suite.sqlite`, one row per problem.

WAL mode, each state change committed in its own transaction (the project's convention, see
`workbench.memory.store`): a SIGKILL at any moment loses at most the evaluation in flight, never a
finished row. A problem is `pending` until it starts, `running` while it runs, then `done` (it got a
verdict: passed, incorrect, rejected...) or `failed` (it could not be evaluated: the spec does not
load, no seed, a timeout while preparing). Resuming re-runs only `pending` and `running` rows.
"""
from __future__ import annotations

import json
import sqlite3
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

from workbench.sqlite_shared import connect_shared, retry_busy

SCHEMA_VERSION = 1
FINISHED = ("done", "failed")

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (
    key TEXT PRIMARY KEY,
    value TEXT NOT NULL
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS problems (
    problem_id TEXT PRIMARY KEY,     -- e.g. L1/19_ReLU or aten/abs/float32
    seq INTEGER NOT NULL,            -- order of the suite (reports list problems in it)
    level TEXT NOT NULL,             -- "1".."3" for KernelBench, the dtype for the ATen suite
    name TEXT NOT NULL,
    spec_path TEXT NOT NULL,
    status TEXT NOT NULL,            -- pending | running | done | failed
    attempts INTEGER NOT NULL DEFAULT 0,
    record_json TEXT,                -- the problem's result record (see docs/suites.md)
    started_at REAL,
    finished_at REAL
);
CREATE INDEX IF NOT EXISTS problems_status ON problems(status, seq);
CREATE TABLE IF NOT EXISTS baselines (
    key TEXT PRIMARY KEY,            -- spec digest, overrides, device, mode
    value_json TEXT NOT NULL
) WITHOUT ROWID;
"""


@dataclass
class ProblemRow:
    problem_id: str
    seq: int
    level: str
    name: str
    spec_path: str
    status: str = "pending"
    attempts: int = 0
    record: dict[str, Any] = field(default_factory=dict)
    started_at: float | None = None
    finished_at: float | None = None

    @property
    def finished(self) -> bool:
        return self.status in FINISHED


class SuiteStore:
    """Thread-safe (one connection behind a lock)."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.RLock()
        self._conn = connect_shared(self.path)
        retry_busy(self._create_schema, what=str(self.path))

    def _create_schema(self) -> None:
        with self._lock:
            version = self._conn.execute("PRAGMA user_version").fetchone()[0]
            if version > SCHEMA_VERSION:
                raise RuntimeError(f"{self.path}: suite store schema {version} is newer than this workbench")
            self._conn.executescript(_SCHEMA)
            self._conn.execute(f"PRAGMA user_version={SCHEMA_VERSION}")

    def _write(self, sql: str, params: tuple[Any, ...] = ()) -> None:
        with self._lock:
            self._conn.execute("BEGIN IMMEDIATE")
            try:
                self._conn.execute(sql, params)
                self._conn.execute("COMMIT")
            except BaseException:
                self._conn.execute("ROLLBACK")
                raise

    def close(self) -> None:
        with self._lock:
            self._conn.close()

    def __enter__(self) -> "SuiteStore":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- meta -----------------------------------------------------------------------------------
    def set_meta(self, key: str, value: Any) -> None:
        self._write("INSERT INTO meta VALUES (?, ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value",
                    (key, json.dumps(value, default=str)))

    def meta(self, key: str, default: Any = None) -> Any:
        with self._lock:
            row = self._conn.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return json.loads(row[0]) if row else default

    # -- problems -------------------------------------------------------------------------------
    def add_problems(self, rows: list[ProblemRow]) -> None:
        """Insert the suite's problems once (existing ids are left as they are)."""
        with self._lock:
            self._conn.execute("BEGIN IMMEDIATE")
            try:
                self._conn.executemany(
                    "INSERT OR IGNORE INTO problems(problem_id, seq, level, name, spec_path, status) "
                    "VALUES (?,?,?,?,?, 'pending')",
                    [(r.problem_id, r.seq, r.level, r.name, r.spec_path) for r in rows])
                self._conn.execute("COMMIT")
            except BaseException:
                self._conn.execute("ROLLBACK")
                raise

    def mark_running(self, problem_id: str) -> None:
        self._write("UPDATE problems SET status = 'running', attempts = attempts + 1, started_at = ? "
                    "WHERE problem_id = ?", (time.time(), problem_id))

    def finish(self, problem_id: str, status: str, record: dict[str, Any]) -> None:
        if status not in FINISHED:
            raise ValueError(f"finish() takes done or failed, got {status!r}")
        self._write("UPDATE problems SET status = ?, record_json = ?, finished_at = ? WHERE problem_id = ?",
                    (status, json.dumps(record, default=str), time.time(), problem_id))

    def reset(self, problem_ids: list[str]) -> None:
        """Back to pending (a resume that retries failed problems)."""
        for pid in problem_ids:
            self._write("UPDATE problems SET status = 'pending' WHERE problem_id = ?", (pid,))

    def problems(self) -> list[ProblemRow]:
        with self._lock:
            rows = self._conn.execute("SELECT * FROM problems ORDER BY seq").fetchall()
        return [_row(r) for r in rows]

    def __iter__(self) -> Iterator[ProblemRow]:
        return iter(self.problems())

    def counts(self) -> dict[str, int]:
        with self._lock:
            rows = self._conn.execute("SELECT status, COUNT(*) FROM problems GROUP BY status").fetchall()
        return {r[0]: r[1] for r in rows}

    # -- baseline cache (torch.compile times per problem and shape) -----------------------------
    def baseline(self, key: str) -> dict[str, Any] | None:
        with self._lock:
            row = self._conn.execute("SELECT value_json FROM baselines WHERE key = ?", (key,)).fetchone()
        return json.loads(row[0]) if row else None

    def put_baseline(self, key: str, value: dict[str, Any]) -> None:
        self._write("INSERT OR REPLACE INTO baselines VALUES (?, ?)", (key, json.dumps(value)))


def _row(r: sqlite3.Row) -> ProblemRow:
    return ProblemRow(problem_id=r["problem_id"], seq=r["seq"], level=r["level"], name=r["name"],
                      spec_path=r["spec_path"], status=r["status"], attempts=r["attempts"],
                      record=json.loads(r["record_json"]) if r["record_json"] else {},
                      started_at=r["started_at"], finished_at=r["finished_at"])
