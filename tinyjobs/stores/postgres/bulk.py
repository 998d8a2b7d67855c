"""Bulk enqueue on PostgreSQL through COPY: the rows leave in one binary stream and the server
only stores them (no unnest, no plan, no conflict arbiter per row), so that the rows' own work
(heap and index inserts) bounds a big batch.

COPY cannot skip a row, so it takes only the batches whose every item is surely new: no key
(a key's dedupe needs a look at the live jobs), no parents (DEP-01 reads them), no id twice in
the batch. An id already in the table makes the COPY fail with a unique violation: the caller
rolls back and writes the batch the general way (enqueue.py), which finds or replaces that
job (JOB-09); ids are random unless the caller names them, so that is rare.

The snapshots are built from what was written (rules.created_snapshot's), with the clock the
INSERT path would use: the caller's `now`, else the transaction's start time on the server.
`seq` comes from the column's default (m004), one nextval per row in stream order, which keeps
the batch's claim order."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from ...job import SCHEDULED, WAITING, Job
from ...serialization import load
from ..base import NewJob
from ..rules import PENDING

# Below this many jobs the single INSERT statement (one round trip fewer) is as fast.
MIN_BATCH = 16

# The COPY's columns (queries.sql `copy_jobs`) and their types, for the binary format.
TYPES = ["text", "text", "text", "text", "int4", "float8", "text", "int4", "int4", "text"]
TYPES += ["float8", "float8", "float8"]


def copyable(jobs: Sequence[NewJob]) -> bool:
    """True when COPY can write the batch: big enough, no keys, no parents, ids distinct."""
    if len(jobs) < MIN_BATCH:
        return False
    for job in jobs:
        if job.key is not None or job.after:
            return False
    return len({job.id for job in jobs}) == len(jobs)


def copy_in(cur: Any, q: dict[str, str], jobs: Sequence[NewJob], now: float | None) -> list[Job]:
    """Write `jobs` (copyable) in the cursor's open transaction; their snapshots, in order.
    Raises psycopg.errors.UniqueViolation when an id is taken: the transaction is then
    aborted and the caller must roll it back.

    The snapshots are built after the last row is handed to psycopg and before the COPY is
    ended: the server is then still storing the rows sent (a row costs it several times what
    it costs us to send), so that their building overlaps its work instead of following it."""
    if now is None:
        cur.execute(q["transaction_clock"])
        now = float(cur.fetchone()[0])
    dues = [now + float(job.delay) if job.at is None else float(job.at) for job in jobs]
    with cur.copy(q["copy_jobs"]) as copy:
        copy.set_types(TYPES)
        write = copy.write_row
        for job, due in zip(jobs, dues, strict=True):
            write(
                (
                    job.id,
                    job.task,
                    job.queue,
                    job.payload,
                    job.priority,
                    due,
                    PENDING,
                    job.max_attempts,
                    job.max_attempts,
                    job.group,
                    float(job.dedupe),
                    float(job.keep),
                    now,
                )
            )
        return snapshots(jobs, dues, now)


def snapshots(jobs: Sequence[NewJob], dues: Sequence[float], now: float) -> list[Job]:
    """What rules.created_snapshot returns for each of these jobs (copyable: pending, no key, no
    parents), spelled out for the batch: the arguments decoded in one call (one JSON array of
    every payload: a fifth of the cost of one json.loads per job), and each Job a copy of one
    built by its constructor with the fields that differ set (half the cost of Job(...) per
    job; each gets its own executions list). tests/unit/test_postgres_bulk_snapshots.py holds
    the two equal, and Job to a dataclass without __post_init__ or slots, which this needs."""
    args = _all_args([job.payload for job in jobs])
    fields = Job(id="", task="", queue="", args={}, state=WAITING, created_at=now).__dict__
    new = object.__new__
    built: list[Job] = []
    add = built.append
    for job, due, a in zip(jobs, dues, args, strict=True):
        values = fields.copy()
        values["id"] = job.id
        values["task"] = job.task
        values["queue"] = job.queue
        values["args"] = a
        values["state"] = SCHEDULED if due > now else WAITING  # rules.reported_state, pending
        values["priority"] = job.priority
        values["max_attempts"] = job.max_attempts
        values["due_at"] = due
        values["group"] = job.group
        values["executions"] = []
        snapshot = new(Job)
        snapshot.__dict__ = values
        add(snapshot)
    return built


def _all_args(payloads: list[str]) -> list[Any]:
    """Each payload's value. A payload that is not one JSON value could split or join others
    in the array: the count then differs (or the array is not JSON), and each is read alone,
    which raises what reading it alone raises."""
    try:
        values = json.loads("[" + ",".join(payloads) + "]")
    except (TypeError, ValueError):
        values = None
    if not isinstance(values, list) or len(values) != len(payloads):
        values = [load(p) for p in payloads]
    return values
