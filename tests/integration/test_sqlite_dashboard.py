"""SQLite's migration 2 on a file written by an older tinyjobs: the counters that its triggers
keep from then on start from the rows already there."""

from __future__ import annotations

import sqlite3

from tinyjobs.app import App
from tinyjobs.stores.base import Settlement
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


def test_migration_3_keeps_the_counts_of_a_version_2_file_and_enqueue_writes_none(tmp_path):
    """Migration 3 drops the per-insert triggers and browse indexes: a file written at version 2
    keeps its final-state counts, the live ones are counted on their indexes, and from then on
    an enqueue writes no row of job_counts and no index entry beyond the worker's own."""
    path = tmp_path / "v2.db"
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE schema_version (version INTEGER NOT NULL)")
    blocks = load_blocks("schema.sql", "migration")
    for version in ("1", "2"):
        for statement in statements(blocks[version]):
            conn.execute(statement)
        conn.execute("INSERT INTO schema_version (version) VALUES (?)", (int(version),))
    job = (
        "INSERT INTO jobs (id, task, queue, payload, due, state, max_attempts, attempt_budget, "
        "dedupe, keep, created_at) VALUES (?, 't', 'mail', '{}', ?, ?, 20, 20, 86400, 604800, ?)"
    )
    for i, state in enumerate(("done", "done", "failed", "cancelled", "pending", "blocked")):
        conn.execute(job, (f"{state}-{i}", T0, state, T0 + i))
    conn.commit()
    conn.close()

    store = open_sqlite(f"sqlite:///{path}")
    try:
        [stats] = store.queue_stats(now=T0 + 10)
        assert stats.counts == {"done": 2, "failed": 1, "cancelled": 1, "waiting": 1, "blocked": 1}
        db = store._pool.get()
        before = db.execute("SELECT queue, state, n FROM job_counts ORDER BY 1, 2").fetchall()
        app = App(f"sqlite:///{path}")
        try:
            app.enqueue_many([("t", {"n": n}) for n in range(5)], queue="mail")
            app.enqueue("t", {"n": 5}, queue="other")
        finally:
            app.close()
        assert db.execute("SELECT queue, state, n FROM job_counts ORDER BY 1, 2").fetchall() == before
        indexes = {
            name
            for (name,) in db.execute(
                "SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'jobs'"
            )
        }
        assert not {"jobs_browse", "jobs_browse_queue", "jobs_browse_rare"} & indexes
        counts = {q.name: q.counts for q in store.queue_stats()}
        assert counts["mail"]["waiting"] == 6 and counts["other"] == {"waiting": 1}
        # A job leaving a final state (retry) and one deleted leave the counts.
        assert store.retry("failed-2")
        store.delete("done-0")
        counts = {q.name: q.counts for q in store.queue_stats()}
        assert counts["mail"]["done"] == 1 and "failed" not in counts["mail"]
        assert counts["mail"]["waiting"] == 7
    finally:
        store.close()


def test_migration_4_keeps_counts_leases_and_rollups_of_a_version_3_file(tmp_path):
    """Migration 4 rewrites the count triggers and folds the four running-job indexes into
    one: a file written at version 3 keeps its counts, its running job's lease is still found
    by token (renew), by holder and by lease time (reap), and what happens next is counted."""
    path = tmp_path / "v3.db"
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE schema_version (version INTEGER NOT NULL)")
    blocks = load_blocks("schema.sql", "migration")
    for version in ("1", "2", "3"):
        for statement in statements(blocks[version]):
            conn.execute(statement)
        conn.execute("INSERT INTO schema_version (version) VALUES (?)", (int(version),))
    job = (
        "INSERT INTO jobs (id, task, queue, payload, due, state, max_attempts, attempt_budget, "
        "dedupe, keep, created_at) VALUES (?, 't', 'mail', '{}', ?, 'pending', 20, 20, 86400, 604800, ?)"
    )
    for i, name in enumerate(("done-0", "failed-1", "run-2", "run-3", "wait-4")):
        conn.execute(job, (name, T0, T0 + i))
    # Version 3's triggers count these moves.
    conn.execute("UPDATE jobs SET state = 'done', expires_at = ? WHERE id = 'done-0'", (T0 + 86400,))
    conn.execute("UPDATE jobs SET state = 'failed', expires_at = ? WHERE id = 'failed-1'", (T0 + 604800,))
    holder = "h|1|1"
    for name, lease in (("run-2", T0 + 60), ("run-3", T0 + 5)):
        conn.execute(
            "UPDATE jobs SET state = 'running', attempts = 1, started_at = ?, token = ?, "
            "lease_seconds = 60, lease_expires = ?, holder = ? WHERE id = ?",
            (T0, f"tok-{name}", lease, holder, name),
        )
        conn.execute(
            "INSERT INTO executions (job_seq, attempt, host, pid, started_at, queue) "
            "SELECT seq, 1, 'h', 1, ?, 'mail' FROM jobs WHERE id = ?",
            (T0, name),
        )
    conn.commit()
    conn.close()

    store = open_sqlite(f"sqlite:///{path}")
    try:
        db = store._pool.get()
        indexes = {n for (n,) in db.execute("SELECT name FROM sqlite_master WHERE type = 'index'")}
        assert "jobs_running" in indexes and not {"jobs_token", "jobs_holder", "jobs_lease"} & indexes
        plan = " ".join(
            r[3]
            for r in db.execute(
                "EXPLAIN QUERY PLAN SELECT seq FROM jobs WHERE token = 'x' AND state = 'running'"
            )
        )
        assert "USING INDEX jobs_running (token=?)" in plan
        [stats] = store.queue_stats(now=T0 + 10)
        assert stats.counts == {"done": 1, "failed": 1, "running": 2, "waiting": 1}
        assert stats.past_lease == 1  # run-3's lease ended at T0 + 5
        assert store.renew(["tok-run-2", "tok-gone"], now=T0 + 10) == {"tok-run-2": "ok", "tok-gone": "lost"}
        assert [h.id for h in store.holders("h")] == [holder]
        assert store.reap(now=T0 + 10) == 1  # run-3: waiting again, its execution ended
        assert store.settle([Settlement("run-2", "tok-run-2", "done")], now=T0 + 11) == [True]
        [stats] = store.queue_stats(now=T0 + 12)
        assert stats.counts == {"done": 2, "failed": 1, "waiting": 2}
        by_outcome = {e.outcome: e.count for e in store.execution_stats([1, 60], now=T0 + 12)}
        assert by_outcome == {"done": 1, "lease expired": 1}
    finally:
        store.close()
