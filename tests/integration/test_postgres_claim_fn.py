"""PostgreSQL's claim of queues without limits is migration 7's function `claim_free`, sent alone
(store.claim) as its own implicit transaction. What the contracts cannot see from outside: the
messages such a claim sends, that the function raises synchronous_commit for its transaction
when the session's is weaker (its leases are written durably even then), and that a claim that
finds nothing due writes nothing. And `get`, which sends its statements in one round trip."""

from __future__ import annotations

import os
import tempfile

import psycopg
from psycopg import pq, sql

from tinyjobs.holder import Holder
from tinyjobs.stores.base import NewJob, QueuePolicy
from tinyjobs.stores.postgres import claims

ON = {"default": QueuePolicy("default", lease=30)}


def _frontend(store, call) -> list[str]:
    """The names of the protocol messages this thread's store connection sends during `call()`
    (libpq's trace)."""
    conn, _ = store._conns.get()
    with tempfile.TemporaryFile("w+") as trace:
        conn.pgconn.trace(trace.fileno())
        conn.pgconn.set_trace_flags(pq.Trace.SUPPRESS_TIMESTAMPS | pq.Trace.REGRESS_MODE)
        try:
            call()
        finally:
            conn.pgconn.untrace()
        trace.seek(0)
        lines = trace.read().splitlines()
    return [line.split("\t")[2].split()[0] for line in lines if line.startswith("F\t")]


def test_a_claim_is_one_statement_in_its_own_transaction(postgres_store):
    holder = Holder.current()
    for _ in range(6):  # past psycopg's prepare threshold: the steady state's messages
        postgres_store.claim(ON, holder, 8)
    sent = _frontend(postgres_store, lambda: postgres_store.claim(ON, holder, 8))
    assert sent.count("Sync") == 1  # one round trip
    assert [m for m in sent if m in ("Parse", "Bind", "Query")] == ["Bind"]  # no BEGIN, no COMMIT
    postgres_store.enqueue([NewJob(id="j1", task="t")])
    sent = _frontend(postgres_store, lambda: postgres_store.claim(ON, holder, 8))
    assert [m for m in sent if m in ("Parse", "Bind", "Query")] == ["Bind"]


def test_the_claim_function_raises_synchronous_commit_for_its_transaction(postgres_store, postgres_url):
    store = postgres_store
    store.enqueue([NewJob(id="j1", task="t")])
    params = claims.params(store.schema, ON, Holder.current(), 8, None)
    with psycopg.connect(postgres_url.split("?")[0]) as conn:
        conn.execute("SET synchronous_commit = off")
        rows = conn.execute(store.q["claim_free"], params).fetchall()
        assert len(rows) == 1
        assert conn.execute("SHOW synchronous_commit").fetchone() == ("on",)
        conn.commit()
        assert conn.execute("SHOW synchronous_commit").fetchone() == ("off",)  # SET LOCAL only


def test_a_claim_that_finds_nothing_due_writes_nothing(postgres_store, postgres_url):
    store = postgres_store
    store.enqueue([NewJob(id="j1", task="t", delay=3600.0)])
    params = claims.params(store.schema, ON, Holder.current(), 8, None)
    with psycopg.connect(postgres_url.split("?")[0]) as conn:
        assert conn.execute(store.q["claim_free"], params).fetchall() == []
        # No row was locked or written: the transaction has no id of its own.
        assert conn.execute("SELECT pg_current_xact_id_if_assigned()").fetchone() == (None,)
        table = sql.Identifier(store.schema, "jobs")
        states = conn.execute(sql.SQL("SELECT state FROM {}").format(table)).fetchall()
        assert states == [("pending",)]


def _settles_and_claims(store, dry: bool) -> list[str]:
    """The ids settle_and_claim takes with its claim chosen by `dry` (claim_free when True, the
    claim statement otherwise), two jobs due and one paused queue asked for too."""
    queues = {**ON, "stopped": QueuePolicy("stopped", lease=30)}
    store.enqueue(
        [NewJob(id="a", task="t"), NewJob(id="b", task="t"), NewJob(id="s", task="t", queue="stopped")]
    )
    store.pause("stopped")
    store._dry = dry
    claimed = store.settle_and_claim([], queues, Holder.current(), 1)[1]
    assert store._dry is False  # it found as many as it asked for
    claimed += store.settle_and_claim([], queues, Holder.current(), 8)[1]
    assert store._dry is True
    return [c.job.id for c in claimed]


def test_settle_and_claim_claims_alike_by_function_and_by_statement(postgres_url):
    from support.postgres_fixtures import drop_schema, postgres_schema_url

    from tinyjobs.stores.postgres import open as open_postgres

    for dry in (True, False):
        schema = f"t_claim_{'dry' if dry else 'wet'}_{os.getpid()}"
        store = open_postgres(postgres_schema_url(postgres_url, schema))
        try:
            assert _settles_and_claims(store, dry) == ["a", "b"], dry
        finally:
            store.close()
            drop_schema(postgres_url, schema)


def test_get_with_executions_is_one_round_trip(postgres_store):
    store = postgres_store
    store.enqueue([NewJob(id="j1", task="t")])
    for _ in range(6):  # past psycopg's prepare threshold
        store.get("j1", executions=True)
    got = []
    sent = _frontend(store, lambda: got.append(store.get("j1", executions=True)))
    assert sent.count("Sync") == 1
    assert got[0] is not None and got[0].id == "j1" and got[0].executions == []
    assert store.get("missing", executions=True) is None
