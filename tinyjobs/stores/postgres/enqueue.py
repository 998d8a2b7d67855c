"""Adding jobs on PostgreSQL: one INSERT of the whole batch (unnest arrays), run inside one
transaction, ours or the caller's (JOB-02); and the single job without parents, the most
common enqueue, as one statement sent with its BEGIN, COMMIT and wake-up in one write and one
round trip (oneflush.py; enqueue.sql).

The batch is written as steps (see steps.py), so that the sync store and the async one run
the same statements and read the same rows."""

from __future__ import annotations

import dataclasses
import functools
import json
import struct
from collections.abc import Callable, Sequence
from typing import Any

from ...errors import StoreError
from ...job import BLOCKED, CANCELLED, FAILED, Job
from ..aio import Later
from ..base import NewJob
from ..rules import STORED_LIVE, created_snapshot, initial_state, unknown_parent
from .oneflush import Param, Prepared, exchange
from .rows import AFTER_IDS, ID, KEY, QUEUE, STATE, tail, to_job
from .sqlfiles import blocks, compose, without_comments
from .steps import Steps, drive

# The columns `enqueue` and `enqueue_one` return after COLUMNS, and those of `enqueue_existing`.
WRITTEN = tail("replaced", "now", "notified")
FOUND = tail("now", "holds_id")
_FLOAT8 = struct.Struct(">d").unpack


def _batch(jobs: Sequence[NewJob]) -> tuple[list[int], dict[int, int]]:
    """The items to write (first of each id and key) and, for repeats, the item they repeat."""
    by_id: dict[str, int] = {}
    by_key: dict[str, int] = {}
    primary: list[int] = []
    alias: dict[int, int] = {}
    for i, job in enumerate(jobs):
        first = by_id.get(job.id)
        if first is None and job.key is not None:
            first = by_key.get(job.key)
        if first is not None:
            alias[i] = first
            continue
        by_id[job.id] = i
        if job.key is not None:
            by_key[job.key] = i
        primary.append(i)
    return primary, alias


def _initial_states(q: dict[str, str], jobs: list[NewJob]) -> Steps[list[tuple[str, str | None]]]:
    """The (state, error) each job starts in (DEP-01). Parents are read and locked against
    settlement until commit; a parent earlier in the batch counts with the state it is added
    in. JobNotFound naming the first parent that exists nowhere."""
    wanted = list(dict.fromkeys(p for job in jobs for p in job.after))
    states: dict[str, str] = {}
    if wanted:
        states = dict((yield q["enqueue_parents"], {"ids": wanted}))
    out: list[tuple[str, str | None]] = []
    for job in jobs:
        for parent in job.after:
            if parent not in states:
                raise unknown_parent(job.id, parent)
        out.append(initial_state((p, states[p]) for p in job.after))
        if states.get(job.id) in (None, FAILED, CANCELLED):
            states[job.id] = out[-1][0]  # added (or replacing a final job) in list order
    return out


def _params(jobs: list[NewJob], initial: list, now: float | None, channel: str | None) -> dict:
    return {
        "now": now,
        "channel": channel or "",
        "notify": channel is not None,
        "ids": [j.id for j in jobs],
        "tasks": [j.task for j in jobs],
        "queues": [j.queue for j in jobs],
        "payloads": [j.payload for j in jobs],
        "priorities": [j.priority for j in jobs],
        "delays": [float(j.delay) for j in jobs],
        "ats": [None if j.at is None else float(j.at) for j in jobs],
        "keys": [j.key for j in jobs],
        "groups": [j.group for j in jobs],
        "afters": [json.dumps(list(j.after)) if j.after else None for j in jobs],
        "max_attempts": [j.max_attempts for j in jobs],
        "dedupes": [float(j.dedupe) for j in jobs],
        "keeps": [float(j.keep) for j in jobs],
        "states": [s for s, _ in initial],
        "errors": [e for _, e in initial],
    }


def existing(cur: Any, q: dict[str, str], jobs: list[NewJob], now: float | None) -> dict:
    """`existing_steps` run on a sync cursor."""
    return drive(cur, existing_steps(q, jobs, now))


def existing_steps(q: dict[str, str], jobs: list[NewJob], now: float | None) -> Steps[dict]:
    """Jobs that hold the ids or keys of items that were not written: ("id"|"key", value) ->
    row. A final job that the id could replace does not hold its id."""
    keys = [j.key for j in jobs if j.key is not None]
    rows = yield q["enqueue_existing"], {"now": now, "ids": [j.id for j in jobs], "keys": keys}
    found: dict[tuple[str, str], Any] = {}
    for row in rows:
        if row[STATE] in STORED_LIVE and row[KEY] is not None:
            found[("key", row[KEY])] = row
        if row[FOUND["holds_id"]]:
            found[("id", row[ID])] = row
    return found


def enqueue(
    cur: Any, q: dict[str, str], jobs: Sequence[NewJob], now: float | None, channel: str | None
) -> list[Job]:
    """`enqueue_steps` run on a sync cursor."""
    return drive(cur, enqueue_steps(q, jobs, now, channel))


def enqueue_steps(
    q: dict[str, str], jobs: Sequence[NewJob], now: float | None, channel: str | None
) -> Steps[list[Job]]:
    """Write the batch in the cursor's transaction and return the snapshots in order (JOB-09,
    DEP-01). Atomic with that transaction: nothing of the batch exists until it commits.

    With `channel`, the transaction also notifies it (sent at commit). Our own transactions
    pass None and notify after commit instead: a notifying transaction holds a global lock
    through its commit's flush, which would serialise every enqueue of the database."""
    later, _queues = yield from enqueue_later_steps(q, jobs, now, channel)
    return [make() for make in later]


def enqueue_later_steps(
    q: dict[str, str], jobs: Sequence[NewJob], now: float | None, channel: str | None
) -> Steps[tuple[list[Later], set[str]]]:
    """`enqueue_steps` with the snapshots left to decode: one `Later` per job (a call that
    builds its Job from the row already read), and the queues of the jobs added. Every row is
    read and every job found before this returns, so what is left cannot change the outcome;
    the async store leaves it for after the commit, a few rows per turn of the event loop
    (stores/aio.py Grouped)."""
    primary, alias = _batch(jobs)
    todo = [jobs[i] for i in primary]
    initial = yield from _initial_states(q, todo)
    rows = yield q["enqueue"], _params(todo, initial, now, channel)
    written = {row[ID]: row for row in rows}
    replaced = [row[ID] for row in written.values() if row[WRITTEN["replaced"]]]
    if replaced:
        yield q["forget"], {"ids": replaced}
    blocked = [(p, row[ID]) for row in written.values() if row[STATE] == BLOCKED for p in row[AFTER_IDS]]
    if blocked:
        parents, children = [p for p, _ in blocked], [c for _, c in blocked]
        yield q["enqueue_deps"], {"parents": parents, "children": children}
    missing = [job for job in todo if job.id not in written]
    found = (yield from existing_steps(q, missing, now)) if missing else {}
    out: list[Later | None] = [None] * len(jobs)
    for i, job in enumerate(jobs):
        if i in alias:
            first = out[alias[i]]
            assert first is not None
            out[i] = functools.partial(_repeated, first)
        elif job.id in written:
            row = written[job.id]
            out[i] = functools.partial(to_job, row, row[WRITTEN["now"]], True)
        else:
            row = found.get(("id", job.id)) or found.get(("key", job.key or ""))
            if row is None:
                raise StoreError(f"job {job.id!r} was neither added nor found; try again")
            out[i] = functools.partial(to_job, row, row[FOUND["now"]], False)
    return [make for make in out if make is not None], {row[QUEUE] for row in written.values()}


def _repeated(first: Later) -> Job:
    """The snapshot of a repeat in the batch of an earlier item's id or key: that item's job,
    not created by this one."""
    return dataclasses.replace(first(), created=False)


def caller_steps(
    q: dict[str, str], jobs: Sequence[NewJob], now: float | None, channel: str
) -> Steps[list[Job]]:
    """The batch written in the caller's open transaction (JOB-02): its synchronous_commit
    raised for that transaction alone when weaker than `on`, and the clock read now (the
    caller's transaction may be old: its now() is when it began). The caller's commit
    notifies `channel`."""
    yield q["raise_sync_commit"], {}
    if now is None:
        [(now,)] = yield q["clock"], {}
    return (yield from enqueue_steps(q, jobs, now, channel))


def wake(q: dict[str, str], channel: str, queues: set[str]) -> tuple[str, dict[str, Any]]:
    """The statement (and its parameters) that wakes the waiters of `queues` after a commit,
    for the sync and the async store: `notify_one` for one queue (a text parameter; an array
    costs psycopg's Python dumper ~12 us more per enqueue), `notify` for several."""
    if len(queues) == 1:
        return q["notify_one"], {"channel": channel, "queue": next(iter(queues))}
    return q["notify"], {"channel": channel, "queues": sorted(queues)}


TEXT, INT4, FLOAT8 = 25, 23, 701
_ONE_TYPES = (TEXT, TEXT, TEXT, TEXT, INT4, FLOAT8, FLOAT8, INT4, TEXT, TEXT, FLOAT8, FLOAT8, FLOAT8)


@functools.cache
def wire(schema: str) -> dict[str, Prepared]:
    """The statements of enqueue.sql composed for `schema`, ready for oneflush.exchange."""
    types = {"enqueue_one": _ONE_TYPES, "wake_one": (TEXT, TEXT)}
    return {
        name: Prepared(without_comments(compose(text, schema)), types.get(name, ()))
        for name, text in blocks("enqueue.sql").items()
    }


def enqueue_one(
    conn: Any, schema: str, channel: str, job: NewJob, now: float | None, weak: bool
) -> float | None:
    """Add `job` (one without parents) in a transaction of its own and wake its queue's waiters
    after the commit, all in one write and one wait (oneflush.py): BEGIN, synchronous_commit
    raised when the session's is weaker (`weak`), the INSERT, COMMIT, then the wake-up in an
    implicit transaction of its own. The wake-up goes whether or not the job was added (its id
    or key may be held): a spurious one costs a waiter one look. Returns the clock the job was
    written with, or None when it was not added. Sent again after an unanswered COMMIT, it
    meets its own id and adds nothing (the caller then finds the job)."""
    w = wire(schema)
    params = (
        job.id,
        job.task,
        job.queue,
        job.payload,
        job.priority,
        float(job.delay),
        None if job.at is None else float(job.at),
        job.max_attempts,
        job.key,
        job.group,
        float(job.dedupe),
        float(job.keep),
        now,
    )
    statements: list[tuple[Prepared, Sequence[Param]]] = [(w["begin"], ())]
    if weak:
        statements.append((w["raise_sync_commit"], ()))
    statements += [(w["enqueue_one"], params), (w["commit"], ()), (w["wake_one"], (channel, job.queue))]
    results = exchange(conn, statements)
    inserted = results[-3]
    return _FLOAT8(inserted.get_value(0, 0))[0] if inserted.ntuples else None


def one_job(
    job: NewJob,
    written_at: float | None,
    holder_of: Callable[[NewJob], dict],
    replace: Callable[[NewJob], Job],
) -> Job:
    """The snapshot of a single enqueue: the job as written when `enqueue_one` added it (at
    clock `written_at`), or else the job that holds its id or key, read by `holder_of(job)` (a
    later statement: under READ COMMITTED the same as in the enqueue's own transaction), or else
    `replace(job)`: the batch way, for an id whose final job may be replaced (JOB-09), which
    `enqueue_one` leaves alone."""
    if written_at is not None:
        due = written_at + float(job.delay) if job.at is None else float(job.at)
        return created_snapshot(job, due, written_at)
    found = holder_of(job)
    return holding(job, found) if held(job, found) else replace(job)


def one_params(job: NewJob, now: float | None) -> dict[str, Any]:
    """The parameters of queries.sql's `enqueue_one` for `job` (the async store's)."""
    return {
        "now": now,
        "id": job.id,
        "task": job.task,
        "queue": job.queue,
        "payload": job.payload,
        "priority": job.priority,
        "delay": float(job.delay),
        "at": None if job.at is None else float(job.at),
        "key": job.key,
        "group": job.group,
        "max_attempts": job.max_attempts,
        "dedupe": float(job.dedupe),
        "keep": float(job.keep),
    }


def held(job: NewJob, found: dict) -> bool:
    """Whether what `existing_steps` found holds `job`'s id or key."""
    return ("id", job.id) in found or (job.key is not None and ("key", job.key) in found)


def added_one(rows: list) -> Job | None:
    """The added job from the rows of `enqueue_one`, or None when it added nothing."""
    return to_job(rows[0], rows[0][WRITTEN["now"]], created=True) if rows else None


def holding(job: NewJob, found: dict) -> Job:
    """The job that holds `job`'s id or key, from what `existing_steps` found."""
    row = found.get(("id", job.id)) or found.get(("key", job.key or ""))
    if row is None:
        raise StoreError(f"job {job.id!r} was neither added nor found; try again")
    return to_job(row, row[FOUND["now"]], created=False)
