"""PostgreSQL writes an attempt's execution row once, when the attempt ends (migration 6): while
it runs the job's row describes it. What the contracts cannot see from outside: no row at the
claim, the host and pid read back from the holder, the upgrade of attempts running under an
older version (their open rows), and an older worker's open row ended by end_leases."""

from __future__ import annotations

import psycopg
from psycopg import sql
from support.postgres_fixtures import postgres_schema_url

from tinyjobs.holder import Holder
from tinyjobs.stores.base import NewJob, QueuePolicy, Settlement
from tinyjobs.stores.postgres import open as open_postgres

T0 = 1_700_000_000.0
ON = {"default": QueuePolicy("default", lease=30)}


def _rows(url: str, store, where: str = "TRUE") -> list[tuple]:
    table = sql.Identifier(store.schema, "executions")
    query = sql.SQL("SELECT job_id, attempt, host, pid, started_at, ended_at, outcome FROM {} WHERE ")
    with psycopg.connect(url) as conn:
        return conn.execute(query.format(table) + sql.SQL(where) + sql.SQL(" ORDER BY id")).fetchall()


def _open_row(url: str, store, job_id: str, holder: Holder, attempt: int, started_at: float) -> None:
    """The open execution row an older tinyjobs wrote at its claim."""
    table = sql.Identifier(store.schema, "executions")
    with psycopg.connect(url) as conn:
        conn.execute(
            sql.SQL(
                "INSERT INTO {} (job_id, queue, grp, attempt, host, pid, started_at) "
                "VALUES (%s, 'default', NULL, %s, %s, %s, %s)"
            ).format(table),
            (job_id, attempt, holder.hostname, holder.pid, started_at),
        )


def test_the_claim_writes_no_row_and_get_reads_the_running_attempt_from_the_job(postgres_store, postgres_url):
    store = postgres_store
    store.enqueue([NewJob(id="a", task="t"), NewJob(id="b", task="t")], now=T0)
    usual, odd = Holder("box/boot-id", 4242, 7), Holder("we|ird", 5, 6)  # hostname "we|ird"
    [a] = store.claim(ON, usual, 1, now=T0)
    [b] = store.claim(ON, odd, 1, now=T0 + 1)
    assert _rows(postgres_url, store) == []
    running = store.get("a", now=T0 + 1, executions=True).executions
    assert [(e.attempt, e.host, e.pid, e.started_at, e.ended_at, e.outcome) for e in running] == [
        (1, "box", 4242, T0, None, None)
    ]
    [other] = store.get("b", now=T0 + 1, executions=True).executions
    assert (other.host, other.pid) == ("we|ird", 5)
    ends = [Settlement("a", a.token, "done"), Settlement("b", b.token, "retry", error="e")]
    assert store.settle(ends, now=T0 + 2) == [True, True]
    assert sorted(_rows(postgres_url, store)) == [
        ("a", 1, "box", 4242, T0, T0 + 2, "done"),
        ("b", 1, "we|ird", 5, T0 + 1, T0 + 2, "error"),
    ]
    [again] = store.claim(ON, usual, 1, now=T0 + 3)
    both = store.get("b", now=T0 + 3, executions=True).executions
    assert [(e.attempt, e.pid, e.outcome) for e in both] == [(1, 5, "error"), (2, 4242, None)]


def test_a_snoozed_attempt_is_recorded_under_the_number_it_ran_as(postgres_store, postgres_url):
    store = postgres_store
    store.enqueue([NewJob(id="a", task="t")], now=T0)
    by = Holder("box/b", 1, 1)
    [a] = store.claim(ON, by, 1, now=T0)
    assert store.settle([Settlement("a", a.token, "snooze", delay=0)], now=T0 + 1)
    assert store.get("a", now=T0 + 1).attempts == 0
    [a] = store.claim(ON, by, 1, now=T0 + 2)
    assert store.settle([Settlement("a", a.token, "handback")], now=T0 + 3)
    assert [(r[1], r[6]) for r in _rows(postgres_url, store)] == [(1, "snoozed"), (1, "handed back")]


def test_migration_6_hands_the_running_attempts_open_rows_to_their_jobs(postgres_store, postgres_url):
    """A schema at version 5 with attempts running, each with its open execution row: after
    migration 6 each is on record once while it runs, and once when it ends, counted once."""
    store = postgres_store
    store.enqueue([NewJob(id="a", task="t"), NewJob(id="b", task="t"), NewJob(id="c", task="t")], now=T0)
    by = Holder("box/b", 9, 1)
    claimed = {c.job.id: c for c in store.claim(ON, by, 3, now=T0)}
    assert store.settle([Settlement("c", claimed["c"].token, "done")], now=T0 + 1)
    for job_id in ("a", "b"):  # what a version 5 claim wrote
        _open_row(postgres_url, store, job_id, by, 1, T0)
    schema = store.schema
    store.close()
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        # Back to version 5: migration 6 and every later one apply again at the next open.
        migrations = sql.Identifier(schema, "migrations")
        conn.execute(sql.SQL("DELETE FROM {} WHERE version >= 6").format(migrations))
    again = open_postgres(postgres_schema_url(postgres_url, schema))
    try:
        assert _rows(postgres_url, again, "ended_at IS NULL") == []
        [running] = again.get("a", now=T0 + 2, executions=True).executions
        assert (running.attempt, running.host, running.pid, running.outcome) == (1, "box", 9, None)
        assert again.settle([Settlement("a", claimed["a"].token, "done")], now=T0 + 2)
        assert again.reap(now=T0 + 40) == 1  # b's lease
        assert sorted((r[0], r[6]) for r in _rows(postgres_url, again)) == [
            ("a", "done"),
            ("b", "lease expired"),
            ("c", "done"),
        ]
        stats = again.execution_stats([1], now=T0 + 40)
        assert sorted((s.outcome, s.count) for s in stats) == [("done", 2), ("lease expired", 1)]
    finally:
        again.close()


def test_end_leases_ends_the_open_row_of_an_older_workers_claim(postgres_store, postgres_url):
    """A rolling upgrade: a worker of an older version still claims with an open row; the
    reaper of this version ends that row instead of writing a second one, and `get` lists the
    attempt once meanwhile."""
    store = postgres_store
    store.enqueue([NewJob(id="a", task="t"), NewJob(id="b", task="t")], now=T0)
    old, new = Holder("old/b", 1, 1), Holder("new/b", 2, 1)
    store.claim(ON, old, 1, now=T0)
    _open_row(postgres_url, store, "a", old, 1, T0)
    store.claim(ON, new, 1, now=T0)
    [running] = store.get("a", now=T0 + 1, executions=True).executions
    assert (running.host, running.pid, running.ended_at) == ("old", 1, None)
    assert store.end_leases([old, new], now=T0 + 5) == 2
    assert sorted((r[0], r[2], r[5], r[6]) for r in _rows(postgres_url, store)) == [
        ("a", "old", T0 + 5, "worker lost"),
        ("b", "new", T0 + 5, "worker lost"),
    ]
    [stats] = store.execution_stats([10], now=T0 + 5)
    assert (stats.outcome, stats.count) == ("worker lost", 2)
