"""Claim order, attempts, leases and fencing: JOB-01, JOB-03, JOB-04, JOB-05, JOB-06 (store part),
and one execution on record per attempt."""

from __future__ import annotations

from helpers import (
    LEASE,
    T0,
    add,
    claim,
    claim_one,
    holder,
    ids,
    new,
    policy,
    queues,
    settle,
    state,
)

from tinyjobs.stores.base import Settlement


def test_job01_due_jobs_start_in_due_order_ties_in_enqueue_order(store):
    store.enqueue(
        [
            new("late", at=T0 - 10),
            new("tie-1", at=T0 - 20),
            new("tie-2", at=T0 - 20),
            new("early", at=T0 - 30),
            new("tie-3", at=T0 - 20),
        ],
        now=T0 - 40,
    )
    assert ids(claim(store, 10, now=T0)) == ["early", "tie-1", "tie-2", "tie-3", "late"]


def test_job01_priority_comes_before_due_time(store):
    store.enqueue(
        [
            new("old-low", at=T0 - 100),
            new("new-high", at=T0 - 1, priority=5),
            new("mid", at=T0 - 50, priority=1),
            new("old-high", at=T0 - 10, priority=5),
        ],
        now=T0 - 200,
    )
    assert ids(claim(store, 10, now=T0)) == ["old-high", "new-high", "mid", "old-low"]


def test_job01_claim_takes_at_most_limit_in_order(store):
    add(store, "a", "b", "c", "d")
    assert ids(claim(store, 2)) == ["a", "b"]
    assert ids(claim(store, 2)) == ["c", "d"]
    assert claim(store, 2) == []


def test_job01_scheduled_jobs_wait_for_their_time(store):
    [job] = add(store, "later", delay=60)
    assert job.state == "scheduled"
    assert job.due_at == T0 + 60
    assert claim(store, now=T0 + 59.9) == []
    assert state(store, "later", now=T0 + 59.9) == "scheduled"
    assert state(store, "later", now=T0 + 60) == "waiting"
    assert ids(claim(store, now=T0 + 60)) == ["later"]


def test_job01_claim_takes_only_the_named_queues(store):
    store.enqueue([new("mail-1", queue="mail"), new("sms-1", queue="sms")], now=T0)
    assert ids(claim(store, on=queues("sms"))) == ["sms-1"]
    assert claim(store, on=queues("sms")) == []
    assert ids(claim(store, on=queues("mail", "sms"))) == ["mail-1"]


def test_job01_order_holds_across_the_queues_of_one_claim(store):
    store.enqueue(
        [
            new("mail-new", queue="mail", at=T0 - 5),
            new("sms-old", queue="sms", at=T0 - 10),
            new("mail-high", queue="mail", at=T0 - 1, priority=2),
            new("sms-newest", queue="sms", at=T0 - 1),
        ],
        now=T0 - 20,
    )
    both = queues("mail", "sms")
    assert ids(claim(store, 1, on=both)) == ["mail-high"]
    assert ids(claim(store, 1, on=both)) == ["sms-old"]
    assert ids(claim(store, 10, on=both)) == ["mail-new", "sms-newest"]


def test_job03_attempt_is_counted_at_claim(store):
    add(store, "a", max_attempts=3)
    claimed = claim_one(store)
    assert claimed.job.state == "running"
    assert claimed.job.attempts == 1
    assert claimed.job.started_at == T0
    job = store.get("a", now=T0)
    assert (job.state, job.attempts) == ("running", 1)


def test_job03_a_job_that_never_settles_still_fails_at_its_attempts(store):
    add(store, "crashy", max_attempts=3)
    now = T0
    for attempt in (1, 2, 3):
        claimed = claim_one(store, now=now)
        assert claimed.job.attempts == attempt
        now += LEASE
        assert store.reap(now=now) == 1  # the process died every time: nothing settled
    job = store.get("crashy", now=now)
    assert job.state == "failed"
    assert job.attempts == 3
    assert job.error == "lease expired on attempt 3 of 3"
    assert claim(store, now=now + 1000) == []


def test_job04_claim_takes_a_lease_of_the_queue_length(store):
    add(store, "a")
    claimed = claim_one(store, on=queues(policy(lease=12.5)))
    assert claimed.lease == 12.5
    assert len(claimed.token) >= 16
    assert store.reap(now=T0 + 12.4) == 0
    assert state(store, "a", now=T0 + 12.4) == "running"
    assert store.reap(now=T0 + 12.5) == 1
    assert state(store, "a", now=T0 + 12.5) == "waiting"


def test_job04_renewal_extends_the_lease(store):
    add(store, "a")
    claimed = claim_one(store)
    assert store.renew([claimed.token], now=T0 + 20) == {claimed.token: "ok"}
    assert store.reap(now=T0 + LEASE + 5) == 0  # would have expired without the renewal
    assert store.reap(now=T0 + 20 + LEASE) == 1


def test_job04_reaped_job_is_due_again_and_its_execution_ends_lease_expired(store):
    add(store, "a", max_attempts=5)
    first = claim_one(store)
    assert store.reap(now=T0 + LEASE) == 1
    job = store.get("a", now=T0 + LEASE, executions=True)
    assert job.state == "waiting"
    assert job.attempts == 1  # the lost attempt stays counted
    assert [e.outcome for e in job.executions] == ["lease expired"]
    assert job.executions[0].ended_at == T0 + LEASE
    second = claim_one(store, now=T0 + LEASE)
    assert second.job.attempts == 2
    assert second.token != first.token


def test_job04_renewing_an_expired_but_unreaped_lease_still_holds(store):
    add(store, "a")
    claimed = claim_one(store)
    assert store.renew([claimed.token], now=T0 + LEASE + 10) == {claimed.token: "ok"}
    assert store.reap(now=T0 + LEASE + 10) == 0
    assert settle(store, claimed, "done", now=T0 + LEASE + 11, result="1")


def test_job04_reap_takes_at_most_limit(store):
    add(store, "a", "b", "c")
    claim(store, 3)
    assert store.reap(now=T0 + LEASE, limit=2) == 2
    assert store.reap(now=T0 + LEASE, limit=2) == 1
    assert store.counts(now=T0 + LEASE) == {"default": {"waiting": 3}}


def test_job05_late_writes_of_a_lost_attempt_change_nothing(store):
    add(store, "a")
    stale = claim_one(store)
    assert store.reap(now=T0 + LEASE) == 1
    fresh = claim_one(store, now=T0 + LEASE)

    assert settle(store, stale, "done", now=T0 + LEASE + 1, result='"stale"') is False
    assert store.renew([stale.token], now=T0 + LEASE + 1) == {stale.token: "lost"}
    assert store.save_step(stale.token, "answer", '"stale"', now=T0 + LEASE + 1) is False

    job = store.get("a", now=T0 + LEASE + 1)
    assert (job.state, job.attempts, job.result) == ("running", 2, None)
    assert store.renew([fresh.token], now=T0 + LEASE + 1) == {fresh.token: "ok"}
    assert settle(store, fresh, "done", now=T0 + LEASE + 2, result='"fresh"')
    assert store.get("a", now=T0 + LEASE + 2).result == "fresh"


def test_job05_a_settled_attempt_cannot_settle_again(store):
    add(store, "a", max_attempts=5)
    claimed = claim_one(store)
    assert settle(store, claimed, "retry", error="boom", delay=0)
    assert settle(store, claimed, "done", result="1") is False
    assert store.renew([claimed.token]) == {claimed.token: "lost"}
    job = store.get("a", now=T0)
    assert (job.state, job.error) == ("waiting", "boom")


def test_job05_settle_applies_each_settlement_on_its_own(store):
    add(store, "a", "b")
    a, b = claim(store, 2)
    assert store.reap(now=T0 + LEASE) == 2
    b2 = [c for c in claim(store, 2, now=T0 + LEASE) if c.job.id == "b"][0]
    results = store.settle(
        [
            Settlement("a", a.token, "done", result="1"),  # lost: a was reaped
            Settlement("b", b2.token, "done", result="2"),
        ],
        now=T0 + LEASE + 1,
    )
    assert results == [False, True]
    assert state(store, "a", now=T0 + LEASE + 1) == "running"
    assert state(store, "b", now=T0 + LEASE + 1) == "done"
    assert b.token != b2.token


def test_job05_renew_reports_each_token(store):
    add(store, "a", "b")
    a, b = claim(store, 2)
    assert settle(store, a, "done", result="1")
    assert store.renew([a.token, b.token, "no-such-token"], now=T0 + 1) == {
        a.token: "lost",
        b.token: "ok",
        "no-such-token": "lost",
    }


def test_job06_steps_are_kept_for_the_next_attempt(store):
    add(store, "a", max_attempts=5)
    first = claim_one(store)
    assert first.steps == {}
    assert store.save_step(first.token, "answer", '{"text":"hi"}', now=T0 + 1)
    assert store.save_step(first.token, "count", "3", now=T0 + 2)
    assert store.save_step(first.token, "count", "4", now=T0 + 3)  # a step may be rewritten
    store.end_leases([holder()], now=T0 + 4)
    second = claim_one(store, now=T0 + 5)
    assert second.steps == {"answer": '{"text":"hi"}', "count": "4"}


def test_executions_record_each_attempt(store):
    add(store, "a", max_attempts=5)
    worker_1, worker_2 = holder(pid=111), holder(pid=222)
    first = claim_one(store, now=T0, by=worker_1)
    assert settle(store, first, "retry", now=T0 + 2, error="Traceback: boom", delay=1)
    second = claim_one(store, now=T0 + 3, by=worker_2)
    assert settle(store, second, "done", now=T0 + 5, result='{"ok":true}')

    job = store.get("a", now=T0 + 5, executions=True)
    assert job.state == "done"
    assert job.result == {"ok": True}
    assert job.error is None
    assert job.finished_at == T0 + 5
    one, two = job.executions
    assert (one.attempt, one.pid, one.host) == (1, 111, worker_1.hostname)
    assert (one.started_at, one.ended_at, one.outcome) == (T0, T0 + 2, "error")
    assert one.error == "Traceback: boom"
    assert (two.attempt, two.pid, two.started_at, two.ended_at) == (2, 222, T0 + 3, T0 + 5)
    assert (two.outcome, two.error) == ("done", None)


def test_executions_are_left_out_unless_asked(store):
    add(store, "a")
    claim_one(store)
    assert store.get("a", now=T0).executions == []
    running = store.get("a", now=T0, executions=True).executions
    assert len(running) == 1
    assert (running[0].outcome, running[0].ended_at) == (None, None)


def test_executions_error_is_bounded(store):
    add(store, "a")
    claimed = claim_one(store)
    huge = "x" * 100_000 + "raise site"
    assert settle(store, claimed, "fail", error=huge)
    job = store.get("a", now=T0, executions=True)
    assert len(job.executions[0].error) < 20_000
    assert job.executions[0].error.endswith("raise site")
