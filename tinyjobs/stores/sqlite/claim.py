"""Claiming due jobs with every limit counted in the same transaction (JOB-01, LIM-01..03)."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Mapping

from tinyjobs.holder import Holder
from tinyjobs.stores.base import Claimed, QueuePolicy

from .rows import DUE, HAS_STEPS, LEASE_SECONDS, PRIORITY, SEQ, TOKEN, Q, as_json, claimed_job, ints_json

# The claim statement's rows (by position: queries.sql, `claim`), the steps of those jobs, and
# the queues where due jobs were left behind because `limit` was reached (the store passes a
# wake-up on to another waiter of those: a burst reaches every idle worker, one by one).
Taken = tuple[list[tuple], dict[int, dict[str, str]], set[str]]


def claim_jobs(
    conn: sqlite3.Connection,
    queues: Mapping[str, QueuePolicy],
    holder: Holder,
    limit: int,
    now: float,
    at_once: bool = True,
    left: bool = True,
) -> Taken:
    """Inside an open write transaction: pick up to `limit` jobs in claim order across
    `queues`, each queue within its limits, and lease them (the lease's holder, start and
    attempt on the job's row are the running attempt's record until it ends). The snapshots are built by
    `claimed` once the transaction has committed: decoding payloads need not hold the
    file's write lock, which every other worker is waiting for. One queue without limits is
    claimed with one statement (`_claim_due`) unless `at_once` is False (a claim that must
    find its candidates before it writes: SQLiteStore._claim_reading_first); outside a
    transaction that statement is the whole claim, committed by its end. `left` False: the
    caller has no use for the queues where due jobs were left behind (the third item may then
    be empty when it would not be), and that claim asks nothing more to tell them."""
    if at_once and one_statement(queues):
        (policy,) = queues.values()
        return _claim_due(conn, policy, holder, limit, now, left)
    picks: list[tuple[int, float, int, str]] = []  # (-priority, due, seq, queue)
    more: set[str] = set()
    for policy in queues.values():
        # A paused queue's candidates are none (LIM-04: the candidate statements read `paused`
        # in this transaction, serialised with pause()).
        room = _queue_room(conn, policy, limit, now)
        if room > 0:
            found, left = _pick(conn, policy, room, now)
            picks.extend(found)
            if left and room == limit:
                # Not when the queue's own limits cut its room: another worker could not
                # take those jobs either (a lease ending there wakes it, see store._settled).
                more.add(policy.name)
    picks.sort()
    more.update(pick[3] for pick in picks[limit:])
    picks = picks[:limit]
    if not picks:
        return [], {}, more
    by_queue: dict[str, list[int]] = {}
    for _, _, seq, name in picks:
        by_queue.setdefault(name, []).append(seq)
    rows: list[tuple] = []
    cur = conn.cursor()
    cur.row_factory = None  # plain tuples, read by position (rows.claimed_job)
    for name, seqs in by_queue.items():
        lease = queues[name].lease
        params = {"now": now, "lease": lease, "holder": holder.id, "seqs": ints_json(seqs)}
        rows.extend(cur.execute(Q["claim"], params).fetchall())
    # No execution row here: the job's row describes the running attempt (attempts, started_at,
    # holder) and its execution is written once, when the attempt ends (migration 5).
    steps: dict[int, dict[str, str]] = {}
    stepped = [row[SEQ] for row in rows if row[HAS_STEPS]]  # the jobs that kept steps
    if stepped:
        for seq, step, value in conn.execute(Q["claim_steps"], (ints_json(stepped),)):
            steps.setdefault(seq, {})[step] = value
    return rows, steps, more


def unlimited(policy: QueuePolicy) -> bool:
    """Whether a queue's claim counts nothing: no concurrency or rate, of its own or per group."""
    return (
        policy.concurrency is None
        and policy.rate is None
        and policy.group_concurrency is None
        and policy.group_rate is None
    )


def one_statement(queues: Mapping[str, QueuePolicy]) -> bool:
    """Whether claim_jobs claims `queues` with one statement (claim_due): one queue, unlimited.
    Outside a transaction that statement is then the whole claim (SQLiteStore.claim)."""
    return len(queues) == 1 and unlimited(next(iter(queues.values())))


def _claim_due(
    conn: sqlite3.Connection, policy: QueuePolicy, holder: Holder, limit: int, now: float, left: bool
) -> Taken:
    """claim_jobs for one queue without limits: candidates and leases in one statement
    (claim_due), the steps in its last column. Run outside a transaction, it is one autocommit
    statement: its rows come back once its commit is done (fetchall steps it to its end, where
    SQLite commits; a failed commit raises, and nothing was taken). Whether due jobs were left
    behind is asked only when the claim is full and `left` (one read; a job enqueued meanwhile
    sends a wake-up of its own anyway)."""
    cur = conn.cursor()
    cur.row_factory = None  # plain tuples, read by position (rows.claimed_job)
    params = {"now": now, "lease": policy.lease, "holder": holder.id, "queue": policy.name, "limit": limit}
    rows = cur.execute(Q["claim_due"], params).fetchall()
    steps: dict[int, dict[str, str]] = {}
    for row in rows:
        if row[HAS_STEPS] is not None:
            steps[row[SEQ]] = json.loads(row[HAS_STEPS])
    more: set[str] = set()
    if left and len(rows) == limit:
        params = {"queue": policy.name, "now": now, "limit": 1}
        try:
            behind = conn.execute(Q["claim_candidates_first"], params).fetchone() is not None
        except sqlite3.OperationalError:
            behind = True  # after an autocommit claim the leases are taken: a wake-up too many
        if behind:
            more.add(policy.name)
    return rows, steps, more


def claimed(taken: Taken) -> list[Claimed]:
    """The snapshots of what claim_jobs took, in claim order (priority, due, seq)."""
    rows, steps, _ = taken
    rows.sort(key=lambda row: (-row[PRIORITY], row[DUE], row[SEQ]))
    return [
        Claimed(claimed_job(row), row[TOKEN], float(row[LEASE_SECONDS]), steps.get(row[SEQ], {}))
        for row in rows
    ]


def _queue_room(conn: sqlite3.Connection, policy: QueuePolicy, limit: int, now: float) -> int:
    """How many jobs the queue may start now: `limit` cut by concurrency and rate."""
    room = limit
    if policy.concurrency is not None:
        running = conn.execute(Q["claim_running"], (policy.name,)).fetchone()[0]
        room = min(room, policy.concurrency - running)
    if policy.rate is not None and room > 0:
        count, period = policy.rate
        params = {"queue": policy.name, "since": now - period, "now": now}
        started = conn.execute(Q["claim_starts"], params).fetchone()[0]
        room = min(room, count - started)
    return room


def _pick(
    conn: sqlite3.Connection, policy: QueuePolicy, room: int, now: float
) -> tuple[list[tuple[int, float, int, str]], bool]:
    """Up to `room` candidates of one queue in claim order; a full group's jobs are set aside
    and later jobs of other groups still taken (LIM-03). Also whether due jobs are left once
    the room is filled: each page asks for one row more than it needs, to know (a job left
    in a group found full counts too: a wake-up too many is harmless, one too few is not)."""
    grouped = policy.group_concurrency is not None or policy.group_rate is not None
    running: dict[str, int] = {}
    starts: dict[str, int] = {}
    if policy.group_concurrency is not None:
        running = dict(conn.execute(Q["claim_running_groups"], (policy.name,)).fetchall())
    if policy.group_rate is not None:
        params = {"queue": policy.name, "since": now - policy.group_rate[1], "now": now}
        starts = dict(conn.execute(Q["claim_starts_groups"], params).fetchall())
    full = {g for g in set(running) | set(starts) if _is_full(policy, g, running, starts)}
    picks: list[tuple[int, float, int, str]] = []
    taken: list[int] = []
    left = False
    while len(picks) < room:
        # Ask for a few more than needed, since jobs of groups that fill up are skipped.
        page = (room - len(picks)) * (2 if grouped else 1) + (8 if grouped else 1)
        params = {"queue": policy.name, "now": now, "limit": page}
        if full or taken:
            params["full"], params["taken"] = as_json(full), as_json(taken)
            rows = conn.execute(Q["claim_candidates"], params).fetchall()
        else:
            rows = conn.execute(Q["claim_candidates_first"], params).fetchall()
        for seq, queue, group, priority, due in rows:
            if len(picks) >= room:
                left = True  # a candidate past the room
                break
            if group is not None and group in full:
                continue
            picks.append((-priority, due, seq, queue))
            taken.append(seq)
            if group is not None and grouped:
                running[group] = running.get(group, 0) + 1
                starts[group] = starts.get(group, 0) + 1
                if _is_full(policy, group, running, starts):
                    full.add(group)
        if len(rows) < page:
            break
    # The room filled on the page's last row: whether any come after it is unknown.
    return picks, left or (len(picks) >= room and len(rows) == page)


def _is_full(policy: QueuePolicy, group: str, running: dict[str, int], starts: dict[str, int]) -> bool:
    if policy.group_concurrency is not None and running.get(group, 0) >= policy.group_concurrency:
        return True
    return policy.group_rate is not None and starts.get(group, 0) >= policy.group_rate[0]
