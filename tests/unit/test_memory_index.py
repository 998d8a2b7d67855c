"""The memory store's indexes (tinyjobs/stores/memory/index.py) agree with its rows after any mix
of operations, and its heap-driven claim takes exactly what sorting every due row would.

A random walk of enqueues (some scheduled, some after others), claims, settlements of every
outcome, cancels, retries, deletes, reaps and purges, with the clock moving forward and back;
after each step the indexes are compared with a count of the rows, and each claim with the
first `limit` due rows in claim order (JOB-01)."""

from __future__ import annotations

import random
from collections import Counter

import pytest

from tinyjobs.holder import Holder
from tinyjobs.job import BLOCKED, RUNNING
from tinyjobs.stores.base import NewJob, QueuePolicy, Settlement
from tinyjobs.stores.memory import open as open_memory
from tinyjobs.stores.memory.store import MemoryStore
from tinyjobs.stores.rules import PENDING

QUEUES = ("a", "b")
OUTCOMES = ("done", "retry", "snooze", "fail", "handback")


def check_index(store: MemoryStore) -> None:
    rows = store._rows.values()
    index = store._index
    assert Counter((r.queue, r.state) for r in rows) == Counter(
        {(q, s): n for q, by_state in index.counts.items() for s, n in by_state.items()}
    )
    pending = {r.id for r in rows if r.state == PENDING}
    assert {i for by_id in index.pending.values() for i in by_id} == pending
    assert set(index.running) == {r.id for r in rows if r.state == RUNNING}
    assert set(index.blocked) == {r.id for r in rows if r.state == BLOCKED}


def expected_claim(store: MemoryStore, queues: tuple[str, ...], limit: int, now: float) -> list[str]:
    due = [r for r in store._rows.values() if r.state == PENDING and r.queue in queues and r.due <= now]
    return [r.id for r in sorted(due, key=lambda r: r.order_key())[:limit]]


@pytest.mark.parametrize("seed", range(4))
def test_indexes_follow_the_rows_and_claims_keep_claim_order(seed: int) -> None:
    rng = random.Random(seed)
    store = open_memory("memory://")
    holder = Holder.current()
    now = 1_000_000.0
    held: dict[str, str] = {}  # job id -> token
    ids: list[str] = []
    for step in range(600):
        now += rng.choice((0.0, 0.5, 3.0, -2.0))  # a claim may name an earlier `now` than the last
        kind = rng.random()
        if kind < 0.3:
            on_record = sorted(store._rows)
            after = tuple(rng.sample(on_record, 1)) if on_record and rng.random() < 0.2 else ()
            job = NewJob(
                id=f"j{step}" if rng.random() < 0.9 or not ids else rng.choice(ids),
                task="t",
                queue=rng.choice(QUEUES),
                priority=rng.choice((0, 0, 1, 5)),
                delay=rng.choice((0.0, 0.0, 2.0, 10.0)),
                after=after,
                dedupe=rng.choice((0.0, 5.0)),
                keep=rng.choice((0.0, 5.0)),
            )
            store.enqueue([job], now=now)
            ids.append(job.id)
        elif kind < 0.55:
            queues = tuple(rng.sample(QUEUES, rng.choice((1, 2))))
            limit = rng.choice((1, 3, 10))
            want = expected_claim(store, queues, limit, now)
            got = store.claim({q: QueuePolicy(name=q) for q in queues}, holder, limit, now=now)
            assert [c.job.id for c in got] == want
            held.update((c.job.id, c.token) for c in got)
        elif kind < 0.8 and held:
            job_id = rng.choice(sorted(held))
            outcome = rng.choice(OUTCOMES)
            store.settle(
                [Settlement(job_id, held.pop(job_id), outcome, delay=rng.choice((0.0, 4.0)))], now=now
            )
        elif kind < 0.85 and ids:
            store.cancel(rng.choice(ids), now=now)
        elif kind < 0.9 and ids:
            store.retry(rng.choice(ids), now=now)
        elif kind < 0.93 and ids:
            store.delete(rng.choice(ids), now=now)
        elif kind < 0.96:
            store.reap(now=now + rng.choice((0.0, 40.0)))
        else:
            before = {r.id for r in store._rows.values() if r.purgeable(now)}
            removed = store.purge(now=now, limit=rng.choice((2, 1000)))
            assert removed <= len(before)
            assert not ({r.id for r in store._rows.values()} & before) or removed < len(before)
        check_index(store)
        counts = store.counts(now=now)
        brute: dict[str, Counter[str]] = {}
        for r in store._rows.values():
            brute.setdefault(r.queue, Counter())[r.reported_state(now)] += 1
        assert counts == {q: dict(c) for q, c in brute.items()}
        for state in ("waiting", "scheduled", "running", "done", None):
            listed = [j.id for j in store.jobs(state, limit=1000, now=now)]
            rows = sorted(store._rows.values(), key=lambda r: r.seq)
            assert listed == [r.id for r in rows if state in (None, r.reported_state(now))]
    store.close()
