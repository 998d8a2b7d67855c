"""PostgreSQL's browse by seq (m009): one index, jobs_seq, serves the newest-first listing alone
and within a window of seqs for any filter, so the two browse indexes that took an entry at
every enqueue, claim and settlement are gone; a rare state keeps an index of its own, walked
without a window."""

from __future__ import annotations

import psycopg
from psycopg import sql
from support.postgres_fixtures import postgres_schema_url

from tinyjobs.holder import Holder
from tinyjobs.stores.base import JobFilter, NewJob, QueuePolicy, Settlement
from tinyjobs.stores.postgres import open as open_postgres
from tinyjobs.stores.postgres import views

T0 = 1_700_000_000.0
HOLDER = Holder("h/b", 1, 1)


def _indexes(url: str, schema: str) -> dict[str, str]:
    with psycopg.connect(url, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT indexname, indexdef FROM pg_indexes WHERE schemaname = %s AND tablename = 'jobs'",
            (schema,),
        ).fetchall()
    return {name: definition for name, definition in rows}


def test_the_jobs_table_has_one_browse_index_by_seq(postgres_store, postgres_url):
    indexes = _indexes(postgres_url, postgres_store.schema)
    assert not {"jobs_browse", "jobs_browse_queue"} & set(indexes)
    assert indexes["jobs_seq"].endswith("USING btree (seq)")
    assert "(state, seq) WHERE" in indexes["jobs_browse_rare"]


def test_a_version_8_schema_loses_its_browse_indexes(postgres_store, postgres_url):
    """A schema migrated before m009 still has m002's browse indexes: opening it drops them and
    makes jobs_seq, and browse lists what was there newest first."""
    schema = postgres_store.schema
    postgres_store.enqueue([NewJob(id=f"j{i}", task="t") for i in range(3)], now=T0)
    postgres_store.close()
    with psycopg.connect(postgres_url, autocommit=True) as conn:  # back to version 8
        jobs = sql.Identifier(schema, "jobs")
        for name in ("jobs_seq", "jobs_browse_rare"):
            conn.execute(sql.SQL("DROP INDEX {}").format(sql.Identifier(schema, name)))
        for text in (
            'CREATE INDEX jobs_browse ON {} (created_at, id COLLATE "C")',
            'CREATE INDEX jobs_browse_queue ON {} (queue, created_at, id COLLATE "C")',
            'CREATE INDEX jobs_browse_rare ON {} (state, created_at, id COLLATE "C") '
            "WHERE state IN ('failed', 'cancelled', 'blocked')",
        ):
            conn.execute(sql.SQL(text).format(jobs))
        versions = sql.Identifier(schema, "migrations")
        conn.execute(sql.SQL("DELETE FROM {} WHERE version >= 9").format(versions))
    again = open_postgres(postgres_schema_url(postgres_url, schema))
    try:
        indexes = _indexes(postgres_url, schema)
        assert "jobs_seq" in indexes and not {"jobs_browse", "jobs_browse_queue"} & set(indexes)
        assert "(state, seq) WHERE" in indexes["jobs_browse_rare"]
        jobs, cursor = again.browse(JobFilter(), None, 10, now=T0)
        assert [j.id for j in jobs] == ["j2", "j1", "j0"] and cursor is None
    finally:
        again.close()


def test_a_rare_state_is_browsed_without_a_window(postgres_store, monkeypatch):
    """A failed job older than the window is still on the first page of the failed ones (their
    own index), while a queue filter reads the window and says there is more to read."""
    monkeypatch.setattr(views, "WINDOW", 5)
    store = postgres_store
    store.enqueue([NewJob(id="old", task="t", queue="rare")], now=T0)
    [claimed] = store.claim({"rare": QueuePolicy("rare")}, HOLDER, 1, now=T0)
    assert store.settle([Settlement("old", claimed.token, "fail", error="x")], now=T0) == [True]
    store.enqueue([NewJob(id=f"j{i:02d}", task="t") for i in range(12)], now=T0 + 1)
    jobs, cursor = store.browse(JobFilter(state="failed"), None, 10, now=T0 + 2)
    assert [j.id for j in jobs] == ["old"] and cursor is None
    jobs, cursor = store.browse(JobFilter(queue="rare"), None, 10, now=T0 + 2)
    assert jobs == [] and cursor is not None
    pages = [jobs]
    while cursor is not None:
        jobs, cursor = store.browse(JobFilter(queue="rare"), cursor, 10, now=T0 + 2)
        pages.append(jobs)
    assert [j.id for page in pages for j in page] == ["old"] and len(pages) == 3


def test_an_unfiltered_page_walks_jobs_seq_and_stops(postgres_store, postgres_url):
    """The plan of the first page: jobs_seq walked backward under the LIMIT, no sort of the
    table (what a browse costs does not grow with the jobs on record)."""
    store = postgres_store
    store.enqueue([NewJob(id=f"j{i:05d}", task="t") for i in range(3000)], now=T0)
    schema = store.schema
    text = store.q["browse"].replace(views._FILTERS, "")
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute(sql.SQL("ANALYZE {}").format(sql.Identifier(schema, "jobs")))
        params = {"now": T0, "after": views.BEYOND, "limit": 51}
        plan = "\n".join(r[0] for r in conn.execute(b"EXPLAIN " + text.encode(), params).fetchall())
    assert "Index Scan Backward using jobs_seq" in plan and "Sort" not in plan
