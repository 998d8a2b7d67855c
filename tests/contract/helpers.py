"""Small builders for the store contract suite: jobs, queue policies, fake holders, and short
forms of the store calls that every test makes. Time is explicit: tests pass `now`."""

from __future__ import annotations

from typing import Any

from tinyjobs.holder import Holder, host_id
from tinyjobs.job import Job
from tinyjobs.stores.base import Claimed, NewJob, QueuePolicy, Settlement, Store

T0 = 1_700_000_000.0  # the suite's "now"; tests move time by passing T0 + seconds
LEASE = 30.0


def new(job_id: str, **fields: Any) -> NewJob:
    """A NewJob of task `work` in queue `default` unless `fields` say otherwise."""
    fields.setdefault("task", "work")
    return NewJob(id=job_id, **fields)


def policy(name: str = "default", **limits: Any) -> QueuePolicy:
    limits.setdefault("lease", LEASE)
    return QueuePolicy(name=name, **limits)


def queues(*policies: QueuePolicy | str) -> dict[str, QueuePolicy]:
    """{name: policy} for QueuePolicy values or plain queue names (no limits); `default` alone
    when none is given."""
    chosen = [p if isinstance(p, QueuePolicy) else policy(p) for p in policies] or [policy()]
    return {p.name: p for p in chosen}


def holder(pid: int = 12345, started: int = 1, host: str | None = None) -> Holder:
    """A fake holder on this host (or on `host`): no process need exist for it."""
    return Holder(host or host_id(), pid, started)


def add(store: Store, *ids: str, now: float = T0, **fields: Any) -> list[Job]:
    """Enqueue one job per id, all with the same fields, in one batch."""
    return store.enqueue([new(i, **fields) for i in ids], now=now)


def claim(
    store: Store,
    limit: int = 10,
    now: float = T0,
    on: dict[str, QueuePolicy] | None = None,
    by: Holder | None = None,
) -> list[Claimed]:
    return store.claim(on or queues(), by or holder(), limit, now=now)


def claim_one(store: Store, now: float = T0, **kwargs: Any) -> Claimed:
    """Claim exactly one job; fails the test when the claim takes none or several."""
    claimed = claim(store, 1, now=now, **kwargs)
    assert len(claimed) == 1, f"expected one claimed job, got {[c.job.id for c in claimed]}"
    return claimed[0]


def settle(store: Store, claimed: Claimed, outcome: str, now: float = T0, **fields: Any) -> bool:
    """Settle one claimed attempt and return whether it applied."""
    [applied] = store.settle([Settlement(claimed.job.id, claimed.token, outcome, **fields)], now=now)
    return applied


def ids(items: list[Claimed] | list[Job]) -> list[str]:
    return [c.job.id if isinstance(c, Claimed) else c.id for c in items]


def state(store: Store, job_id: str, now: float = T0) -> str | None:
    """The job's reported state, or None when the job is gone."""
    job = store.get(job_id, now=now)
    return None if job is None else job.state
