"""SQLite's migration 2 on a file written by an older tinyjobs: the counters that its triggers
keep from then on start from the rows already there."""

from __future__ import annotations

import sqlite3

from tinyjobs.stores.sqlite import open as open_sqlite
from tinyjobs.stores.sqlite.connection import load_blocks, statements

T0 = 1_700_000_000.0


def test_migration_2_counts_the_jobs_and_executions_already_there(tmp_path):
    path = tmp_path / "old.db"
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE schema_version (version INTEGER NOT NULL)")
    for statement in statements(load_blocks("schema.sql", "migration")["1"]):
        conn.execute(statement)
    conn.execute("INSERT INTO schema_version (version) VALUES (1)")
    job = (
        "INSERT INTO jobs (id, task, queue, payload, due, state, max_attempts, attempt_budget, "
        "dedupe, keep, created_at) VALUES (?, 't', 'mail', '{}', ?, ?, 20, 20, 86400, 604800, ?)"
    )
    conn.execute(job, ("done-1", T0, "done", T0))
    conn.execute(job, ("wait-1", T0, "pending", T0 + 1))
    conn.execute(
        "INSERT INTO executions (job_seq, attempt, host, pid, started_at, ended_at, outcome, queue) "
        "VALUES (1, 1, 'h', 1, ?, ?, 'done', 'mail')",
        (T0, T0 + 2.5),
    )
    conn.commit()
    conn.close()

    store = open_sqlite(f"sqlite:///{path}")
    try:
        [stats] = store.queue_stats(now=T0 + 10)
        assert stats.counts == {"done": 1, "waiting": 1} and stats.oldest_due_at == T0
        [executions] = store.execution_stats([1, 2.5, 10], now=T0 + 10)
        assert (executions.count, executions.seconds, executions.buckets) == (1, 2.5, (0, 1, 1))
        since = T0 - T0 % 60 - 7 * 3600
        assert store.finished_series(since, 3600, now=T0 + 10) == [(since + 7 * 3600, "done", 1)]
        # From now on the triggers keep them: deleting a job takes it out of both.
        store.delete("done-1", now=T0 + 11)
        assert store.queue_stats(now=T0 + 11)[0].counts == {"waiting": 1}
        assert store.execution_stats([1], now=T0 + 11) == []
    finally:
        store.close()


def test_an_execution_inserted_already_ended_is_counted(tmp_path):
    store = open_sqlite(f"sqlite:///{tmp_path}/jobs.db")
    try:
        db = store._pool.get()
        with db:
            db.execute(
                "INSERT INTO executions (job_seq, attempt, host, pid, started_at, ended_at, outcome, queue) "
                "VALUES (1, 1, 'h', 1, ?, ?, 'done', 'q')",
                (T0, T0 + 0.25),
            )
        [stats] = store.execution_stats([0.25], now=T0 + 1)
        assert (stats.queue, stats.count, stats.buckets) == ("q", 1, (1,))
    finally:
        store.close()
