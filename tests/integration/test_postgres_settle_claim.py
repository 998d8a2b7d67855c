"""PostgreSQL's worker cycle for queues without limits is migration 8's function `settle_claim`,
sent alone (store.settle_and_claim) as its own implicit transaction. What the contracts cannot
see from outside: the messages the cycle sends, that the function raises synchronous_commit for
its transaction when the session's is weaker, and that its claim leaves paused queues alone."""

from __future__ import annotations

import importlib

import psycopg
from psycopg import sql
from test_postgres_claim_fn import _frontend

from tinyjobs.holder import Holder
from tinyjobs.stores.base import NewJob, QueuePolicy, Settlement
from tinyjobs.stores.postgres import claims, settle

ON = {"default": QueuePolicy("default", lease=30)}


def _done(claimed) -> list[Settlement]:
    return [Settlement(c.job.id, c.token, "done", result="1") for c in claimed]


def test_the_cycle_is_one_statement_in_its_own_transaction(postgres_store):
    store, holder = postgres_store, Holder.current()
    store.enqueue([NewJob(id=f"j{i}", task="t") for i in range(20)])
    claimed = store.claim(ON, holder, 2)
    for _ in range(6):  # past psycopg's prepare threshold: the steady state's messages
        applied, claimed = store.settle_and_claim(_done(claimed), ON, holder, 2)
        assert applied == [True, True] and len(claimed) == 2
    got = []
    sent = _frontend(store, lambda: got.append(store.settle_and_claim(_done(claimed), ON, holder, 2)))
    assert sent.count("Sync") == 1  # one round trip
    assert [m for m in sent if m in ("Parse", "Bind", "Query")] == ["Bind"]  # no BEGIN, no COMMIT
    applied, again = got[0]
    assert applied == [True, True] and [c.job.id for c in again] == ["j14", "j15"]
    assert {store.get(c.job.id).state for c in claimed} == {"done"}


def test_the_cycle_function_raises_synchronous_commit_for_its_transaction(postgres_store, postgres_url):
    store, holder = postgres_store, Holder.current()
    store.enqueue([NewJob(id="j1", task="t"), NewJob(id="j2", task="t")])
    [first] = store.claim(ON, holder, 1)
    params = claims.params(store.schema, ON, holder, 1, None)
    params.update(settle.arrays(_done([first])))
    with psycopg.connect(postgres_url.split("?")[0]) as conn:
        conn.execute("SET synchronous_commit = off")
        rows = conn.execute(store.q["settle_claim"], params).fetchall()
        applied, queues, claimed = settle.read_cycle(rows, 1)
        assert applied == [True] and queues == set() and [c.job.id for c in claimed] == ["j2"]
        assert conn.execute("SHOW synchronous_commit").fetchone() == ("on",)
        conn.commit()
        assert conn.execute("SHOW synchronous_commit").fetchone() == ("off",)  # SET LOCAL only


def test_the_cycle_claims_nothing_from_a_paused_queue(postgres_store):
    store, holder = postgres_store, Holder.current()
    queues = {**ON, "stopped": QueuePolicy("stopped", lease=30)}
    store.enqueue([NewJob(id="a", task="t"), NewJob(id="b", task="t")])
    store.enqueue([NewJob(id="s", task="t", queue="stopped")])
    [first] = store.claim(ON, holder, 1)
    store.pause("stopped")
    applied, claimed = store.settle_and_claim(_done([first]), queues, holder, 8)
    assert applied == [True] and [c.job.id for c in claimed] == ["b"]
    assert store._dry is True  # fewer than it asked for
    store.resume("stopped")
    applied, claimed = store.settle_and_claim(_done(claimed), queues, holder, 8)
    assert applied == [True] and [c.job.id for c in claimed] == ["s"]


def test_a_retried_settlement_wakes_its_queue(postgres_store):
    store, holder = postgres_store, Holder.current()
    store.enqueue([NewJob(id="a", task="t", max_attempts=3)])
    [first] = store.claim(ON, holder, 1)
    retry = Settlement(first.job.id, first.token, "retry", error="boom")
    again = Settlement(first.job.id, first.token, "done")  # the same lease twice: refused
    params = claims.params(store.schema, ON, holder, 0, None)
    params.update(settle.arrays([retry, again]))
    conn, _ = store._conns.get()
    rows = conn.execute(store.q["settle_claim"], params).fetchall()
    applied, queues, claimed = settle.read_cycle(rows, 2)
    assert applied == [True, False] and queues == {"default"} and claimed == []
    assert store.get("a").state == "waiting"


def test_a_migration_below_the_newest_on_record_is_applied(postgres_store, postgres_url, monkeypatch):
    # Migrations written side by side land in either order: a schema that a later-numbered one
    # (here a stand-in, one above the newest file) migrated first still gets the earlier one
    # (m008, taken off the record and undone).
    from support.postgres_fixtures import postgres_schema_url

    from tinyjobs.stores.postgres import open as open_postgres

    migrate = importlib.import_module("tinyjobs.stores.postgres.migrate")  # the module, not the function
    files = migrate.migrations()
    later = files[-1][0] + 1
    monkeypatch.setattr(migrate, "migrations", lambda: [*files, (later, "SELECT 1")])
    store = postgres_store
    conn, _ = store._conns.get()
    table = sql.Identifier(store.schema, "migrations")
    with conn.transaction():
        conn.execute(sql.SQL("DELETE FROM {} WHERE version = 8").format(table))
        conn.execute(sql.SQL("INSERT INTO {} (version) VALUES (%s)").format(table), (later,))
        conn.execute(sql.SQL("DROP FUNCTION {}").format(sql.Identifier(store.schema, "settle_claim")))
    again = open_postgres(postgres_schema_url(postgres_url, store.schema))
    try:
        versions = conn.execute(sql.SQL("SELECT version FROM {} ORDER BY 1").format(table)).fetchall()
        assert (8,) in versions and versions[-1] == (later,)
        again.enqueue([NewJob(id="a", task="t"), NewJob(id="b", task="t")])
        [first] = again.claim(ON, Holder.current(), 1)
        applied, claimed = again.settle_and_claim(_done([first]), ON, Holder.current(), 1)
        assert applied == [True] and [c.job.id for c in claimed] == ["b"]
    finally:
        again.close()
