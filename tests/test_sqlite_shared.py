"""Shared SQLite files: a busy answer SQLite gives without waiting is retried, anything else is not."""

import sqlite3
import threading

import pytest

from workbench.memory.store import Memory
from workbench.sqlite_shared import connect_shared, retry_busy
from workbench.suites.store import SuiteStore


def test_busy_is_retried_until_it_clears():
    calls = []

    def step():
        calls.append(1)
        if len(calls) < 3:
            raise sqlite3.OperationalError("database is locked")
        return "ok"

    assert retry_busy(step, deadline_s=5) == "ok"
    assert len(calls) == 3


def test_other_errors_and_a_spent_deadline_raise():
    def broken():
        raise sqlite3.OperationalError("no such table: nodes")

    with pytest.raises(sqlite3.OperationalError, match="no such table"):
        retry_busy(broken, deadline_s=5)

    def always_busy():
        raise sqlite3.OperationalError("database is locked")

    with pytest.raises(sqlite3.OperationalError, match="locked"):
        retry_busy(always_busy, deadline_s=0.2)


def test_switching_to_wal_waits_for_a_writer(tmp_path):
    # a rollback-journal file held EXCLUSIVE: the switch to WAL must wait for it, not fail
    path = tmp_path / "held.sqlite"
    holder = sqlite3.connect(str(path), isolation_level=None, check_same_thread=False)
    holder.execute("CREATE TABLE t (x)")
    holder.execute("BEGIN EXCLUSIVE")
    holder.execute("INSERT INTO t VALUES (1)")
    release = threading.Timer(0.5, lambda: holder.execute("COMMIT"))
    release.start()
    conn = connect_shared(path)
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    release.join()
    conn.close()
    holder.close()


@pytest.mark.parametrize("rep", range(3))
def test_many_threads_open_one_memory_and_one_store(tmp_path, rep):
    errors: list[str] = []
    barrier = threading.Barrier(12)

    def open_both(i: int) -> None:
        barrier.wait()
        try:
            mem = Memory(tmp_path / "memory.sqlite")
            store = SuiteStore(tmp_path / "suite.sqlite")
            store.close()
            del mem
        except Exception as exc:  # noqa: BLE001 - the test reports every thread's failure
            errors.append(f"{i}: {exc!r}")

    threads = [threading.Thread(target=open_both, args=(i,)) for i in range(12)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
