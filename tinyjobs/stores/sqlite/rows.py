"""Rows to snapshots, and the statements of queries.sql (loaded once)."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable
from typing import Any

from tinyjobs.holder import Holder
from tinyjobs.job import CANCELLED, RUNNING, Execution, Job
from tinyjobs.stores.base import NewJob
from tinyjobs.stores.rules import expires_at, reported_state

from .connection import load_blocks

Q: dict[str, str] = load_blocks("queries.sql", "name")


def to_job(row: sqlite3.Row, now: float, created: bool = True) -> Job:
    """A Job snapshot of a jobs row."""
    result = row["result"]
    after = row["after_ids"]
    return Job(
        id=row["id"],
        task=row["task"],
        queue=row["queue"],
        args=json.loads(row["payload"]),
        state=reported_state(row["state"], row["due"], now),
        priority=row["priority"],
        attempts=row["attempts"],
        max_attempts=row["max_attempts"],
        due_at=row["due"],
        created_at=row["created_at"],
        started_at=row["started_at"],
        finished_at=row["finished_at"],
        error=row["error"],
        result=None if result is None else json.loads(result),
        key=row["key"],
        group=row["grp"],
        after=tuple(json.loads(after)) if after else (),
        created=created,
        cancel_requested=bool(row["cancel_requested"]),
    )


# The `claim` statement's RETURNING columns, in order (queries.sql; a unit test holds the two
# together), read by position: sqlite3.Row finds a column by name by comparing names. Each
# position below is looked up by its column's name, so the two lists cannot drift apart.
CLAIM_COLUMNS = tuple(
    "seq id task queue payload priority due attempts max_attempts created_at started_at "
    "finished_at error result key grp after_ids cancel_requested token lease_seconds has_steps".split()
)
SEQ = CLAIM_COLUMNS.index("seq")
ID = CLAIM_COLUMNS.index("id")
TASK = CLAIM_COLUMNS.index("task")
QUEUE = CLAIM_COLUMNS.index("queue")
PAYLOAD = CLAIM_COLUMNS.index("payload")
PRIORITY = CLAIM_COLUMNS.index("priority")
DUE = CLAIM_COLUMNS.index("due")
ATTEMPTS = CLAIM_COLUMNS.index("attempts")
MAX_ATTEMPTS = CLAIM_COLUMNS.index("max_attempts")
CREATED_AT = CLAIM_COLUMNS.index("created_at")
STARTED_AT = CLAIM_COLUMNS.index("started_at")
FINISHED_AT = CLAIM_COLUMNS.index("finished_at")
ERROR = CLAIM_COLUMNS.index("error")
RESULT = CLAIM_COLUMNS.index("result")
KEY = CLAIM_COLUMNS.index("key")
GRP = CLAIM_COLUMNS.index("grp")
AFTER_IDS = CLAIM_COLUMNS.index("after_ids")
CANCEL_REQUESTED = CLAIM_COLUMNS.index("cancel_requested")
TOKEN = CLAIM_COLUMNS.index("token")
LEASE_SECONDS = CLAIM_COLUMNS.index("lease_seconds")
HAS_STEPS = CLAIM_COLUMNS.index("has_steps")


def claimed_job(row: tuple) -> Job:
    """The snapshot of a job the claim statement just took, from its RETURNING columns."""
    result = row[RESULT]
    after = row[AFTER_IDS]
    return Job(
        row[ID],
        row[TASK],
        row[QUEUE],
        json.loads(row[PAYLOAD]),
        RUNNING,
        priority=row[PRIORITY],
        attempts=row[ATTEMPTS],
        max_attempts=row[MAX_ATTEMPTS],
        due_at=row[DUE],
        created_at=row[CREATED_AT],
        started_at=row[STARTED_AT],
        finished_at=row[FINISHED_AT],
        error=row[ERROR],
        result=None if result is None else json.loads(result),
        key=row[KEY],
        group=row[GRP],
        after=tuple(json.loads(after)) if after else (),
        cancel_requested=bool(row[CANCEL_REQUESTED]),
    )


def new_job_row(job: NewJob, due: float, now: float, state: str, error: str | None) -> tuple:
    """The insert_job parameters of a new job (one cancelled by its parents is final at once)."""
    final = state == CANCELLED
    return (
        job.id,
        job.task,
        job.queue,
        job.payload,
        job.priority,
        due,
        state,
        job.max_attempts,
        job.max_attempts,
        job.key,
        job.group,
        json.dumps(list(job.after)) if job.after else None,
        job.dedupe,
        job.keep,
        error,
        now,
        now if final else None,
        expires_at(state, now, job.dedupe, job.keep) if final else None,
    )


def plain_job_row(job: NewJob, due: float, now: float) -> tuple[str, tuple]:
    """The statement and parameters that insert a pending job without key or dependencies
    (insert_job_plain: no None bound; insert_job_plain_group for a job with a group)."""
    row = (
        job.id,
        job.task,
        job.queue,
        job.payload,
        job.priority,
        due,
        job.max_attempts,
        job.max_attempts,
        job.dedupe,
        job.keep,
        now,
    )
    if job.group is None:
        return Q["insert_job_plain"], row
    return Q["insert_job_plain_group"], (*row, job.group)


def to_execution(row: sqlite3.Row) -> Execution:
    return Execution(
        attempt=row["attempt"],
        host=row["host"],
        pid=row["pid"],
        started_at=row["started_at"],
        ended_at=row["ended_at"],
        outcome=row["outcome"],
        error=row["error"],
    )


def running_execution(row: sqlite3.Row) -> Execution:
    """The execution of the attempt running on a job's row (it has no executions row until it
    ends: migration 5): its attempt, its holder's host and pid, its start."""
    holder = Holder.parse(row["holder"])
    return Execution(
        attempt=row["attempts"],
        host=holder.hostname,
        pid=holder.pid,
        started_at=row["started_at"],
        ended_at=None,
        outcome=None,
        error=None,
    )


def as_json(values: Any) -> str:
    """A list of values as the JSON array that json_each reads."""
    return json.dumps(list(values))


def ints_json(values: Iterable[int]) -> str:
    """A list of ints (seqs) as the JSON array that json_each reads: an int's str() is its JSON,
    and joining them costs a fraction of json.dumps' encoder (every claim and settlement)."""
    return "[" + ",".join(map(str, values)) + "]"
