"""The rows of the memory:// store: one mutable record per job, and the snapshot it reports.

The fields mirror the row that docs/store-contract.md describes, so that the memory store reads
as the reference for the SQL and Redis stores."""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field

from tinyjobs.job import RUNNING, Execution, Job
from tinyjobs.serialization import load

from ..base import NewJob, QueuePolicy
from ..rules import PENDING, STORED_FINAL, STORED_LIVE, holds_id, reported_state

Scope = tuple[str, str | None]  # (queue, None) for a queue, (queue, group) for one of its groups


@dataclass(slots=True)
class ExecutionRow:
    """One attempt, open (`outcome` None) until settle, reap or end_leases closes it."""

    attempt: int
    host: str
    pid: int
    started_at: float
    ended_at: float | None = None
    outcome: str | None = None
    error: str | None = None

    def freeze(self) -> Execution:
        return Execution(
            self.attempt,
            self.host,
            self.pid,
            self.started_at,
            self.ended_at,
            self.outcome,
            self.error,
        )


# Slotted: a row's 30 fields in an instance dict cost 2.5 times the memory (past 29 attributes
# CPython stops sharing the keys of instance dicts), and a store may hold a million rows.
@dataclass(slots=True)
class Row:
    """A job as the memory store keeps it. Only MemoryStore mutates rows, under its lock."""

    id: str
    task: str
    queue: str
    payload: str
    priority: int
    due: float
    seq: int
    state: str
    max_attempts: int
    attempt_budget: int
    key: str | None
    group: str | None
    after: tuple[str, ...]
    dedupe: float
    keep: float
    created_at: float
    attempts: int = 0
    error: str | None = None
    result: str | None = None
    started_at: float | None = None
    finished_at: float | None = None
    expires_at: float | None = None
    cancel_requested: bool = False
    token: str | None = None
    lease_expires: float | None = None
    lease_seconds: float = 0.0
    holder: str | None = None
    steps: dict[str, str] = field(default_factory=dict)
    executions: list[ExecutionRow] = field(default_factory=list)
    mark: int = 0  # the store's index: which heap entries of this row are current (index.py)

    @classmethod
    def new(cls, job: NewJob, seq: int, now: float) -> Row:
        """A pending row for `job`, due at `at` or `now + delay`."""
        return cls(
            id=job.id,
            task=job.task,
            queue=job.queue,
            payload=job.payload,
            priority=job.priority,
            due=job.at if job.at is not None else now + job.delay,
            seq=seq,
            state=PENDING,
            max_attempts=job.max_attempts,
            attempt_budget=job.max_attempts,
            key=job.key,
            group=job.group,
            after=tuple(job.after),
            dedupe=job.dedupe,
            keep=job.keep,
            created_at=now,
        )

    @property
    def live(self) -> bool:
        return self.state in STORED_LIVE

    def holds_id(self, now: float) -> bool:
        """Whether a new job with this row's id adds nothing (JOB-09)."""
        return holds_id(self.state, self.expires_at, now)

    def purgeable(self, now: float) -> bool:
        """Final and past its window: `dedupe` for done, `keep` for failed or cancelled."""
        return self.state in STORED_FINAL and self.expires_at is not None and self.expires_at <= now

    def lease_expired(self, now: float) -> bool:
        return self.state == RUNNING and self.lease_expires is not None and self.lease_expires <= now

    def order_key(self) -> tuple[int, float, int]:
        """Claim order (JOB-01): higher priority, then earlier due time, then enqueue order."""
        return (-self.priority, self.due, self.seq)

    def reported_state(self, now: float) -> str:
        return reported_state(self.state, self.due, now)

    def snapshot(
        self,
        now: float,
        *,
        ahead: int | None = None,
        created: bool = True,
        executions: bool = False,
    ) -> Job:
        """The Job the user sees; a copy, so later changes to the row do not leak into it."""
        return Job(
            id=self.id,
            task=self.task,
            queue=self.queue,
            args=load(self.payload),
            state=self.reported_state(now),
            priority=self.priority,
            attempts=self.attempts,
            max_attempts=self.max_attempts,
            due_at=self.due,
            created_at=self.created_at,
            started_at=self.started_at,
            finished_at=self.finished_at,
            error=self.error,
            result=load(self.result),
            key=self.key,
            group=self.group,
            after=self.after,
            ahead=ahead,
            created=created,
            cancel_requested=self.cancel_requested,
            executions=[e.freeze() for e in self.executions] if executions else [],
        )


def ahead(row: Row, rows: Iterable[Row], now: float) -> int | None:
    """JOB-11: pending jobs of the row's queue due by max(now, its due) that claim before it."""
    if row.state != PENDING:
        return None
    horizon, key = max(now, row.due), row.order_key()
    return sum(
        1
        for r in rows
        if r.state == PENDING and r.queue == row.queue and r.due <= horizon and r.order_key() < key
    )


class Limits:
    """The limits of one claim (LIM-01..03): live leases per scope, counted once from the rows,
    and the log of recent starts per scope that outlives the claim (it belongs to the store)."""

    def __init__(self, rows: Iterable[Row], starts: dict[Scope, deque[float]], now: float) -> None:
        self.now = now
        self.starts = starts
        self.running: dict[Scope, int] = {}
        for row in rows:
            if row.state == RUNNING:
                for scope in _scopes(row):
                    self.running[scope] = self.running.get(scope, 0) + 1

    def queue_room(self, queue: str, policy: QueuePolicy) -> bool:
        """True when the queue itself is not full (by concurrency or rate)."""
        return self._room((queue, None), policy.concurrency, policy.rate)

    def room(self, row: Row, policy: QueuePolicy) -> bool:
        """True when neither the queue nor the row's group is full (by concurrency or rate)."""
        if not self._room((row.queue, None), policy.concurrency, policy.rate):
            return False
        # Jobs without a group are not group-limited.
        return row.group is None or self._room(
            (row.queue, row.group), policy.group_concurrency, policy.group_rate
        )

    def take(self, row: Row) -> None:
        for scope in _scopes(row):
            self.running[scope] = self.running.get(scope, 0) + 1
            self.starts.setdefault(scope, deque()).append(self.now)

    def _room(self, scope: Scope, cap: int | None, rate: tuple[int, float] | None) -> bool:
        if cap is not None and self.running.get(scope, 0) >= cap:
            return False
        if rate is None:
            return True
        count, period = rate
        starts = self.starts.setdefault(scope, deque())
        while starts and starts[0] <= self.now - period:  # the window is (now - period, now]
            starts.popleft()
        return sum(1 for s in starts if s <= self.now) < count


def _scopes(row: Row) -> list[Scope]:
    return [(row.queue, None)] if row.group is None else [(row.queue, None), (row.queue, row.group)]
