"""Ending attempts on PostgreSQL: settlements in one statement for many (group commit), the
reaper and end_leases, and what follows a job's end: dependents unblocked or cancelled."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from ...job import DONE, bound_error
from ..base import Claimed, Settlement
from ..rules import DEPENDENCY_REASONS, PENDING
from . import claims
from .rows import tail

# The columns `settle_claim` returns after COLUMNS: CLAIMED's (claims.py), then the settlements'.
CYCLE = tail("token", "lease_seconds", "now", "steps", "applied", "wake")


def follow_up(
    cur: Any,
    q: dict[str, str],
    now: float | None,
    ended: Sequence[tuple[str, str, str, bool]],
) -> set[str]:
    """After jobs ended, as (id, new state, queue, has dependents): unblock the dependents of
    done jobs, cancel those of failed and cancelled ones (recursively, on record), and notify
    return the queues that have jobs due again, to notify after commit. Runs in the
    caller's transaction."""
    queues = {queue for _, state, queue, _ in ended if state == PENDING}
    done = [job_id for job_id, state, _, deps in ended if deps and state == DONE]
    dead = [(job_id, state) for job_id, state, _, deps in ended if deps and state in DEPENDENCY_REASONS]
    if done:
        # Lock the dependents first: two parents ending at once then see each other's commit.
        cur.execute(q["lock_dependents"], {"ids": done})
        cur.execute(q["unblock"], {"now": now, "ids": done})
        queues.update(row[0] for row in cur.fetchall())
    if dead:
        cascade(cur, q, now, [i for i, _ in dead], [s for _, s in dead])
    return queues


def cascade(cur: Any, q: dict[str, str], now: float | None, ids: list[str], states: list[str]) -> None:
    """Cancel, on record, the blocked jobs that run after `ids`, which ended in `states` (failed
    or cancelled), and theirs, recursively (rules.dependency_error)."""
    reasons = [DEPENDENCY_REASONS[state] for state in states]
    cur.execute(q["cascade_cancel"], {"now": now, "ids": ids, "reasons": reasons})


def send(cur: Any, q: dict[str, str], settlements: Sequence[Settlement], now: float | None) -> Any:
    """The settle statement, queued (in pipeline mode it waits for a read); `finish` reads it.
    Behind it, on a cursor of its own that this returns for `finish`, which of the jobs have
    dependents (`with_dependents`: a statement of its own sees a dependent enqueued while the
    settle waited for its parent's row; in the same round trip)."""
    dependents = cur.connection.cursor()
    settle_statement(cur, q, settlements, now)
    dependents.execute(q["with_dependents"], {"ids": [s.job_id for s in settlements]})
    return dependents


def settle_statement(
    cur: Any, q: dict[str, str], settlements: Sequence[Settlement], now: float | None
) -> None:
    """Queue the settle statement of `settlements` on `cur`."""
    cur.execute(q["settle"], {"now": now, **arrays(settlements)})


def arrays(settlements: Sequence[Settlement]) -> dict[str, list[Any]]:
    """The settlements' parameters of `settle` and `settle_claim`, one array per field."""
    return {
        "ids": [s.job_id for s in settlements],
        "tokens": [s.token for s in settlements],
        "outcomes": [s.outcome for s in settlements],
        "results": [s.result for s in settlements],
        "errors": [bound_error(s.error) for s in settlements],
        "delays": [float(s.delay) for s in settlements],
        "executions": [s.execution for s in settlements],
    }


def read_cycle(rows: list[tuple[Any, ...]], count: int) -> tuple[list[bool], set[str], list[Claimed]]:
    """The rows of `settle_claim` (m008) for `count` settlements: True for each settlement
    applied, the queues to wake after commit (a settled job due again, a dependent unblocked),
    and the jobs claimed, best first. The first row is the settlements', the others the
    claimed jobs'."""
    first = rows[0]
    applied = [False] * count
    for ordinal in first[CYCLE["applied"]]:
        applied[ordinal - 1] = True
    claimed = [claims.claimed(row) for row in rows[1:]]
    return applied, set(first[CYCLE["wake"]]), claimed


def finish(
    cur: Any,
    q: dict[str, str],
    settlements: Sequence[Settlement],
    now: float | None,
    retrying: bool,
    dependents: Any,
) -> tuple[list[bool], set[str]]:
    """Read what `send` did and do what follows in the same transaction: True for each
    settlement applied (JOB-05), and the queues to notify after commit.

    When `retrying`, an earlier try may have committed: a settlement whose token is the job's
    last settled token counts as applied (settlement is idempotent by lease token)."""
    rows = cur.fetchall()  # (ordinal, new state, queue, has dependents); state None: not applied
    # Which have dependents: read by a statement of its own (see `send`), not the settle's flag.
    parents = {row[0] for row in dependents.fetchall()}
    applied = [state is not None for _, state, _, _ in rows]
    ended = [
        (s.job_id, state, queue, s.job_id in parents)
        for s, (_, state, queue, _) in zip(settlements, rows, strict=True)
        if state is not None
    ]
    due_again = follow_up(cur, q, now, ended)
    if retrying and not all(applied):
        cur.execute(q["settled_before"], {"ids": [s.job_id for s in settlements]})
        last = dict(cur.fetchall())
        applied = [ok or last.get(s.job_id) == s.token for ok, s in zip(applied, settlements, strict=True)]
    return applied, due_again


def end_leases(
    cur: Any, q: dict[str, str], name: str, params: dict, now: float | None
) -> tuple[int, set[str]]:
    """End leases (`end_expired` or `end_holders`) in the current transaction: jobs go back to
    waiting, or fail when they used their attempts, or end cancelled (JOB-04, DUR-02). Returns
    how many, and the queues to notify after commit."""
    cur.execute(q[name], {"now": now, **params})
    ended = [(job_id, state, queue) for job_id, state, queue, _ in cur.fetchall()]
    parents: set[str] = set()
    if ended:  # read anew, as in `send`: a dependent may have been enqueued while it waited
        cur.execute(q["with_dependents"], {"ids": [job_id for job_id, _, _ in ended]})
        parents = {row[0] for row in cur.fetchall()}
    return len(ended), follow_up(cur, q, now, [(*row, row[0] in parents) for row in ended])


def send_whole(
    conn: Any, q: dict[str, str], settlements: Sequence[Settlement], now: float | None, retrying: bool
) -> Callable[[], tuple[list[bool], set[str]]]:
    """The settle and everything that follows it, queued at once (pipeline mode: they leave
    with the transaction's COMMIT, one round trip for the worker's cycle): the settle, then
    for every settled job, whichever way it ended, what `follow_up` does for the jobs it reads
    as ended, in SQL that finds the dependents itself (statements of their own after the
    settle's, so each sees dependents enqueued while the settle waited for a parent's row,
    which `with_dependents` was for): their rows locked, the blocked ones of done parents
    unblocked (unblock checks that every parent is done), those of failed or cancelled ones
    cancelled on record (cascade_settled). Without dependents each is an index probe. Returns
    the function that reads (applied, queues to notify) once the results arrived; `retrying`
    adds settled_before, as `finish` does."""
    cur, locked, unblocked, cancelled, before = (conn.cursor() for _ in range(5))
    ids = [s.job_id for s in settlements]
    settle_statement(cur, q, settlements, now)
    # Lock the dependents first: two parents ending at once then see each other's commit.
    locked.execute(q["lock_dependents"], {"ids": ids})
    unblocked.execute(q["unblock"], {"now": now, "ids": ids})
    cancelled.execute(q["cascade_settled"], {"now": now, "ids": ids})
    if retrying:
        before.execute(q["settled_before"], {"ids": ids})

    def read() -> tuple[list[bool], set[str]]:
        rows = cur.fetchall()  # (ordinal, new state, queue, has dependents); None: not applied
        applied = [state is not None for _, state, _, _ in rows]
        queues = {queue for _, state, queue, _ in rows if state == PENDING}
        locked.fetchall()
        queues.update(row[0] for row in unblocked.fetchall())
        cancelled.fetchall()
        if retrying and not all(applied):
            last = dict(before.fetchall())
            applied = [
                ok or last.get(s.job_id) == s.token for ok, s in zip(applied, settlements, strict=True)
            ]
        return applied, queues

    return read
