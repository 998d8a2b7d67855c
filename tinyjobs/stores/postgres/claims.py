"""Claiming on PostgreSQL: `FOR UPDATE SKIP LOCKED` in batches, limits counted in the same
transaction. Only queues with limits take a lock (a transaction-level advisory lock per limited
queue), so claims of unlimited queues never wait on one another (LIM-01..03)."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

from ...holder import Holder
from ..base import Claimed, QueuePolicy
from .rows import tail, to_job

# The columns `claim` returns after COLUMNS.
CLAIMED = tail("token", "lease_seconds", "now", "steps")

_NO_LIMIT = 2**31 - 1


def limited(policy: QueuePolicy) -> bool:
    return any(
        v is not None for v in (policy.concurrency, policy.rate, policy.group_concurrency, policy.group_rate)
    )


def _counts(cur: Any, q: dict[str, str], policy: QueuePolicy, now: float) -> tuple:
    """(running, recent starts, running per group, recent starts per group) of one queue."""
    cur.execute(
        q["limit_counts"],
        {
            "now": now,
            "queue": policy.name,
            "period": float(policy.rate[1]) if policy.rate else 0.0,
            "gperiod": float(policy.group_rate[1]) if policy.group_rate else 0.0,
        },
    )
    running, started = 0, 0
    grun: dict[str, int] = {}
    gstart: dict[str, int] = {}
    for kind, group, n in cur.fetchall():
        if kind == "run":
            running += n
            if group is not None:
                grun[group] = n
        elif kind == "rate":
            started = n
        else:
            gstart[group] = n
    return running, started, grun, gstart


def _group_rooms(policy: QueuePolicy, grun: dict, gstart: dict) -> tuple[dict[str, int], int]:
    """Room left per group seen recently, and the room of any other group."""
    caps = []
    if policy.group_concurrency is not None:
        caps.append(policy.group_concurrency)
    if policy.group_rate is not None:
        caps.append(policy.group_rate[0])
    default = min(caps) if caps else _NO_LIMIT
    rooms: dict[str, int] = {}
    for group in set(grun) | set(gstart):
        room = default
        if policy.group_concurrency is not None:
            room = min(room, policy.group_concurrency - grun.get(group, 0))
        if policy.group_rate is not None:
            room = min(room, policy.group_rate[0] - gstart.get(group, 0))
        rooms[group] = max(room, 0)
    return rooms, default


def candidates(cur: Any, q: dict[str, str], policy: QueuePolicy, now: float, limit: int) -> list:
    """Ids of due jobs of a limited queue that its limits let start now, in claim order. The
    caller holds the queue's advisory lock, so no other claim of it counts at the same time."""
    running, started, grun, gstart = _counts(cur, q, policy, now)
    room = limit
    if policy.concurrency is not None:
        room = min(room, policy.concurrency - running)
    if policy.rate is not None:
        room = min(room, policy.rate[0] - started)
    if room <= 0:
        return []
    rooms, default = _group_rooms(policy, grun, gstart)
    cur.execute(
        q["limit_candidates"],
        {
            "now": now,
            "queue": policy.name,
            "groups": list(rooms),
            "rooms": list(rooms.values()),
            "default_room": default,
            "limit": room,
        },
    )
    return [row[0] for row in cur.fetchall()]


def wanted(queues: Mapping[str, QueuePolicy], limit: int) -> bool:
    """Whether `start` would claim at all."""
    return limit > 0 and bool(queues)


def free_only(queues: Mapping[str, QueuePolicy]) -> bool:
    """Whether no queue has a limit: the claim can then be `claim_free` (m007's function,
    which takes the pause locks itself)."""
    return not any(limited(policy) for policy in queues.values())


def params(
    schema: str, queues: Mapping[str, QueuePolicy], holder: Holder, limit: int, now: float | None
) -> dict[str, Any]:
    """The parameters of `claim` (and, with `ids`, of `claim_limited`)."""
    return {
        "now": now,
        "queues": list(queues),
        "leases": [float(p.lease) for p in queues.values()],
        "free": [name for name, policy in queues.items() if not limited(policy)],
        "limit": limit,
        "holder": holder.id,  # the execution's host and pid are read from it (m006)
        "schema": schema,
    }


def lock(cur: Any, q: dict[str, str], schema: str, queues: Mapping[str, QueuePolicy]) -> None:
    """LIM-04: the shared pause locks of `queues`, in a statement of their own (see pause_lock)
    before the claim statement, so that its snapshot is taken after any pause in progress
    committed; the statement also sets the transaction's plans generic (queries.sql)."""
    cur.execute(q["pause_lock"], {"schema": schema, "queues": sorted(queues)})


def start(
    cur: Any,
    q: dict[str, str],
    schema: str,
    queues: Mapping[str, QueuePolicy],
    holder: Holder,
    limit: int,
    now: float | None,
    locked: bool = False,
    dry: bool = False,
) -> Callable[[], list[Claimed]]:
    """Take up to `limit` leases in the current transaction (JOB-01, JOB-03, LIM-01..03):
    return the function that reads the claimed jobs. Without limits the claim is one
    statement, only queued here, so that in pipeline mode it leaves with what was queued
    before it: `claim_free` when `dry` (the caller expects it to find nothing: m007's
    function, which takes the pause locks itself and costs next to nothing then), else
    `claim` after the pause locks (`lock`, unless `locked`: the transaction already ran it).
    Limited queues are locked and counted first, which reads."""
    if limit <= 0 or not queues:
        return list
    sent = params(schema, queues, holder, limit, now)
    if dry and free_only(queues):
        cur.execute(q["claim_free"], sent)
        return lambda: read(cur.fetchall())
    if not locked:
        lock(cur, q, schema, queues)
    lim = sorted(name for name, policy in queues.items() if limited(policy))
    ids: list[str] = []
    if lim:
        cur.execute(q["limit_lock"], {"schema": schema, "queues": lim})
        if now is None:
            # clock_timestamp(), not now(): the transaction's start time is older than the lock
            # wait, and a claim that waited must not judge rate windows by it.
            cur.execute(q["clock"])
            now = cur.fetchone()[0]
        for name in lim:
            ids += candidates(cur, q, queues[name], now, limit)
    cur.execute(q["claim_limited" if lim else "claim"], {**sent, "now": now, "ids": ids})
    return lambda: read(cur.fetchall())


def read(rows: list[tuple[Any, ...]]) -> list[Claimed]:
    """The Claimed of `claim`'s or `claim_limited`'s rows."""
    return [claimed(row) for row in rows]


def claimed(row: tuple[Any, ...]) -> Claimed:
    """A Claimed from a row of `claim` (or of `settle_claim`, whose columns start alike)."""
    steps = row[CLAIMED["steps"]]
    return Claimed(
        job=to_job(row, row[CLAIMED["now"]]),
        token=row[CLAIMED["token"]],
        lease=row[CLAIMED["lease_seconds"]],
        steps=json.loads(steps) if steps else {},
    )
