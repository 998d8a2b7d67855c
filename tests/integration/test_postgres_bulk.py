"""Bulk enqueue through COPY (tinyjobs/stores/postgres/bulk.py): the same snapshots, order and
JOB-09 outcomes as the general INSERT path, which takes over when an id is already taken."""

from __future__ import annotations

import psycopg
from psycopg import sql

from tinyjobs.holder import Holder
from tinyjobs.stores.base import NewJob, QueuePolicy, Settlement
from tinyjobs.stores.postgres import bulk

T0 = 1_000_000.0
QUEUES = {"default": QueuePolicy("default", lease=30.0)}
N = bulk.MIN_BATCH * 2


def _batch(prefix: str, n: int = N, **fields) -> list[NewJob]:
    return [NewJob(id=f"{prefix}{i:03d}", task="t", payload=f'{{"i":{i}}}', **fields) for i in range(n)]


def _copied(store, monkeypatch) -> list[int]:
    """Count the batches that went through COPY to the end."""
    calls: list[int] = []
    real = bulk.copy_in

    def counting(cur, q, jobs, now):
        out = real(cur, q, jobs, now)
        calls.append(len(jobs))
        return out

    monkeypatch.setattr(bulk, "copy_in", counting)
    return calls


def test_a_big_batch_goes_through_copy_with_the_same_snapshots(postgres_store, monkeypatch):
    copied = _copied(postgres_store, monkeypatch)
    jobs = _batch("a", priority=2, group="g", max_attempts=5)
    jobs[1] = NewJob(id="a001", task="t", at=T0 + 500, delay=10)
    jobs[2] = NewJob(id="a002", task="t", delay=60)
    added = postgres_store.enqueue(jobs, now=T0)
    assert copied == [N]
    assert [j.id for j in added] == [j.id for j in jobs]
    assert all(j.created for j in added)
    first = added[0]
    assert (first.args, first.priority, first.group, first.max_attempts) == ({"i": 0}, 2, "g", 5)
    assert (first.state, first.due_at, first.created_at, first.attempts) == ("waiting", T0, T0, 0)
    assert (added[1].due_at, added[2].due_at, added[2].state) == (T0 + 500, T0 + 60, "scheduled")
    for job in (added[0], added[1], added[2], added[-1]):
        stored = postgres_store.get(job.id, now=T0)
        assert (stored.args, stored.due_at, stored.created_at, stored.priority, stored.group) == (
            job.args,
            job.due_at,
            job.created_at,
            job.priority,
            job.group,
        )


def test_copied_jobs_are_claimed_in_batch_order_and_settle(postgres_store):
    jobs = _batch("o")
    postgres_store.enqueue(jobs, now=T0)
    holder = Holder.current()
    claimed = postgres_store.claim(QUEUES, holder, N, now=T0 + 1)
    assert [c.job.id for c in claimed] == [j.id for j in jobs]
    done = [Settlement(job_id=c.job.id, token=c.token, outcome="done") for c in claimed]
    assert postgres_store.settle(done, now=T0 + 2) == [True] * N


def test_the_server_clock_is_the_transactions_start(postgres_store, monkeypatch):
    copied = _copied(postgres_store, monkeypatch)
    before = postgres_store.now()
    added = postgres_store.enqueue(_batch("c"))
    after = postgres_store.now()
    assert copied == [N]
    assert {j.created_at for j in added} == {added[0].created_at}
    assert before <= added[0].created_at <= after
    assert postgres_store.get("c000", now=after).created_at == added[0].created_at


def test_a_taken_id_sends_the_batch_the_general_way(postgres_store, monkeypatch):
    """JOB-09 through the fallback: a live id is found (created False, the old job), a failed
    one is replaced, and nothing of the failed COPY stays."""
    postgres_store.enqueue([NewJob(id="t005", task="t", payload='{"old":1}')], now=T0)
    postgres_store.enqueue([NewJob(id="t007", task="t", max_attempts=1)], now=T0)
    [failing] = [c for c in postgres_store.claim(QUEUES, Holder.current(), 5, now=T0) if c.job.id == "t007"]
    postgres_store.settle([Settlement(job_id="t007", token=failing.token, outcome="fail")], now=T0)
    copied = _copied(postgres_store, monkeypatch)
    added = postgres_store.enqueue(_batch("t"), now=T0 + 1)
    assert copied == []  # the COPY failed on t005 and rolled back
    assert [j.id for j in added] == [f"t{i:03d}" for i in range(N)]
    assert [j.id for j in added if not j.created] == ["t005"]
    assert added[5].args == {"old": 1}
    assert (added[7].created, added[7].state, added[7].args) == (True, "waiting", {"i": 7})
    assert len(postgres_store.jobs(limit=1000, now=T0 + 1)) == N


def test_keys_parents_repeats_and_small_batches_stay_on_the_insert_path():
    assert bulk.copyable(_batch("x"))
    assert not bulk.copyable(_batch("x", n=bulk.MIN_BATCH - 1))
    assert not bulk.copyable([*_batch("x")[:-1], NewJob(id="x000", task="t")])
    assert not bulk.copyable([*_batch("x")[:-1], NewJob(id="k", task="t", key="k")])
    assert not bulk.copyable([*_batch("x")[:-1], NewJob(id="p", task="t", after=("x000",))])


def test_copy_writes_with_synchronous_commit_at_least_on(postgres_store, postgres_url, monkeypatch):
    """The COPY path runs in the store's write transaction, which raises a weak level."""
    with postgres_store._conns.get()[0].cursor() as cur:
        cur.execute("SET synchronous_commit = off")
    postgres_store._conns._local.weak = True
    seen: list[str] = []
    real = bulk.copy_in

    def watching(cur, q, jobs, now):
        seen.append(cur.execute("SHOW synchronous_commit").fetchone()[0])
        return real(cur, q, jobs, now)

    monkeypatch.setattr(bulk, "copy_in", watching)
    postgres_store.enqueue(_batch("s"), now=T0)
    assert seen == ["on"]
    with psycopg.connect(postgres_url) as conn:
        table = sql.Identifier(postgres_store.schema, "jobs")
        count = conn.execute(sql.SQL("SELECT count(*) FROM {}").format(table)).fetchone()[0]
    assert count == N
