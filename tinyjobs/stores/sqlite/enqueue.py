"""Adding jobs (JOB-09 dedupe, DEP-01 dependencies). Runs inside the caller's transaction,
on a cursor whose rows are sqlite3.Row, so that it works on the caller's connection too."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence

from tinyjobs.job import Job
from tinyjobs.stores.base import NewJob
from tinyjobs.stores.rules import PENDING, created_snapshot, holds_id, initial_state, unknown_parent

from .lifecycle import delete_jobs
from .rows import Q, as_json, new_job_row, plain_job_row, to_job


def due_of(job: NewJob, now: float) -> float:
    return job.at if job.at is not None else now + job.delay


def enqueue_batch(cur: sqlite3.Cursor, jobs: Sequence[NewJob], now: float) -> list[Job]:
    """Add the jobs in order; one transaction is the caller's business."""
    if not jobs:
        return []
    if len(jobs) == 1 and jobs[0].key is None and not jobs[0].after:
        # The commonest case, one job with a fresh id: the insert itself is the check (the
        # id is UNIQUE; a refused insert changes nothing), one statement instead of two.
        job = jobs[0]
        due = due_of(job, now)
        try:
            cur.execute(*plain_job_row(job, due, now))
        except sqlite3.IntegrityError as err:
            if "jobs.id" not in str(err):
                raise
            return [_enqueue_one(cur, job, now)]  # the id exists: dedupe or replace it
        return [created_snapshot(job, due, now)]
    if _plain(cur, jobs):
        # The common case (fresh ids, no key, no dependencies): one executemany, no read-back.
        dues = [due_of(job, now) for job in jobs]
        rows = [plain_job_row(job, due, now) for job, due in zip(jobs, dues, strict=True)]
        if all(statement is rows[0][0] for statement, _ in rows):  # no None bound (plain_job_row)
            cur.executemany(rows[0][0], [params for _, params in rows])
        else:  # some jobs with a group, some without
            cur.executemany(
                Q["insert_job"],
                [new_job_row(job, due, now, PENDING, None) for job, due in zip(jobs, dues, strict=True)],
            )
        return [created_snapshot(job, due, now) for job, due in zip(jobs, dues, strict=True)]
    return [_enqueue_one(cur, job, now) for job in jobs]


def _plain(cur: sqlite3.Cursor, jobs: Sequence[NewJob]) -> bool:
    """True when no job has a key or dependencies, ids are distinct and none exists yet."""
    if any(job.key is not None or job.after for job in jobs):
        return False
    ids = [job.id for job in jobs]
    if len(set(ids)) != len(ids):
        return False
    if len(ids) == 1:
        return cur.execute(Q["job_by_id"], (ids[0],)).fetchone() is None
    return cur.execute(Q["jobs_by_ids"], (as_json(ids),)).fetchone() is None


def _enqueue_one(cur: sqlite3.Cursor, job: NewJob, now: float) -> Job:
    """One job of a batch: an earlier job of the same batch is seen, as it is already written."""
    row = cur.execute(Q["job_by_id"], (job.id,)).fetchone()
    if row is not None:
        if holds_id(row["state"], row["expires_at"], now):
            return to_job(row, now, created=False)
        delete_jobs(cur, [row["seq"]])  # failed, cancelled or expired: replaced
    if job.key is not None:
        row = cur.execute(Q["live_by_key"], (job.key,)).fetchone()
        if row is not None:
            return to_job(row, now, created=False)
    state, error, parents = _after(cur, job)
    due = due_of(job, now)
    cur.execute(Q["insert_job"], new_job_row(job, due, now, state, error))
    seq = cur.lastrowid
    if parents:  # kept whatever the state, so that `dependents` lists the job
        cur.executemany(Q["insert_dep"], [(parent, seq) for parent in parents])
    if state == PENDING:
        return created_snapshot(job, due, now)
    return to_job(cur.execute(Q["job_by_id"], (job.id,)).fetchone(), now)


def _after(cur: sqlite3.Cursor, job: NewJob) -> tuple[str, str | None, list[int]]:
    """(state, error, parent seqs) of a job from the jobs it runs after (DEP-01)."""
    seqs, states = [], []
    for parent_id in job.after:
        row = cur.execute(Q["job_by_id"], (parent_id,)).fetchone()
        if row is None:
            raise unknown_parent(job.id, parent_id)
        seqs.append(row["seq"])
        states.append((parent_id, row["state"]))
    state, error = initial_state(states)
    return state, error, seqs
