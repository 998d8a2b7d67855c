"""PostgreSQL's queue_stats past EXACT_ROWS: the live states still exact, the final states
estimated from a page sample and flagged `estimated`; the pause lock (LIM-04) that makes a
claim in flight finish before pause returns; and the execution counters of migration 5 (its
backfill, purge's sweep)."""

from __future__ import annotations

import threading

import psycopg
from psycopg import sql
from support.postgres_fixtures import postgres_schema_url

from tinyjobs.holder import Holder
from tinyjobs.stores.base import NewJob, QueuePolicy, Settlement
from tinyjobs.stores.postgres import open as open_postgres
from tinyjobs.stores.postgres import views

T0 = 1_700_000_000.0


def _fill(store) -> None:
    store.enqueue([NewJob(id=f"j{i}", task="t") for i in range(40)], now=T0)
    store.enqueue([NewJob(id="later", task="t", delay=100)], now=T0)
    claimed = store.claim({"default": QueuePolicy("default")}, Holder("h/b", 1, 1), 30, now=T0)
    outcomes = ["done"] * 25 + ["fail"] * 5
    store.settle(
        [Settlement(c.job.id, c.token, o, error="x") for c, o in zip(claimed[:30], outcomes, strict=True)],
        now=T0 + 1,
    )


def _analyze(url: str, schema: str) -> None:
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(sql.SQL("ANALYZE {}").format(sql.Identifier(schema, "jobs")))


def test_queue_stats_estimates_the_final_states_of_a_large_table(postgres_store, postgres_url, monkeypatch):
    _fill(postgres_store)
    exact = postgres_store.queue_stats(now=T0 + 2)
    assert [(s.counts, s.estimated) for s in exact] == [
        ({"waiting": 10, "scheduled": 1, "done": 25, "failed": 5}, False)
    ]
    _analyze(postgres_url, postgres_store.schema)
    # Past EXACT_ROWS: sampled. Every page sampled here, so the estimate equals the truth.
    monkeypatch.setattr(views, "EXACT_ROWS", 10)
    monkeypatch.setattr(views, "SAMPLE_ROWS", 10**9)
    [stats] = postgres_store.queue_stats(now=T0 + 2)
    assert stats.estimated and stats.counts == exact[0].counts and stats.oldest_due_at == T0


def test_lim04_pause_waits_for_a_claim_in_flight(postgres_store):
    """A claim transaction that holds the shared pause lock (it has started) delays pause
    until it commits: the claim is ordered before the pause, never after it."""
    postgres_store.enqueue([NewJob(id="a", task="t", queue="mail")], now=T0)
    store = postgres_store
    paused = threading.Event()
    with store._conns.connect(autocommit=False) as conn:  # a claim in flight: its lock taken
        conn.execute(store.q["pause_lock"], {"schema": store.schema, "queues": ["mail"]})
        thread = threading.Thread(target=lambda: (store.pause("mail"), paused.set()))
        thread.start()
        assert not paused.wait(1.0), "pause returned while a claim was in flight"
        conn.commit()
    thread.join(10)
    assert paused.is_set() and store.paused() == {"mail"}
    assert store.claim({"mail": QueuePolicy("mail")}, Holder("h/b", 1, 1), 5, now=T0) == []


def _count(url: str, query: str) -> int:
    with psycopg.connect(url) as conn:
        row = conn.execute(query).fetchone()
        assert row is not None
        return int(row[0])


def test_migration_5_backfills_the_counters_from_the_executions(postgres_store, postgres_url):
    """A schema at version 4 with executions on record: migration 5 counts them into
    exec_stats and exec_minutes, and execution_stats and finished_series read the same after."""
    _fill(postgres_store)
    since = T0 - T0 % 60 - 3600
    stats = postgres_store.execution_stats([0.5, 1, 2], now=T0 + 2)
    series = postgres_store.finished_series(since, 60, now=T0 + 2)
    assert [(s.outcome, s.count) for s in stats] == [("done", 25), ("failed", 5)] and series
    schema = postgres_store.schema
    postgres_store.close()
    with psycopg.connect(postgres_url, autocommit=True) as conn:  # back to version 4
        for table in ("exec_stats", "exec_minutes"):
            conn.execute(sql.SQL("DROP TABLE {}").format(sql.Identifier(schema, table)))
        versions = sql.Identifier(schema, "migrations")  # 5 and every later one
        conn.execute(sql.SQL("DELETE FROM {} WHERE version >= 5").format(versions))
    again = open_postgres(postgres_schema_url(postgres_url, schema))
    try:
        assert again.execution_stats([0.5, 1, 2], now=T0 + 2) == stats
        assert again.finished_series(since, 60, now=T0 + 2) == series
    finally:
        again.close()


def test_purge_sweeps_the_minute_counters_it_emptied_and_keeps_the_others(postgres_store, postgres_url):
    store = postgres_store
    store.enqueue([NewJob(id="x", task="t"), NewJob(id="y", task="t")], now=T0)
    by = Holder("h/b", 1, 1)
    on = {"default": QueuePolicy("default")}
    first = store.claim(on, by, 2, now=T0)
    store.settle([Settlement(c.job.id, c.token, "retry", error="e") for c in first], now=T0 + 1)
    [x] = store.claim(on, by, 1, now=T0 + 2)
    assert x.job.id == "x"
    store.settle([Settlement("x", x.token, "fail", error="e")], now=T0 + 3)
    since = T0 - T0 % 60
    assert store.finished_series(since, 60, now=T0 + 3) == [(since, "error", 2), (since, "failed", 1)]
    assert store.purge(now=T0 + 400 * 86400) == 1  # x, with its two executions; y waits
    # y's "error" execution shares its (minute, outcome) with one purged: that row stays (read
    # from the counters: its minute is whole before `now`).
    assert store.finished_series(since, 60, now=T0 + 400 * 86400) == [(since, "error", 1)]
    minutes = sql.Identifier(store.schema, "exec_minutes").as_string(None)
    assert _count(postgres_url, f"SELECT count(*) FROM {minutes} WHERE outcome = 'failed'") == 0
    empty = f"SELECT count(*) FROM (SELECT 1 FROM {minutes} GROUP BY minute, outcome HAVING sum(n) = 0) z"
    assert _count(postgres_url, empty) == 0


def test_queue_stats_sizes_a_table_never_analyzed_from_its_pages(postgres_store, monkeypatch):
    """reltuples is -1 until the first ANALYZE (autovacuum off, or not come round yet): the
    table is sized from its pages at DENSITY rows each, not taken for empty and counted whole."""
    _fill(postgres_store)
    monkeypatch.setattr(views, "EXACT_ROWS", 10)
    monkeypatch.setattr(views, "SAMPLE_ROWS", 10**9)
    monkeypatch.setattr(views, "DENSITY", 100.0)  # the one page: 100 rows, past EXACT_ROWS
    [stats] = postgres_store.queue_stats(now=T0 + 2)
    assert stats.estimated and stats.counts == {"waiting": 10, "scheduled": 1, "done": 25, "failed": 5}
