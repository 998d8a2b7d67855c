"""Every store follows tinyjobs/stores/rules.py, the one home of the rules they share: the texts
on record, the execution outcomes, the states a settlement or a lost lease leaves. The SQL of
the PostgreSQL store and the Lua of the Redis store hold copies of its decisions; these tests
fail when a copy drifts from rules.py."""

from __future__ import annotations

import pytest
from helpers import LEASE, T0, add, claim_one, holder, new, settle

from tinyjobs.errors import JobNotFound
from tinyjobs.job import (
    CANCELLED,
    DONE,
    FAILED,
    OUTCOME_CANCELLED,
    OUTCOME_LEASE_EXPIRED,
    OUTCOME_TIMEOUT,
    OUTCOME_WORKER_LOST,
)
from tinyjobs.stores import rules


def test_rules_job_not_found_is_worded_by_rules(store):
    add(store, "a")
    batch = [new("x"), new("y", after=("a", "ghost"))]
    with pytest.raises(JobNotFound) as raised:
        store.enqueue(batch, now=T0)
    assert str(raised.value) == str(rules.unknown_parent("y", "ghost"))


@pytest.mark.parametrize("how", ["fail", "cancel"])
def test_rules_dep01_a_new_job_after_a_dead_parent_starts_as_rules_say(store, how):
    add(store, "a")
    running = claim_one(store)
    if how == "cancel":
        assert store.cancel("a", now=T0 + 1)
        parent_state = CANCELLED
    else:
        parent_state = FAILED
    assert settle(store, running, "fail", now=T0 + 1, error="broken")
    [b] = store.enqueue([new("b", after=("a",))], now=T0 + 2)
    assert (b.state, b.error) == rules.initial_state([("a", parent_state)])
    assert b.error == rules.dependency_error("a", parent_state)


def test_rules_dep01_a_new_job_after_a_live_parent_is_blocked(store):
    add(store, "a")
    [b] = store.enqueue([new("b", after=("a",))], now=T0)
    assert (b.state, b.error) == rules.initial_state([("a", "pending")])


def test_rules_dep01_cascade_texts_come_from_rules(store):
    add(store, "a")
    store.enqueue([new("b", after=("a",)), new("c", after=("b",))], now=T0)
    assert settle(store, claim_one(store), "fail", now=T0 + 1, error="broken")
    assert store.get("b", now=T0 + 1).error == rules.dependency_error("a", FAILED)
    assert store.get("c", now=T0 + 1).error == rules.dependency_error("b", CANCELLED)


def test_rules_dep01_a_parent_cancelled_while_waiting_cancels_by_rules(store):
    add(store, "a")
    store.enqueue([new("b", after=("a",))], now=T0)
    assert store.cancel("a", now=T0 + 1)
    assert store.get("b", now=T0 + 1).error == rules.dependency_error("a", CANCELLED)


@pytest.mark.parametrize("outcome", sorted(rules.EXECUTION_OUTCOMES))
@pytest.mark.parametrize("cancel", [False, True], ids=["plain", "cancel-asked"])
def test_rules_settlement_outcome_state_and_error(store, outcome, cancel):
    add(store, "a", max_attempts=2)
    claimed = claim_one(store)
    if cancel:
        assert store.cancel("a", now=T0 + 1)
    result = "1" if outcome == "done" else None
    assert settle(store, claimed, outcome, now=T0 + 2, result=result, error="boom", delay=60)
    job = store.get("a", now=T0 + 2, executions=True)
    [execution] = job.executions
    assert execution.outcome == rules.execution_outcome(outcome, None, cancel)
    stored = rules.settled_state(outcome, cancel, 1, 2)
    due = T0 if outcome == "handback" else T0 + 62
    assert job.state == rules.reported_state(stored, due, T0 + 2)
    if stored == CANCELLED:
        assert job.error == rules.CANCELLED_WHILE_RUNNING
    attempts = 0 if stored == rules.PENDING and outcome in rules.GIVES_BACK else 1
    assert job.attempts == attempts


def test_rules_retry_on_the_last_attempt_fails_by_rules(store):
    add(store, "a", max_attempts=1)
    assert settle(store, claim_one(store), "retry", now=T0 + 1, error="boom", delay=5)
    job = store.get("a", now=T0 + 1)
    assert job.state == rules.settled_state("retry", False, 1, 1) == FAILED


def test_rules_an_execution_override_is_recorded_as_given(store):
    add(store, "a")
    claimed = claim_one(store)
    assert settle(store, claimed, "retry", now=T0 + 1, error="slow", execution=OUTCOME_TIMEOUT)
    [execution] = store.get("a", now=T0 + 1, executions=True).executions
    assert execution.outcome == rules.execution_outcome("retry", OUTCOME_TIMEOUT, False)


def _end_by(store, outcome: str, now: float) -> None:
    """End every live lease as `outcome`: by the reaper, or as its holder's death."""
    if outcome == OUTCOME_LEASE_EXPIRED:
        assert store.reap(now=now) == 1
    else:
        assert store.end_leases([holder()], now=now) == 1


@pytest.mark.parametrize("outcome", [OUTCOME_LEASE_EXPIRED, OUTCOME_WORKER_LOST])
@pytest.mark.parametrize("attempts", [1, 2])
def test_rules_a_lease_nobody_settled_ends_by_rules(store, outcome, attempts):
    add(store, "a", max_attempts=attempts)
    store.enqueue([new("b", after=("a",))], now=T0)
    claim_one(store)
    _end_by(store, outcome, T0 + LEASE)
    job = store.get("a", now=T0 + LEASE, executions=True)
    assert [e.outcome for e in job.executions] == [outcome]
    stored, error = rules.lease_ended(outcome, False, 1, attempts)
    assert job.state == rules.reported_state(stored, T0, T0 + LEASE)
    if stored == FAILED:
        assert job.error == error == rules.ATTEMPTS_USED % (outcome, 1, attempts)
        assert store.get("b", now=T0 + LEASE).error == rules.dependency_error("a", FAILED)
    else:
        assert job.error is None


@pytest.mark.parametrize("outcome", [OUTCOME_LEASE_EXPIRED, OUTCOME_WORKER_LOST])
def test_rules_a_lease_nobody_settled_of_a_cancelled_job(store, outcome):
    add(store, "a", max_attempts=5)
    claim_one(store)
    assert store.cancel("a", now=T0 + 1)
    _end_by(store, outcome, T0 + LEASE)
    job = store.get("a", now=T0 + LEASE, executions=True)
    assert (job.state, job.error) == rules.lease_ended(outcome, True, 1, 5)
    assert [e.outcome for e in job.executions] == [outcome]


def test_rules_done_wins_over_a_cancellation(store):
    add(store, "a")
    claimed = claim_one(store)
    assert store.cancel("a", now=T0 + 1)
    assert settle(store, claimed, "done", now=T0 + 2, result="1")
    job = store.get("a", now=T0 + 2, executions=True)
    assert job.state == rules.settled_state("done", True, 1, 20) == DONE
    assert [e.outcome for e in job.executions] == [rules.execution_outcome("done", None, True)]
    assert OUTCOME_CANCELLED != job.executions[0].outcome
