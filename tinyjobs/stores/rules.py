"""The rules every store follows, whatever it keeps its rows in: one home for each.

What a stored state reports, what a settlement records on its execution, what a lease that
nobody settled ends in, the state a job that runs after others starts in (DEP-01), and the
texts a user reads (errors on record, JobNotFound). The memory and SQLite stores call these
functions; the PostgreSQL store's SQL and the Redis store's Lua cannot, so they get the texts
and tables from here when their statements are built (postgres/sqlfiles.py fills placeholders,
redis/scripts.py prepends a generated prelude) and keep a copy of the decisions themselves, each
marked with a comment naming this file. tests/contract/test_store_rules.py pins every store to
this module, so a copy that drifts fails there.

A leaf: it imports only job, errors and serialization (NewJob only for type checking).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from ..errors import JobNotFound
from ..job import (
    BLOCKED,
    CANCELLED,
    DONE,
    FAILED,
    OUTCOME_CANCELLED,
    OUTCOME_DONE,
    OUTCOME_ERROR,
    OUTCOME_FAILED,
    OUTCOME_HANDED_BACK,
    OUTCOME_SNOOZED,
    RUNNING,
    SCHEDULED,
    WAITING,
    Job,
)
from ..serialization import load

if TYPE_CHECKING:
    from .base import NewJob

# The stored state of a job that waits for its due time; it is reported as `scheduled` while
# that time is ahead and as `waiting` once it is due (see reported_state).
PENDING = "pending"
STORED_LIVE = (PENDING, BLOCKED, RUNNING)  # a live job holds its id and its dedup key (JOB-09)
STORED_FINAL = (DONE, FAILED, CANCELLED)

# The execution outcome each settlement records, unless Settlement.execution overrides it or
# the job's cancellation was requested (then OUTCOME_CANCELLED, unless the attempt was done).
EXECUTION_OUTCOMES = {
    "done": OUTCOME_DONE,
    "retry": OUTCOME_ERROR,
    "snooze": OUTCOME_SNOOZED,
    "fail": OUTCOME_FAILED,
    "handback": OUTCOME_HANDED_BACK,
}
# Settlements that give the attempt back: it was not the job's fault (JOB-07, SUP-02).
GIVES_BACK = frozenset({"snooze", "handback"})

# The error on record of a job whose cancellation was asked while it ran (JOB-08).
CANCELLED_WHILE_RUNNING = "cancelled while running"
# The error on record of a job that ended failed because a lease that nobody settled ended on
# its last attempt, with "%s" the outcome ("lease expired", "worker lost"), attempts, maximum.
# printf-style, so that SQL's format() and Lua's string.format read the same text.
ATTEMPTS_USED = "%s on attempt %s of %s"
# The error on record of a job cancelled because a job it runs after failed or was cancelled
# (DEP-01), with "%s" the parent's id and DEPENDENCY_REASONS of the parent's state.
DEPENDENCY_CANCELLED = "cancelled: job %s it runs after %s"
# DELETED is no stored state: the parent's "state" when store.delete removed it (not done).
DELETED = "deleted"
DEPENDENCY_REASONS = {FAILED: "failed", CANCELLED: "was cancelled", DELETED: "was deleted"}


def reported_state(stored: str, due: float, now: float) -> str:
    """The state a user sees: a pending job is scheduled while its due time is ahead."""
    if stored == PENDING:
        return SCHEDULED if due > now else WAITING
    return stored


def holds_id(stored: str, expires_at: float | None, now: float) -> bool:
    """JOB-09: whether a job keeps its id from a new job: while live, or done within its
    dedupe window. A failed or cancelled job, or a done one past its window, is replaced."""
    return stored in STORED_LIVE or (stored == DONE and expires_at is not None and expires_at > now)


def expires_at(state: str, now: float, dedupe: float, keep: float) -> float:
    """When a job that just became final may be purged (JOB-10): done ones after `dedupe`,
    failed and cancelled ones after `keep`."""
    return now + (dedupe if state == DONE else keep)


def dependency_error(parent_id: str, parent_state: str) -> str:
    """The error on record of a job cancelled because `parent_id` failed or was cancelled."""
    return DEPENDENCY_CANCELLED % (parent_id, DEPENDENCY_REASONS[parent_state])


def initial_state(parents: Iterable[tuple[str, str]]) -> tuple[str, str | None]:
    """DEP-01: the (state, error) a new job starts in from its parents' (id, stored state), in
    `after` order: cancelled by the first that failed or was cancelled; else blocked while one
    is not done; else pending."""
    state = PENDING
    for parent_id, parent_state in parents:
        if parent_state in DEPENDENCY_REASONS:
            return CANCELLED, dependency_error(parent_id, parent_state)
        if parent_state != DONE:
            state = BLOCKED
    return state, None


def created_snapshot(
    job: NewJob, due: float, now: float, state: str = PENDING, error: str | None = None
) -> Job:
    """The snapshot of a job just added in `state` (pending, blocked, or cancelled by its
    parents with `error`), built from what was written instead of read back.

    Runs once per job of every enqueue: the Job is a copy of the instance dict of one built by
    its constructor, with the fields that differ set (a third of the cost of Job(...)'s 21
    keyword arguments; each gets its own executions list). Equal to what Job(...) builds as long
    as Job keeps its __dict__ and has no __post_init__; tests/unit/test_created_snapshot.py
    holds both."""
    values = _CREATED.copy()
    values["id"] = job.id
    values["task"] = job.task
    values["queue"] = job.queue
    values["args"] = load(job.payload)
    values["state"] = reported_state(state, due, now)
    values["priority"] = job.priority
    values["max_attempts"] = job.max_attempts
    values["due_at"] = due
    values["created_at"] = now
    if state in STORED_FINAL:
        values["finished_at"] = now
    if error is not None:
        values["error"] = error
    if job.key is not None:
        values["key"] = job.key
    if job.group is not None:
        values["group"] = job.group
    if job.after:
        values["after"] = tuple(dict.fromkeys(job.after))
    values["executions"] = []
    snapshot = _new(Job)
    snapshot.__dict__ = values
    return snapshot


# The fields of a fresh Job as its constructor sets them (created_snapshot sets the rest).
_CREATED = Job(id="", task="", queue="", args={}, state=PENDING).__dict__
_new = object.__new__


def unknown_parent(job_id: str, parent_id: str) -> JobNotFound:
    """The error of an enqueue whose `after` names a job that exists nowhere (DEP-01)."""
    return JobNotFound(f"job {job_id!r} runs after {parent_id!r}, which does not exist; nothing was added")


def settled_state(outcome: str, cancel_requested: bool, attempts: int, max_attempts: int) -> str:
    """The state a settlement leaves its job in: done wins over a cancellation asked meanwhile;
    otherwise that cancellation wins; `fail`, and `retry` on the last attempt, fail for good;
    the rest (retry, snooze, handback) wait again."""
    if outcome == "done":
        return DONE
    if cancel_requested:
        return CANCELLED
    if outcome == "fail" or (outcome == "retry" and attempts >= max_attempts):
        return FAILED
    if outcome in EXECUTION_OUTCOMES:
        return PENDING
    raise ValueError(f"unknown settlement outcome {outcome!r}")


def execution_outcome(outcome: str, execution: str | None, cancel_requested: bool) -> str:
    """The outcome recorded on the settled attempt's execution."""
    if execution:
        return execution
    if cancel_requested and outcome != "done":
        return OUTCOME_CANCELLED
    return EXECUTION_OUTCOMES[outcome]


def lease_ended(
    outcome: str, cancel_requested: bool, attempts: int, max_attempts: int
) -> tuple[str, str | None]:
    """JOB-04, DUR-02: the (state, error) of a job whose lease ended without a settlement, with
    `outcome` "lease expired" or "worker lost": cancelled if that was asked, failed when it used
    its attempts (the attempt stays counted, JOB-03), else pending with its due time unchanged."""
    if cancel_requested:
        return CANCELLED, CANCELLED_WHILE_RUNNING
    if attempts >= max_attempts:
        return FAILED, ATTEMPTS_USED % (outcome, attempts, max_attempts)
    return PENDING, None
