"""Adding jobs: the snapshot, id and key dedupe (JOB-09) and `ahead` (JOB-11)."""

from __future__ import annotations

import pytest
from helpers import LEASE, T0, add, claim, claim_one, ids, new, settle, state

from tinyjobs.errors import JobNotFound

# Every case here runs on each store and again through its async twin (aenqueue's path).
pytestmark = pytest.mark.sync_and_async


def test_enqueue_returns_the_new_jobs_snapshot(store):
    [job] = store.enqueue(
        [
            new(
                "j1",
                task="reply",
                queue="replies",
                payload='{"message_id":41}',
                priority=3,
                key="msg-41",
                group="customer:7",
                max_attempts=4,
            )
        ],
        now=T0,
    )
    assert job.created is True
    assert (job.id, job.task, job.queue, job.args) == ("j1", "reply", "replies", {"message_id": 41})
    assert (job.state, job.priority, job.attempts, job.max_attempts) == ("waiting", 3, 0, 4)
    assert (job.key, job.group, job.due_at, job.created_at) == ("msg-41", "customer:7", T0, T0)
    assert (job.error, job.result, job.started_at, job.finished_at) == (None, None, None, None)
    assert store.get("j1", now=T0).args == {"message_id": 41}


def test_enqueue_at_wins_over_delay(store):
    a, b = store.enqueue([new("a", at=T0 + 500, delay=10), new("b", delay=10)], now=T0)
    assert (a.due_at, b.due_at) == (T0 + 500, T0 + 10)


def test_job09_existing_id_adds_nothing(store):
    add(store, "reply:41", payload='{"n":1}')
    [again] = add(store, "reply:41", payload='{"n":2}', now=T0 + 5)
    assert again.created is False
    assert again.args == {"n": 1}
    assert again.created_at == T0
    assert ids(store.jobs(now=T0 + 5)) == ["reply:41"]


def test_job09_id_of_a_scheduled_or_running_job_adds_nothing(store):
    add(store, "later", delay=3600)
    assert add(store, "later", now=T0 + 1)[0].created is False
    assert state(store, "later", now=T0 + 1) == "scheduled"
    add(store, "busy")
    claim_one(store)
    [again] = add(store, "busy", now=T0 + 1)
    assert (again.created, again.state, again.attempts) == (False, "running", 1)


def test_job09_same_id_twice_in_one_batch(store):
    first, second = store.enqueue([new("x", payload='{"n":1}'), new("x", payload='{"n":2}')], now=T0)
    assert (first.created, second.created) == (True, False)
    assert second.args == {"n": 1}
    assert len(store.jobs(now=T0)) == 1


def test_job09_key_refuses_a_second_job_while_pending_or_running(store):
    add(store, "first", key="msg-41")
    [dup] = add(store, "second", key="msg-41", now=T0 + 1)
    assert (dup.created, dup.id) == (False, "first")
    assert store.get("second", now=T0 + 1) is None
    claimed = claim_one(store, now=T0 + 2)
    [dup] = add(store, "third", key="msg-41", now=T0 + 3)
    assert (dup.created, dup.id, dup.state) == (False, "first", "running")
    assert settle(store, claimed, "done", now=T0 + 4, result="1")
    [fresh] = add(store, "fourth", key="msg-41", now=T0 + 5)
    assert (fresh.created, fresh.id, fresh.state) == (True, "fourth", "waiting")


def test_job09_key_in_one_batch(store):
    first, second = store.enqueue([new("a", key="k"), new("b", key="k")], now=T0)
    assert (first.created, second.created, second.id) == (True, False, "a")


def test_job09_failed_id_may_be_added_again(store):
    add(store, "x", payload='{"n":1}')
    first = claim_one(store)
    assert store.save_step(first.token, "charged", '"yes"', now=T0)
    assert settle(store, first, "fail", now=T0 + 1, error="bad")
    [again] = add(store, "x", payload='{"n":2}', now=T0 + 2)
    assert again.created is True
    assert (again.state, again.attempts, again.error, again.args) == ("waiting", 0, None, {"n": 2})
    assert store.get("x", now=T0 + 2, executions=True).executions == []
    assert claim_one(store, now=T0 + 2).steps == {}  # the replaced job's steps are not the new one's


def test_job09_cancelled_id_may_be_added_again(store):
    add(store, "x")
    claimed = claim_one(store)
    assert store.cancel("x", now=T0 + 1)
    assert settle(store, claimed, "retry", now=T0 + 2, error="stopped")
    assert state(store, "x", now=T0 + 2) == "cancelled"
    [again] = add(store, "x", now=T0 + 3)
    assert (again.created, again.state) == (True, "waiting")
    add(store, "y")
    assert store.cancel("y", now=T0 + 4)
    assert add(store, "y", now=T0 + 5)[0].created is True


def test_job09_done_within_dedupe_adds_nothing_and_past_it_may_be_added(store):
    add(store, "x", dedupe=100)
    assert settle(store, claim_one(store), "done", now=T0 + 10, result='{"v":1}')
    [dup] = add(store, "x", dedupe=100, now=T0 + 109)
    assert (dup.created, dup.state, dup.result) == (False, "done", {"v": 1})
    [again] = add(store, "x", dedupe=100, now=T0 + 110)
    assert (again.created, again.state, again.result) == (True, "waiting", None)


def test_job11_ahead_counts_jobs_due_before_it_in_its_queue(store):
    add(store, "a", "b", "c")
    add(store, "other", queue="elsewhere")
    assert [store.get(i, now=T0).ahead for i in ("a", "b", "c")] == [0, 1, 2]
    add(store, "urgent", priority=9, now=T0 + 1)
    assert [store.get(i, now=T0 + 1).ahead for i in ("urgent", "a", "b", "c")] == [0, 1, 2, 3]
    assert store.get("other", now=T0 + 1).ahead == 0
    claim(store, 2, now=T0 + 2)  # urgent and a
    assert [store.get(i, now=T0 + 2).ahead for i in ("b", "c")] == [0, 1]
    assert store.get("a", now=T0 + 2).ahead is None


def test_job11_ahead_of_a_scheduled_job_counts_jobs_due_before_its_time(store):
    add(store, "now-1", "now-2")
    add(store, "in-10m", delay=600)
    add(store, "in-5m", delay=300)
    add(store, "in-20m", delay=1200)
    assert store.get("in-10m", now=T0).ahead == 3
    assert store.get("in-5m", now=T0).ahead == 2
    assert store.get("now-2", now=T0).ahead == 1


def test_dep01_chain_runs_in_order(store):
    add(store, "a")
    [b] = store.enqueue([new("b", after=("a",))], now=T0)
    [c] = store.enqueue([new("c", after=("b",))], now=T0)
    assert (b.state, c.state, b.after) == ("blocked", "blocked", ("a",))
    assert store.get("b", now=T0).ahead is None
    [a_claim] = claim(store, 10)
    assert a_claim.job.id == "a"  # the blocked ones are not claimable

    assert settle(store, a_claim, "done", now=T0 + 5, result="1")
    assert state(store, "b", now=T0 + 5) == "waiting"
    assert state(store, "c", now=T0 + 5) == "blocked"
    b_claim = claim_one(store, now=T0 + 5)
    assert b_claim.job.id == "b"
    assert settle(store, b_claim, "done", now=T0 + 6, result="2")
    assert ids(claim(store, 10, now=T0 + 6)) == ["c"]


def test_dep01_fan_in_waits_for_every_parent(store):
    add(store, "a", "b")
    [c] = store.enqueue([new("c", after=("a", "b"))], now=T0)
    assert c.state == "blocked"
    first, second = claim(store, 10)
    assert settle(store, first, "done", now=T0 + 1, result="1")
    assert state(store, "c", now=T0 + 1) == "blocked"
    assert claim(store, 10, now=T0 + 1) == []
    assert settle(store, second, "done", now=T0 + 2, result="2")
    c = store.get("c", now=T0 + 2)
    assert (c.state, c.due_at) == ("waiting", T0 + 2)
    assert ids(claim(store, 10, now=T0 + 2)) == ["c"]


def test_dep01_dependent_keeps_its_own_later_due_time(store):
    add(store, "a")
    store.enqueue([new("b", after=("a",), delay=600)], now=T0)
    assert settle(store, claim_one(store), "done", now=T0 + 1, result="1")
    b = store.get("b", now=T0 + 1)
    assert (b.state, b.due_at) == ("scheduled", T0 + 600)


def test_dep01_parent_failed_cancels_dependents_on_record(store):
    add(store, "a")
    store.enqueue([new("b", after=("a",)), new("c", after=("b",))], now=T0)
    assert settle(store, claim_one(store), "fail", now=T0 + 1, error="broken")
    b = store.get("b", now=T0 + 1)
    c = store.get("c", now=T0 + 1)
    assert (b.state, b.error, b.finished_at) == (
        "cancelled",
        "cancelled: job a it runs after failed",
        T0 + 1,
    )
    assert (c.state, c.error) == ("cancelled", "cancelled: job b it runs after was cancelled")
    assert claim(store, 10, now=T0 + 2) == []


def test_dep01_parent_failing_at_its_attempts_cancels_dependents(store):
    add(store, "a", max_attempts=1)
    store.enqueue([new("b", after=("a",))], now=T0)
    claim_one(store)
    assert store.reap(now=T0 + LEASE) == 1
    assert state(store, "a", now=T0 + LEASE) == "failed"
    assert store.get("b", now=T0 + LEASE).error == "cancelled: job a it runs after failed"


def test_dep01_parent_cancelled_by_the_user_cancels_dependents(store):
    add(store, "a")
    store.enqueue([new("b", after=("a",))], now=T0)
    assert store.cancel("a", now=T0 + 1)
    assert store.get("a", now=T0 + 1) is None
    b = store.get("b", now=T0 + 1)
    assert (b.state, b.error) == ("cancelled", "cancelled: job a it runs after was cancelled")


def test_dep01_parent_already_done_makes_the_job_due_at_once(store):
    add(store, "a")
    assert settle(store, claim_one(store), "done", now=T0 + 1, result="1")
    [b] = store.enqueue([new("b", after=("a",))], now=T0 + 2)
    assert (b.created, b.state, b.due_at) == (True, "waiting", T0 + 2)
    assert ids(claim(store, now=T0 + 2)) == ["b"]


def test_dep01_parent_already_failed_cancels_the_new_job(store):
    add(store, "a")
    assert settle(store, claim_one(store), "fail", now=T0 + 1, error="broken")
    [b] = store.enqueue([new("b", after=("a",))], now=T0 + 2)
    assert (b.state, b.error) == ("cancelled", "cancelled: job a it runs after failed")
    assert claim(store, now=T0 + 3) == []


def test_dep01_missing_parent_raises_and_writes_nothing(store):
    add(store, "a")
    batch = [new("x"), new("y", after=("a", "ghost"))]
    with pytest.raises(JobNotFound, match="ghost"):
        store.enqueue(batch, now=T0)
    assert store.get("x", now=T0) is None
    assert store.get("y", now=T0) is None
    assert ids(store.jobs(now=T0)) == ["a"]


def test_dep01_parent_earlier_in_the_same_batch(store):
    parent, child = store.enqueue([new("p"), new("c", after=("p",))], now=T0)
    assert (parent.state, child.state) == ("waiting", "blocked")
