"""Bulk enqueue on PostgreSQL through COPY: the rows leave in one binary stream and the server
only stores them (no unnest, no plan, no conflict arbiter per row), so that the rows' own work
(heap and index inserts) bounds a big batch.

COPY cannot skip a row, so it takes only the batches whose every item is surely new: no key
(a key's dedupe needs a look at the live jobs), no parents (DEP-01 reads them), no id twice in
the batch. An id already in the table makes the COPY fail with a unique violation: the caller
rolls back and writes the batch the general way (enqueue.py), which finds or replaces that
job (JOB-09); ids are random unless the caller names them, so that is rare.

The snapshots are built from what was written (rules.created_snapshot), with the clock the
INSERT path would use: the caller's `now`, else the transaction's start time on the server.
`seq` comes from the column's default (m004), one nextval per row in stream order, which keeps
the batch's claim order."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ...job import Job
from ..base import NewJob
from ..rules import PENDING, created_snapshot

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
    aborted and the caller must roll it back."""
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
    return [created_snapshot(job, due, now) for job, due in zip(jobs, dues, strict=True)]
