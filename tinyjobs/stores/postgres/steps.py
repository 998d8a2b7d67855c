"""Store operations written once, run on a sync cursor or an async one.

An operation whose statements depend on the rows of earlier ones (enqueue, get, cancel) is a
generator: it yields `(statement, params)`, is sent back that statement's rows (an empty list
for a statement that returns none) and returns its result. `drive` runs it on a psycopg
Cursor, `adrive` on an AsyncCursor, so the sync store and the async one (aio.py) send the same
SQL in the same order and decode the same rows, with no copy of the logic."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Generator
from typing import Any, TypeVar

from ...job import CANCELLED, Job
from ..rules import DEPENDENCY_REASONS
from .rows import tail, to_execution, to_job

T = TypeVar("T")
Statement = tuple[str, dict[str, Any]]
Steps = Generator[Statement, list[Any], T]
# The columns `get` returns after COLUMNS.
GOT = tail("now", "ahead")


def drive(cur: Any, steps: Steps[T]) -> T:
    """Run `steps` on a sync cursor, inside whatever transaction the cursor is in."""
    try:
        statement = next(steps)
        while True:
            cur.execute(*statement)
            statement = steps.send(cur.fetchall() if cur.description else [])
    except StopIteration as stop:
        return stop.value


async def adrive(
    cur: Any, steps: Steps[T], prepare: Callable[[Any, Statement], Awaitable[Statement]] | None = None
) -> T:
    """Run `steps` on an async cursor, inside whatever transaction the cursor is in; each
    statement through `await prepare(cur, statement)` first when given (the async store packs
    the arrays of a batch there: packed.py)."""
    try:
        statement = next(steps)
        while True:
            if prepare is not None:
                statement = await prepare(cur, statement)
            await cur.execute(*statement)
            statement = steps.send(await cur.fetchall() if cur.description else [])
    except StopIteration as stop:
        return stop.value


def get(q: dict[str, str], job_id: str, now: float | None, executions: bool) -> Steps[Job | None]:
    """The job's snapshot (with `ahead` and, when asked, its executions), or None."""
    rows = yield q["get"], {"now": now, "id": job_id}
    if not rows:
        return None
    found = (yield q["executions"], {"id": job_id}) if executions else None
    return snapshot(rows, found)


def snapshot(rows: list[Any], found: list[Any] | None) -> Job | None:
    """The Job of `get`'s rows (None: no such job), with the executions of `found` (the rows of
    `executions`) when they were read."""
    if not rows:
        return None
    row = rows[0]
    job = to_job(row, row[GOT["now"]], ahead=row[GOT["ahead"]])
    if found is not None:
        job.executions = [to_execution(r) for r in found]
    return job


def cancel(q: dict[str, str], job_id: str, now: float | None, channel: str) -> Steps[bool]:
    """Cancel (JOB-08): a job not yet running is removed and its dependents are cancelled on
    record; a running one is marked. False when there was nothing to cancel."""
    rows = yield q["cancel"], {"id": job_id, "channel": channel}
    if not rows:  # else (marked, deleted, queue, notified)
        return False
    _marked, deleted, _queue, _notified = rows[0]
    if deleted:
        yield q["forget"], {"ids": [job_id]}
        reasons = [DEPENDENCY_REASONS[CANCELLED]]  # as settle.cascade words it
        yield q["cascade_cancel"], {"now": now, "ids": [job_id], "reasons": reasons}
    return True
