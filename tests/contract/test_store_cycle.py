"""settle_and_claim: the worker's cycle, settle then claim, on every store."""

from __future__ import annotations

from helpers import T0, add, claim_one, holder, ids, policy, queues, state

from tinyjobs.stores.base import Settlement


def test_job05_settle_and_claim_settles_first_then_claims_in_order(store):
    add(store, "a", "b", "c")
    first = claim_one(store)
    applied, claimed = store.settle_and_claim(
        [Settlement("a", first.token, "done", result='"ok"')], queues(), holder(), 5, now=T0 + 1
    )
    assert applied == [True] and ids(claimed) == ["b", "c"]
    assert state(store, "a", now=T0 + 1) == "done" and store.get("a", now=T0 + 1).result == "ok"
    assert all(c.job.attempts == 1 and c.job.state == "running" for c in claimed)


def test_lim01_a_place_freed_by_the_settlement_is_taken_by_the_claim(store):
    add(store, "a", "b")
    on = queues(policy(concurrency=1))
    first = claim_one(store, on=on)
    applied, claimed = store.settle_and_claim(
        [Settlement("a", first.token, "done")], on, holder(), 5, now=T0 + 1
    )
    assert applied == [True] and ids(claimed) == ["b"]


def test_job05_a_stale_settlement_changes_nothing_and_the_claim_still_happens(store):
    add(store, "a", "b")
    first = claim_one(store, now=T0)
    store.reap(now=T0 + 31)  # the lease ran out: the job waits again
    applied, claimed = store.settle_and_claim(
        [Settlement("a", first.token, "done")], queues(), holder(pid=2), 5, now=T0 + 31
    )
    assert applied == [False] and ids(claimed) == ["a", "b"]
    assert [c.job.attempts for c in claimed] == [2, 1]


def test_settle_and_claim_with_no_room_only_settles(store):
    add(store, "a", "b")
    first = claim_one(store)
    applied, claimed = store.settle_and_claim(
        [Settlement("a", first.token, "fail", error="no")], queues(), holder(), 0, now=T0
    )
    assert applied == [True] and claimed == [] and state(store, "a") == "failed"
