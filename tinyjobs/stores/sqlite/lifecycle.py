"""How a job's lease ends: settlement, reaping, a dead holder; and what follows for the jobs
that run after it (DEP-01). Every function runs inside the caller's open transaction."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
from functools import lru_cache
from typing import Any

from tinyjobs.holder import Holder
from tinyjobs.job import CANCELLED, DONE, FAILED, bound_error
from tinyjobs.stores import rules
from tinyjobs.stores.base import Settlement

from .rows import Q, as_json, ints_json

# Either a Connection or a Cursor: both have execute/executemany.
Executor = Any


def delete_jobs(db: Executor, seqs: Sequence[int]) -> None:
    """Remove jobs with their steps, executions and dependency rows."""
    if not seqs:
        return
    text = as_json(seqs)
    db.execute(Q["delete_steps"], (text,))
    db.execute(Q["delete_executions"], (text,))
    db.execute(Q["delete_deps"], {"seqs": text})
    db.execute(Q["delete_jobs"], (text,))


def cancel_dependents(db: Executor, seq: int, job_id: str, state: str, now: float) -> None:
    """Cancel, on record, the blocked jobs that run after job `seq`, which ended in `state`
    (failed or cancelled), and theirs in turn."""
    todo = [(seq, job_id, state)]
    while todo:
        parent_seq, parent_id, parent_state = todo.pop()
        error = rules.dependency_error(parent_id, parent_state)
        rows = db.execute(Q["cancel_dependents"], {"error": error, "now": now, "seq": parent_seq}).fetchall()
        todo.extend((row[0], row[1], CANCELLED) for row in rows)


def finish(
    db: Executor,
    row: sqlite3.Row,
    state: str,
    now: float,
    result: str | None = None,
    error: str | None = None,
) -> set[str]:
    """Make a running job final; release or cancel the jobs that run after it. Returns the
    queues of the jobs it released (claimable now: the store wakes them)."""
    expires = rules.expires_at(state, now, row["dedupe"], row["keep"])
    db.execute(
        Q["finish_job"],
        {
            "state": state,
            "result": result,
            "error": error,
            "now": now,
            "expires": expires,
            "seq": row["seq"],
        },
    )
    if state == DONE:
        return {r[0] for r in db.execute(Q["release_dependents"], {"seq": row["seq"], "now": now})}
    cancel_dependents(db, row["seq"], row["id"], state, now)
    return set()


def requeue(db: Executor, row: sqlite3.Row, due: float, give_back: int, error: str | None = None) -> None:
    """A running job back to pending at `due`, its lease cleared (`give_back` 1 uncounts it)."""
    db.execute(Q["requeue_job"], {"due": due, "give_back": give_back, "error": error, "seq": row["seq"]})


@lru_cache(maxsize=256)
def holder_parts(holder: str) -> tuple[str, int]:
    """(host, pid) of an execution, from the holder id on the job's row ("<host>|<pid>|<start>",
    Holder.id). Cached: a worker's jobs all carry the same few holders."""
    parsed = Holder.parse(holder)
    return parsed.hostname, parsed.pid


def record_execution(db: Executor, row: sqlite3.Row, outcome: str, error: str | None, now: float) -> None:
    """Write the ended execution of the attempt running on `row` (the job's row as it was
    before its lease ended: attempts, started_at and holder describe the attempt). An attempt
    an older version claimed has an open row already: that row is closed instead."""
    host, pid = holder_parts(row["holder"])
    params = (row["seq"], row["attempts"], host, pid, row["started_at"], now, outcome, error)
    if db.execute(Q["record_execution"], (*params, row["queue"], row["grp"])).rowcount == 0:
        params_old = {"now": now, "outcome": outcome, "error": error, "seq": row["seq"]}
        db.execute(Q["close_execution"], params_old)


def end_lease(db: Executor, row: sqlite3.Row, outcome: str, now: float) -> None:
    """End a lease nobody will settle ("lease expired" or "worker lost"): the job is cancelled
    if that was asked, fails when it used its attempts, else waits again with its due time."""
    record_execution(db, row, outcome, None, now)
    cancel = bool(row["cancel_requested"])
    state, error = rules.lease_ended(outcome, cancel, row["attempts"], row["max_attempts"])
    if state == rules.PENDING:
        requeue(db, row, row["due"], 0)
    else:
        finish(db, row, state, now, error=error)


def settle_one(
    db: Executor, settlement: Settlement, now: float, woken: set[str], scheduled: set[str] | None = None
) -> bool:
    """Apply one settlement if its token is still on the job; False (nothing changed) if not.
    Adds to `woken` the queues where it may have made jobs claimable: the job's own (pending
    again, or a running slot freed) and those of the dependents it released; and to
    `scheduled` those where it may have made a job pending with a later due time (a retry's
    or snooze's delay; released dependents, which keep their own due time)."""
    row = db.execute(Q["settle_running"], (settlement.job_id, settlement.token)).fetchone()
    if row is None:
        return False
    woken.add(row["queue"])
    outcome = settlement.outcome
    error = bound_error(settlement.error)
    cancel = bool(row["cancel_requested"])
    state = rules.settled_state(outcome, cancel, row["attempts"], row["max_attempts"])
    recorded = rules.execution_outcome(outcome, settlement.execution, cancel)
    record_execution(db, row, recorded, error, now)
    if state == CANCELLED:
        finish(db, row, CANCELLED, now, error=rules.CANCELLED_WHILE_RUNNING)
    elif state == DONE:
        released = finish(db, row, DONE, now, result=settlement.result)
        woken |= released
        if scheduled is not None:
            scheduled |= released
    elif state == FAILED:
        finish(db, row, FAILED, now, error=error)
    else:
        # A hand-back keeps its due time (due again at once); retry keeps its error on record.
        due = row["due"] if outcome == "handback" else now + settlement.delay
        give_back = 1 if outcome in rules.GIVES_BACK else 0
        requeue(db, row, due, give_back, error if outcome == "retry" else None)
        if scheduled is not None and due > now:
            scheduled.add(row["queue"])
    return True


def settle_done_batch(
    db: Executor, settlements: Sequence[Settlement], now: float
) -> tuple[set[tuple[str, str]], set[str], set[str]]:
    """Apply the done settlements of a batch: one statement for the jobs, one for their
    executions (prepared once, stepped per job), one for released dependents when any of the
    jobs has them; returns
    the (job id, token) pairs applied, the queues of those jobs, and the queues of the
    dependents that released (claimable now: the store wakes them). Those left out (a lost
    lease, a cancellation asked for) are for settle_one, which tells them apart."""
    done = [(s.job_id, s.token, s.result) for s in settlements if s.outcome == "done" and not s.execution]
    if not done:
        return set(), set(), set()
    rows = db.execute(Q["settle_done"], {"batch": json.dumps(done), "now": now}).fetchall()
    released: set[str] = set()
    if rows:
        # The attempts' execution rows, written once (the job's row still holds the attempt:
        # settle_done leaves its holder there); an attempt an older version claimed has an
        # open row instead, which is closed.
        ended = [row for row in rows if not row[8]]  # no open row (an older version's claim)
        if all(row[7] is None for row in ended):  # no group: no None bound (insert_execution_done)
            executions: list[tuple] = [
                (seq, attempt, *holder_parts(holder), started, now, queue)
                for seq, _, _, queue, attempt, started, holder, _, _ in ended
            ]
            db.executemany(Q["insert_execution_done"], executions)
        elif all(row[7] is not None for row in ended):
            executions = [
                (seq, attempt, *holder_parts(holder), started, now, queue, group)
                for seq, _, _, queue, attempt, started, holder, group, _ in ended
            ]
            db.executemany(Q["insert_execution_done_group"], executions)
        else:
            executions = [
                (seq, attempt, *holder_parts(holder), started, now, DONE, None, queue, group)
                for seq, _, _, queue, attempt, started, holder, group, _ in ended
            ]
            db.executemany(Q["insert_execution"], executions)
        if len(executions) != len(rows):
            opened = ints_json(row[0] for row in rows if row[8])
            db.execute(Q["settle_close_done"], {"seqs": opened, "now": now})
        parents = [row[0] for row in rows if row[2]]
        if parents:
            params = {"seqs": ints_json(parents), "now": now}
            released = {r[0] for r in db.execute(Q["settle_release_done"], params)}
    token_of = {job_id: token for job_id, token, _ in done}  # ids of one batch are distinct jobs
    return {(row[1], token_of[row[1]]) for row in rows}, {row[3] for row in rows}, released
