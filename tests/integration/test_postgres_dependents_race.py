"""DEP-01 on PostgreSQL when a dependent is enqueued while its parent settles (found by
benchmarks/soak.py: a third of the `after=` jobs enqueued right behind a fast parent stayed
blocked for ever).

The child's enqueue locks its parent row (FOR SHARE) until it commits; the parent's settlement
waits for that lock. Its statement then updates the parent, but whatever else it reads (whether
the parent has dependents) it reads as of its start, before the child existed: the child must
still be released. The race is made deterministic: the child is enqueued inside a transaction
of the test's own, held open until the settlement is seen waiting for the lock."""

from __future__ import annotations

import threading

import psycopg
from support.wait import wait_until

from tinyjobs.holder import Holder
from tinyjobs.stores.base import NewJob, QueuePolicy, Settlement

QUEUES = {"default": QueuePolicy("default", lease=30.0)}


def test_dep01_a_child_enqueued_while_its_parent_settles_is_released(postgres_store):
    store = postgres_store
    store.enqueue([NewJob("parent", "t")])
    [claimed] = store.claim(QUEUES, Holder.current(), 1)
    conninfo = store.settings.conninfo
    with psycopg.connect(conninfo) as theirs, psycopg.connect(conninfo, autocommit=True) as watch:
        store.enqueue([NewJob("child", "t", after=("parent",))], conn=theirs)  # lock held: no commit yet
        settled: list[list[bool]] = []
        settler = threading.Thread(
            target=lambda: settled.append(store.settle([Settlement("parent", claimed.token, "done")]))
        )
        settler.start()

        def settle_waits_for_the_lock() -> bool:
            row = watch.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE %s = ANY(pg_blocking_pids(pid))",
                (theirs.info.backend_pid,),
            ).fetchone()
            return bool(row and row[0])

        wait_until(settle_waits_for_the_lock, timeout=10, what="the settlement to wait for the parent's lock")
        theirs.commit()
        settler.join(10)
    assert settled == [[True]]
    assert store.get("parent").state == "done"
    assert store.get("child").state == "waiting", "the child stayed blocked behind a done parent"
