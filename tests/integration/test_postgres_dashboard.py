"""PostgreSQL's queue_stats past EXACT_ROWS: the live states still exact, the final states
estimated from a page sample and flagged `estimated`; and the pause lock (LIM-04) that makes a
claim in flight finish before pause returns."""

from __future__ import annotations

import threading

import psycopg
from psycopg import sql

from tinyjobs.holder import Holder
from tinyjobs.stores.base import NewJob, QueuePolicy, Settlement
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
