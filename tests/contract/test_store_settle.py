"""How attempts end and what the user can do to a job: JOB-07 (store part: retry, snooze, fail,
hand-back), JOB-08 (cancel), JOB-10 (purge), and retry of a failed job."""

from __future__ import annotations

import pytest
from helpers import LEASE, T0, add, claim, claim_one, ids, settle, state


def test_job07_retry_counts_the_attempt_and_waits_its_delay(store):
    add(store, "a", max_attempts=5)
    claimed = claim_one(store)
    assert settle(store, claimed, "retry", now=T0 + 1, error="boom", delay=2.0)
    job = store.get("a", now=T0 + 1, executions=True)
    assert (job.state, job.attempts, job.error, job.due_at) == ("scheduled", 1, "boom", T0 + 3)
    assert (job.executions[0].outcome, job.executions[0].error) == ("error", "boom")
    assert claim(store, now=T0 + 2.9) == []
    again = claim_one(store, now=T0 + 3)
    assert again.job.attempts == 2


def test_job07_retry_at_the_last_attempt_fails_for_good(store):
    add(store, "a", max_attempts=2)
    assert settle(store, claim_one(store), "retry", now=T0 + 1, error="first", delay=0)
    assert settle(store, claim_one(store, now=T0 + 1), "retry", now=T0 + 2, error="second", delay=0)
    job = store.get("a", now=T0 + 2)
    assert (job.state, job.attempts, job.error, job.finished_at) == ("failed", 2, "second", T0 + 2)
    assert claim(store, now=T0 + 10_000) == []


def test_job07_snooze_gives_the_attempt_back(store):
    add(store, "a", max_attempts=1)
    assert settle(store, claim_one(store), "snooze", now=T0 + 1, delay=600)
    job = store.get("a", now=T0 + 1, executions=True)
    assert (job.state, job.attempts, job.due_at) == ("scheduled", 0, T0 + 601)
    assert job.executions[0].outcome == "snoozed"
    assert claim(store, now=T0 + 600) == []
    again = claim_one(store, now=T0 + 601)
    assert again.job.attempts == 1  # with max_attempts=1 it may still run


def test_job07_fail_fails_for_good_now(store):
    add(store, "a", max_attempts=20)
    assert settle(store, claim_one(store), "fail", now=T0 + 1, error="invalid address")
    job = store.get("a", now=T0 + 1, executions=True)
    assert (job.state, job.attempts, job.error, job.finished_at) == (
        "failed",
        1,
        "invalid address",
        T0 + 1,
    )
    assert job.executions[0].outcome == "failed"
    assert claim(store, now=T0 + 10_000) == []


def test_job07_handback_gives_the_attempt_back_and_is_due_at_once(store):
    add(store, "a", max_attempts=1)
    claimed = claim_one(store)
    assert settle(store, claimed, "handback", now=T0 + 5)
    job = store.get("a", now=T0 + 5, executions=True)
    assert (job.state, job.attempts, job.due_at) == ("waiting", 0, T0)
    assert job.executions[0].outcome == "handed back"
    assert claim_one(store, now=T0 + 5).job.attempts == 1


def test_job07_execution_outcome_may_be_overridden(store):
    add(store, "a", max_attempts=5)
    claimed = claim_one(store)
    assert settle(store, claimed, "retry", now=T0 + 1, error="timed out", execution="timeout")
    execution = store.get("a", now=T0 + 1, executions=True).executions[0]
    assert (execution.outcome, execution.error, execution.ended_at) == (
        "timeout",
        "timed out",
        T0 + 1,
    )


def test_job07_done_keeps_the_result_and_clears_the_error(store):
    add(store, "a", max_attempts=5)
    assert settle(store, claim_one(store), "retry", now=T0 + 1, error="boom", delay=0)
    assert settle(store, claim_one(store, now=T0 + 1), "done", now=T0 + 2, result='{"chars":12}')
    job = store.get("a", now=T0 + 2)
    assert (job.state, job.result, job.error, job.finished_at) == (
        "done",
        {"chars": 12},
        None,
        T0 + 2,
    )


@pytest.mark.sync_and_async
def test_job08_cancelled_waiting_or_scheduled_job_is_gone(store):
    add(store, "now")
    add(store, "later", delay=3600)
    assert store.cancel("now", now=T0 + 1) is True
    assert store.cancel("later", now=T0 + 1) is True
    assert store.get("now", now=T0 + 1) is None
    assert store.get("later", now=T0 + 1) is None
    assert claim(store, now=T0 + 7200) == []
    assert store.cancel("now", now=T0 + 2) is False  # nothing left to cancel


@pytest.mark.sync_and_async
def test_job08_cancel_of_unknown_or_final_job_is_false(store):
    assert store.cancel("ghost", now=T0) is False
    add(store, "a")
    assert settle(store, claim_one(store), "done", now=T0 + 1, result="1")
    assert store.cancel("a", now=T0 + 2) is False
    assert state(store, "a", now=T0 + 2) == "done"


@pytest.mark.sync_and_async
def test_job08_running_job_learns_at_renewal_and_ends_cancelled(store):
    add(store, "a", max_attempts=5)
    claimed = claim_one(store)
    assert store.cancel("a", now=T0 + 1) is True
    assert store.cancel("a", now=T0 + 1) is True  # idempotent while it runs
    job = store.get("a", now=T0 + 1)
    assert (job.state, job.cancel_requested) == ("running", True)
    assert store.renew([claimed.token], now=T0 + 2) == {claimed.token: "cancel"}
    assert settle(store, claimed, "retry", now=T0 + 3, error="CancelledError", delay=0)
    job = store.get("a", now=T0 + 3, executions=True)
    assert (job.state, job.error, job.finished_at) == (
        "cancelled",
        "cancelled while running",
        T0 + 3,
    )
    assert job.executions[0].outcome == "cancelled"
    assert claim(store, now=T0 + 100) == []


@pytest.mark.sync_and_async
def test_job08_cancelled_running_job_that_finished_is_done(store):
    add(store, "a")
    claimed = claim_one(store)
    assert store.cancel("a", now=T0 + 1)
    assert settle(store, claimed, "done", now=T0 + 2, result="7")
    job = store.get("a", now=T0 + 2)
    assert (job.state, job.result) == ("done", 7)


@pytest.mark.sync_and_async
def test_job08_cancelled_running_job_never_runs_again_after_lease_loss(store):
    add(store, "a", max_attempts=5)
    claim_one(store)
    assert store.cancel("a", now=T0 + 1)
    assert store.reap(now=T0 + LEASE) == 1
    job = store.get("a", now=T0 + LEASE)
    assert (job.state, job.error) == ("cancelled", "cancelled while running")
    assert claim(store, now=T0 + LEASE + 1) == []


def test_job08_snooze_or_handback_of_a_cancelled_job_ends_it(store):
    add(store, "a", "b")
    a, b = claim(store, 2)
    assert store.cancel("a", now=T0 + 1) and store.cancel("b", now=T0 + 1)
    assert settle(store, a, "snooze", now=T0 + 2, delay=10)
    assert settle(store, b, "handback", now=T0 + 2)
    assert (state(store, "a", now=T0 + 2), state(store, "b", now=T0 + 2)) == (
        "cancelled",
        "cancelled",
    )
    assert claim(store, now=T0 + 100) == []


@pytest.mark.sync_and_async
def test_retry_makes_a_failed_job_due_with_a_fresh_budget(store):
    add(store, "a", max_attempts=2)
    assert settle(store, claim_one(store), "fail", now=T0 + 1, error="bad")
    assert store.retry("a", now=T0 + 10) is True
    job = store.get("a", now=T0 + 10)
    assert (job.state, job.due_at, job.attempts, job.max_attempts) == ("waiting", T0 + 10, 1, 3)
    assert job.finished_at is None
    assert store.purge(now=T0 + 10**9) == 0  # a live job is never purged
    assert claim_one(store, now=T0 + 10).job.attempts == 2


@pytest.mark.sync_and_async
def test_retry_of_anything_but_failed_or_cancelled_is_false(store):
    assert store.retry("ghost", now=T0) is False
    add(store, "a")
    assert store.retry("a", now=T0) is False
    claimed = claim_one(store)
    assert store.retry("a", now=T0) is False
    assert settle(store, claimed, "done", now=T0 + 1, result="1")
    assert store.retry("a", now=T0 + 2) is False
    assert state(store, "a", now=T0 + 2) == "done"


@pytest.mark.sync_and_async
def test_retry_makes_a_cancelled_job_due_again(store):
    add(store, "a")
    claimed = claim_one(store)
    store.cancel("a", now=T0 + 1)
    settle(store, claimed, "fail", now=T0 + 2, error="stopped")
    assert state(store, "a", now=T0 + 2) == "cancelled"
    assert store.retry("a", now=T0 + 3) is True
    retried = claim_one(store, now=T0 + 3)
    assert store.renew([retried.token], now=T0 + 4) == {retried.token: "ok"}  # not cancelled


def test_job10_done_jobs_are_purged_after_dedupe(store):
    add(store, "a", dedupe=100, keep=10_000)
    assert settle(store, claim_one(store), "done", now=T0 + 1, result="1")
    assert store.purge(now=T0 + 100.9) == 0
    assert state(store, "a", now=T0 + 100.9) == "done"
    assert store.purge(now=T0 + 101) == 1
    assert store.get("a", now=T0 + 101, executions=True) is None


def test_job10_failed_and_cancelled_jobs_are_purged_after_keep(store):
    add(store, "failed", dedupe=10, keep=1000)
    add(store, "cancelled", dedupe=10, keep=2000)
    failed, cancelled = claim(store, 2)
    assert settle(store, failed, "fail", now=T0 + 1, error="bad")
    store.cancel("cancelled", now=T0 + 1)
    assert settle(store, cancelled, "retry", now=T0 + 1, error="x")
    assert store.purge(now=T0 + 1000) == 0
    assert store.get("failed", now=T0 + 1000).error == "bad"
    assert store.purge(now=T0 + 1001) == 1
    assert ids(store.jobs(now=T0 + 1001)) == ["cancelled"]
    assert store.purge(now=T0 + 2001) == 1
    assert store.jobs(now=T0 + 2001) == []


def test_job10_purge_leaves_live_jobs_and_respects_limit(store):
    add(store, "d1", "d2", "d3", "running", dedupe=1, keep=1)
    for claimed in claim(store, 10):
        if claimed.job.id != "running":
            assert settle(store, claimed, "done", now=T0 + 1, result="1")
    add(store, "waiting", dedupe=1, keep=1, now=T0 + 2)
    add(store, "scheduled", delay=10**7, dedupe=1, keep=1, now=T0 + 2)
    later = T0 + 10**6
    assert store.purge(now=later, limit=2) == 2
    assert store.purge(now=later, limit=2) == 1
    assert store.purge(now=later) == 0
    assert ids(store.jobs(now=later)) == ["running", "waiting", "scheduled"]
